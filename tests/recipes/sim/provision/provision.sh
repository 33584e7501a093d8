#!/usr/bin/env bash
# hbtui's simulator recipe (tests/sim/smolvm): the guest runs with the host's /usr
# read-only (Debian 12 here), so nothing can be installed. It installs the real guest/
# files, creates agent and /data through the shared provision/lib.sh (both symlinks into
# the real recipe), and puts a stand-in `executor` (executor-standin, python3) where npm
# would put the real one, so the real hb-workload, bridge and hb are exercised.
# Same contract and step markers as provision/provision.sh; HB_DRY_RUN=1 prints them.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HB_RECIPE_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=../../../../provision/lib.sh
. "$HB_RECIPE_DIR/provision/lib.sh"

HB_RECIPE_NAME=sim
# shellcheck disable=SC2034  # read through HB_VERSION_KEYS
EXECUTOR_VERSION=1.5.9-hbtui-standin
HB_VERSION_KEYS="EXECUTOR_VERSION"
HB_REQUIRED_TOOLS="executor socat tmux python3 curl"
# The boxes share the host's /usr, where .ci/run installs the real claude and codex: wiring
# them at every start (`claude mcp add`, `codex mcp add`) cost ~1.5 s of CPU per box. The
# tests that want it run `hb wire-mcp` or turn this back on (tests/core/recipe/test_mcp_wiring.py).
HB_ENV_EXTRA=HB_MCP_AUTOWIRE=0

trap 'printf "provision (sim): failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

# What the box needs from the host's /usr, since apt cannot run here.
step_host_tools() {
    local t missing=()
    for t in bash socat tmux python3 curl flock timeout setsid getent useradd groupadd usermod install; do
        hb_have "$t" || missing+=("$t")
    done
    hb_have setpriv || hb_have runuser || missing+=("setpriv|runuser")
    ((${#missing[@]} == 0)) || hb_die "the simulator host lacks: ${missing[*]}"
    hb_log "host tools present (python3 $(python3 -c 'import platform; print(platform.python_version())'))"
}

step_executor_standin() {
    install -d -m 0755 "$HB_TOOLING" "$HB_NODE_GLOBAL" "$HB_NODE_GLOBAL/bin"
    install -m 0755 "$HB_RECIPE_DIR/provision/executor-standin" "$HB_NODE_GLOBAL/bin/executor"
    "$HB_NODE_GLOBAL/bin/executor" --version
}

step_verify() {
    hb_verify_guest
}

hb_run_steps host-tools agent-user data-skeleton executor-standin guest-files env-file agent-settings verify finish
