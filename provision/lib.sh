# shellcheck shell=bash
# shellcheck disable=SC2034  # the constants are used by the recipes that source this file
# hbtui recipe library: the step runner and the guest-side steps every recipe shares.
#
# Sourced (never executed) by provision/provision.sh and by test recipes such as
# tests/recipes/sim/provision/provision.sh. A recipe:
#   1. sets HB_RECIPE_DIR (the unpacked recipe root, holding provision/ and guest/),
#   2. defines step functions for its own steps (step_<name with - as _>),
#   3. calls `hb_run_steps NAME...` with its ordered step list.
# Each step prints `::hbtui:: step I/N NAME` first. With HB_DRY_RUN=1 only the
# markers are printed and nothing is changed (tests use this).
#
# Every step is idempotent: `hbtui repair` reruns the whole recipe on a live box.

HB_ROOT=/opt/hermes-box
HB_BIN=$HB_ROOT/bin
HB_TOOLING=$HB_ROOT/tooling
HB_NODE_GLOBAL=$HB_TOOLING/node-global
HB_DATA=/data
HB_LOGS=$HB_DATA/logs
HB_AGENT=agent
HB_AGENT_HOME=$HB_DATA/home/agent
HB_ENV_FILE=/etc/hermes-box.env
HB_PROFILE=/etc/profile.d/hermes-box.sh
HB_PROVISIONED=$HB_ROOT/provisioned
HB_EXECUTOR_PORT=4788

hb_log() { printf '%s\n' "$*"; }
hb_die() { printf 'provision: error: %s\n' "$*" >&2; exit 1; }
hb_have() { command -v "$1" >/dev/null 2>&1; }

# Run the named steps in order. Fails before doing anything if a step has no function.
hb_run_steps() {
    local total=$# i=0 name fn
    for name in "$@"; do
        fn=step_${name//-/_}
        declare -F "$fn" >/dev/null || hb_die "recipe step '$name' has no function $fn"
    done
    if [[ ${HB_DRY_RUN:-0} != 1 ]]; then
        [[ $(id -u) -eq 0 ]] || hb_die "the recipe must run as root"
        if ! [[ ${HB_PORT:-} =~ ^[0-9]{1,5}$ ]] || ((HB_PORT < 1 || HB_PORT > 65535)); then
            hb_die "HB_PORT must be set to the box's port (got '${HB_PORT:-}')"
        fi
        [[ -d ${HB_RECIPE_DIR:-} ]] || hb_die "HB_RECIPE_DIR is not set to the recipe folder"
    fi
    for name in "$@"; do
        i=$((i + 1))
        printf '::hbtui:: step %d/%d %s\n' "$i" "$total" "$name"
        [[ ${HB_DRY_RUN:-0} == 1 ]] && continue
        "step_${name//-/_}"
    done
    [[ ${HB_DRY_RUN:-0} == 1 ]] || hb_log "provision: box '${HB_BOX:-?}' is provisioned"
}

# --- shared steps ------------------------------------------------------------

# User `agent` (HOME /data/home/agent, bash) with passwordless sudo when sudo exists.
step_agent_user() {
    mkdir -p "$HB_DATA/home"
    local shell=/bin/bash
    [[ -x $shell ]] || shell=/bin/sh
    if ! getent group "$HB_AGENT" >/dev/null; then
        groupadd "$HB_AGENT"
    fi
    if id -u "$HB_AGENT" >/dev/null 2>&1; then
        local home
        home=$(getent passwd "$HB_AGENT" | cut -d: -f6)
        if [[ $home != "$HB_AGENT_HOME" ]]; then
            usermod -d "$HB_AGENT_HOME" "$HB_AGENT"
        fi
    else
        # No -m: the home lives on /data and is created by the data-skeleton step;
        # a restored /data must not be overwritten with /etc/skel files.
        useradd -g "$HB_AGENT" -d "$HB_AGENT_HOME" -M -s "$shell" -c "hermes-box agent" "$HB_AGENT"
    fi
    if hb_have sudo; then
        mkdir -p /etc/sudoers.d
        local tmp
        tmp=$(mktemp /etc/sudoers.d/.hermes-box.XXXXXX)
        printf '%s ALL=(ALL) NOPASSWD: ALL\n' "$HB_AGENT" >"$tmp"
        chmod 0440 "$tmp"
        if hb_have visudo && ! visudo -cqf "$tmp"; then
            rm -f "$tmp"
            hb_die "generated sudoers entry did not validate"
        fi
        mv -f "$tmp" /etc/sudoers.d/hermes-box-agent
    else
        hb_log "sudo is not installed: agent gets no sudo rule"
    fi
}

# /data skeleton, owned by agent. Existing content (a restored box) is kept.
step_data_skeleton() {
    install -d -m 0755 "$HB_DATA" "$HB_DATA/home"
    install -d -m 0755 -o "$HB_AGENT" -g "$HB_AGENT" "$HB_LOGS"
    install -d -m 0750 -o "$HB_AGENT" -g "$HB_AGENT" "$HB_AGENT_HOME"
    local d
    for d in workspace .config .config/hermes-box .local .local/bin .local/share .local/state .cache; do
        install -d -o "$HB_AGENT" -g "$HB_AGENT" "$HB_AGENT_HOME/$d"
    done
    # Codex refuses to run at all while its CODEX_HOME (profile.sh) is missing.
    install -d -m 0700 -o "$HB_AGENT" -g "$HB_AGENT" "$HB_AGENT_HOME/.codex"
    local f
    for f in workload executor socat; do
        [[ -e $HB_LOGS/$f.log ]] || install -m 0644 -o "$HB_AGENT" -g "$HB_AGENT" /dev/null "$HB_LOGS/$f.log"
    done
}

# hb, hb-workload, hb-as-agent, the agent helpers (hb-agent-hook, hb-agents and their
# hb-agents-lib.js), the login
# profile and tmux.conf from the recipe's guest/.
step_guest_files() {
    local src=$HB_RECIPE_DIR/guest f
    for f in hb hb-workload hb-as-agent hb-agent-hook hb-agents hb-agents-lib.js profile.sh \
        tmux.conf; do
        [[ -f $src/$f ]] || hb_die "missing guest file $src/$f"
    done
    install -d -m 0755 "$HB_ROOT" "$HB_BIN" "$HB_TOOLING" "$HB_ROOT/run"
    for f in hb hb-workload hb-as-agent hb-agent-hook hb-agents; do
        install -m 0755 "$src/$f" "$HB_BIN/$f"
    done
    install -m 0644 "$src/hb-agents-lib.js" "$HB_BIN/hb-agents-lib.js"
    install -d -m 0755 /etc/profile.d
    install -m 0644 "$src/profile.sh" "$HB_PROFILE"
    install -m 0644 "$src/tmux.conf" /etc/tmux.conf
    # Give root's interactive shells the same PATH as agent's.
    ln -sfn "$HB_BIN/hb" /usr/local/bin/hb
}

# /etc/hermes-box.env: what the guest helpers read at run time. Callers set
# HB_ENV_EXTRA (lines KEY=value) for recipe-specific settings such as HB_EXECUTOR_CMD.
step_env_file() {
    local tmp key
    tmp=$(mktemp /etc/.hermes-box.env.XXXXXX)
    {
        printf '# Written by the hbtui recipe (%s) on %s. Rewritten by hbtui repair.\n' \
            "${HB_RECIPE_NAME:-unknown}" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
        printf 'HB_BOX=%q\n' "${HB_BOX:-}"
        printf 'HB_PORT=%q\n' "$HB_PORT"
        printf 'HB_EXECUTOR_PORT=%q\n' "$HB_EXECUTOR_PORT"
        printf 'HB_RECIPE_NAME=%q\n' "${HB_RECIPE_NAME:-unknown}"
        for key in ${HB_VERSION_KEYS:-}; do
            printf '%s=%q\n' "$key" "${!key:-}"
        done
        printf 'HB_REQUIRED_TOOLS=%q\n' "${HB_REQUIRED_TOOLS:-}"
        [[ -z ${HB_ENV_EXTRA:-} ]] || printf '%s\n' "$HB_ENV_EXTRA"
    } >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" "$HB_ENV_FILE"
    # A repair may change the executor or its token: let hb-workload wire MCP again.
    rm -f "$HB_AGENT_HOME/.config/hermes-box/mcp-wired"
}

# Claude Code's managed settings (/etc/claude-code/managed-settings.json, which the agent
# cannot override): every hook event goes to hb-agent-hook, so `hb agents` knows what each
# session does without reading its screen; and the permission mode is the box's setting,
# HB_AGENT_PERMISSIONS: `ask` (the default: Claude asks before it runs a command; "auto",
# Claude's own default, needs a check on Anthropic's server) or `skip` (asks nothing; hbtui
# allows it only for a box whose egress is an allow list and whose keys the engine holds).
# HB_AGENT_DECISION_SECONDS: how long a permission request waits for hbtui's answer while
# Claude's own prompt is on screen (default 30).
step_agent_settings() {
    local mode=${HB_AGENT_PERMISSIONS:-ask} wait=${HB_AGENT_DECISION_SECONDS:-30} permissions
    case $mode in
        ask) permissions='{"defaultMode": "default", "disableBypassPermissionsMode": "disable"}' ;;
        # Without skipDangerousModePermissionPrompt Claude asks at every start whether
        # bypass mode is accepted (checked with 2.1.332).
        skip) permissions='{"defaultMode": "bypassPermissions"},
  "skipDangerousModePermissionPrompt": true' ;;
        *) hb_die "HB_AGENT_PERMISSIONS must be ask or skip (got '$mode')" ;;
    esac
    [[ $wait =~ ^[0-9]{1,4}$ ]] || hb_die "HB_AGENT_DECISION_SECONDS must be a number of seconds"
    local hook=$HB_BIN/hb-agent-hook event sep='' tmp
    install -d -m 0755 /etc/claude-code
    tmp=$(mktemp /etc/claude-code/.managed-settings.XXXXXX)
    {
        printf '{\n  "hooks": {'
        for event in SessionStart UserPromptSubmit PreToolUse PermissionRequest PostToolUse \
            Notification Stop SessionEnd; do
            printf '%s\n    "%s": [{"matcher": "*", "hooks": [{"type": "command", "command": "%s", "timeout": %d}]}]' \
                "$sep" "$event" "$hook" $((wait + 30))
            sep=,
        done
        printf '\n  },\n  "permissions": %s\n}\n' "$permissions"
    } >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" /etc/claude-code/managed-settings.json
    hb_codex_settings "$mode" $((wait + 30))
    hb_hermes_settings
    hb_env_set HB_AGENT_PERMISSIONS "$mode"
    hb_env_set HB_AGENT_DECISION_SECONDS "$wait"
    install -d -m 0700 -o "$HB_AGENT" -g "$HB_AGENT" "$HB_AGENT_HOME/.local/state/hermes-box" \
        "$HB_AGENT_HOME/.local/state/hermes-box/agents"
    hb_log "claude-code, codex and hermes: hooks to hb-agent-hook, permissions $mode"
}

# Codex's managed config (/etc/codex/managed_config.toml: the layer above the user's
# config.toml and -c, whose hooks run without Codex's trust review; checked with codex
# 0.171.0): the same hook events (Codex has no Notification) and its `notify` program go
# to hb-agent-hook; the approval policy follows the box's mode (`ask`: on-request, Codex
# asks before a command leaves its sandbox; `skip`: never, no sandbox); and no app-server
# daemon, so hooks run as children of the Codex in the pane (a daemon outlives the session
# and has no pane). Args: MODE HOOK_TIMEOUT_SECONDS.
hb_codex_settings() {
    local mode=$1 timeout=$2 hook=$HB_BIN/hb-agent-hook event seconds tmp
    install -d -m 0755 /etc/codex
    tmp=$(mktemp /etc/codex/.managed_config.XXXXXX)
    {
        printf '# Written by the hbtui recipe; rewritten by hbtui repair.\n'
        printf 'notify = ["%s", "--agent", "codex", "--notify"]\n' "$hook"
        if [[ $mode == skip ]]; then
            printf 'approval_policy = "never"\nsandbox_mode = "danger-full-access"\n'
        else
            printf 'approval_policy = "on-request"\n'
        fi
        printf '\n[features]\ndaemon_auto_start = false\n'
        for event in SessionStart UserPromptSubmit PreToolUse PermissionRequest PostToolUse \
            Stop Interrupt SessionEnd; do
            # Only a permission request waits; Codex clamps Interrupt and SessionEnd to 3 s.
            case $event in
                PermissionRequest) seconds=$timeout ;;
                Interrupt | SessionEnd) seconds=3 ;;
                *) seconds=10 ;;
            esac
            printf '\n[[hooks.%s]]\n[[hooks.%s.hooks]]\ntype = "command"\n' "$event" "$event"
            printf 'command = "%s --agent codex"\ntimeout = %d\n' "$hook" "$seconds"
        done
    } >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" /etc/codex/managed_config.toml
}

# Hermes's managed scope (/etc/hermes/config.yaml, whose keys win over the user's
# ~/.hermes/config.yaml; hermes-agent 0.19.0): its shell hooks go to hb-agent-hook, accepted
# without Hermes's first-use prompt (`hooks_auto_accept`, which then also covers hooks the
# user adds). Hermes's hooks only observe, so its permission mode is not set here.
hb_hermes_settings() {
    local hook=$HB_BIN/hb-agent-hook event tmp
    install -d -m 0755 /etc/hermes
    tmp=$(mktemp /etc/hermes/.config.XXXXXX)
    {
        printf '# Written by the hbtui recipe; rewritten by hbtui repair.\n'
        printf 'hooks_auto_accept: true\nhooks:\n'
        for event in on_session_start pre_llm_call pre_tool_call post_tool_call \
            pre_approval_request post_approval_response on_session_end on_session_finalize; do
            printf '  %s:\n    - command: %s --agent hermes\n      timeout: 10\n' "$event" "$hook"
        done
    } >"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" /etc/hermes/config.yaml
}

# Checks that the guest helpers work in place; shared by every recipe.
hb_verify_guest() {
    local f
    for f in hb hb-workload hb-as-agent; do
        [[ -x $HB_BIN/$f ]] || hb_die "$HB_BIN/$f is missing"
    done
    "$HB_BIN/hb-as-agent" -- true || hb_die "hb-as-agent cannot run a command as $HB_AGENT"
    # Users, /data layout, env file and the tools on agent's PATH (services are not up yet).
    "$HB_BIN/hb" doctor --static || hb_die "hb doctor --static found problems"
}

step_finish() {
    install -d -m 0755 "$HB_ROOT"
    touch "$HB_PROVISIONED"
}

# --- bases: generalize (provision/generalize.sh) and the per-box step (first-boot.sh) ---
#
# `hbtui base build` provisions a box, runs provision/generalize.sh in it (services
# quiesced), stops and packs it. A box made from that base runs provision/first-boot.sh
# instead of the whole recipe. What is per box, and so removed from a base: the paths
# below (recipes may add to HB_PER_BOX_PATHS before calling hb_run_steps).
HB_PER_BOX_PATHS=(
    "$HB_AGENT_HOME/.executor"                                  # executor's state and keys
    "$HB_AGENT_HOME/.config/hermes-box/executor-mcp.env"        # its MCP token
    "$HB_AGENT_HOME/.config/hermes-box/mcp-wired"
    "$HB_AGENT_HOME/.claude" "$HB_AGENT_HOME/.claude.json"      # agent logins
    "$HB_AGENT_HOME/.local/state/hermes-box/agents"             # agent session status
    "$HB_AGENT_HOME/.codex/auth.json" "$HB_AGENT_HOME/.config/gh" "$HB_AGENT_HOME/.git-credentials"
    "$HB_AGENT_HOME/.hermes/.env" "$HB_AGENT_HOME/.hermes/auth.json"
    "$HB_AGENT_HOME/.bash_history" "$HB_AGENT_HOME/.python_history" "$HB_AGENT_HOME/.lesshst"
    "$HB_AGENT_HOME/.viminfo" "$HB_AGENT_HOME/.local/state/nvim"  # shell and editor history
    /root/.bash_history /root/.python_history /root/.lesshst /root/.hbtui-recipe
    "$HB_ROOT/run"                                              # pid files and back-offs
    /etc/ssh/ssh_host_rsa_key /etc/ssh/ssh_host_rsa_key.pub
    /etc/ssh/ssh_host_ecdsa_key /etc/ssh/ssh_host_ecdsa_key.pub
    /etc/ssh/ssh_host_ed25519_key /etc/ssh/ssh_host_ed25519_key.pub
)

# Sets a KEY=value line of the env file (added when absent).
hb_env_set() {
    local key=$1 value=$2 tmp
    [[ -f $HB_ENV_FILE ]] || hb_die "$HB_ENV_FILE is missing: this box was not provisioned"
    tmp=$(mktemp /etc/.hermes-box.env.XXXXXX)
    grep -v "^$key=" "$HB_ENV_FILE" >"$tmp" || true
    printf '%s=%q\n' "$key" "$value" >>"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" "$HB_ENV_FILE"
}

# A base holds no box's identity: no provisioned marker (so a box made from it waits for
# its per-box step), no name or port, no logs, none of HB_PER_BOX_PATHS.
step_forget_identity() {
    rm -f "$HB_PROVISIONED"
    hb_env_set HB_BOX ""
    hb_env_set HB_PORT ""
    local p f
    for p in "${HB_PER_BOX_PATHS[@]}"; do
        rm -rf -- "$p"
    done
    for f in "$HB_LOGS"/*.log; do
        [[ -f $f ]] && : >"$f"
    done
    [[ ! -f /etc/machine-id ]] || : >/etc/machine-id
    hb_log "per-box state removed"
}

# The box's own name and port, in /etc/hostname, /etc/hosts and the env file.
step_box_identity() {
    [[ -n ${HB_BOX:-} ]] || hb_die "HB_BOX must be set to the box's name"
    printf '%s\n' "$HB_BOX" >/etc/hostname
    if [[ -f /etc/hosts ]] && ! grep -q "[[:space:]]$HB_BOX\$" /etc/hosts; then
        printf '127.0.1.1\t%s\n' "$HB_BOX" >>/etc/hosts
    fi
    hostname "$HB_BOX" 2>/dev/null || true
    hb_env_set HB_BOX "$HB_BOX"
    hb_env_set HB_PORT "$HB_PORT"
    if [[ -f /etc/machine-id && ! -s /etc/machine-id ]] && hb_have systemd-machine-id-setup; then
        systemd-machine-id-setup >/dev/null 2>&1 || true
    fi
    # Whatever quiesce the base (or a branch source) was in is not this box's.
    rm -f "$HB_AGENT_HOME/.config/hermes-box/quiesced" "$HB_AGENT_HOME/.config/hermes-box/mcp-wired"
    hb_log "box $HB_BOX, port $HB_PORT"
}

# The per-box step: what a box made from a base (or branched) needs of its own.
hb_first_boot() {
    hb_run_steps box-identity data-skeleton agent-settings finish
    [[ ${HB_DRY_RUN:-0} == 1 ]] || hb_wake_workload
}

# A workload already running (a box copied from a provisioned one) keeps the services
# down while the copied quiesce marker is there: a pass now starts them, not in 5 s.
hb_wake_workload() {
    local pid _rest
    [[ -r $HB_ROOT/run/workload.pid ]] || return 0
    read -r pid _rest <"$HB_ROOT/run/workload.pid" || return 0
    if [[ $pid =~ ^[0-9]+$ ]]; then
        kill -USR1 "$pid" 2>/dev/null || true
    fi
}
