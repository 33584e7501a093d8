#!/usr/bin/env bash
# The hbtui box recipe: run once as root inside a new ubuntu:24.04 box (and again by
# `hbtui repair`). hbtui unpacks the recipe at /root/.hbtui-recipe/ and sets HB_BOX and
# HB_PORT. Every step prints `::hbtui:: step I/N NAME` first and is idempotent.
# HB_DRY_RUN=1 prints the step markers and changes nothing.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HB_RECIPE_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib.sh
. "$HB_RECIPE_DIR/provision/lib.sh"
# shellcheck source=versions.env
. "$HB_RECIPE_DIR/provision/versions.env"

HB_RECIPE_NAME=ubuntu
HB_VERSION_KEYS="NODE_MAJOR CLAUDE_CODE_VERSION CODEX_VERSION EXECUTOR_VERSION HERMES_AGENT_VERSION HERMES_PYTHON_VERSION UV_VERSION"
HB_REQUIRED_TOOLS="node npm claude codex executor uv hermes socat tmux nvim git rg jq curl setpriv"
HB_ENV_EXTRA=
HERMES_VENV=/usr/local/lib/hermes-agent
NODE_MIN_MAJOR=22  # claude-code 2.1 declares node >= 22

BASE_PACKAGES=(
    ca-certificates curl gnupg sudo git socat tmux neovim zstd jq less iproute2 util-linux
    ripgrep xz-utils procps unzip openssh-client passwd
)

export DEBIAN_FRONTEND=noninteractive
trap 'printf "provision: failed at line %s: %s\n" "$LINENO" "$BASH_COMMAND" >&2' ERR

apt_get() {
    apt-get -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

apt_update() {
    local try
    for try in 1 2 3; do
        apt-get -q update && return 0
        hb_log "apt-get update failed (attempt $try), retrying"
        sleep $((try * 3))
    done
    hb_die "apt-get update failed"
}

# Prints the packages of "$@" that are not installed.
missing_packages() {
    local p
    for p in "$@"; do
        [[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == "install ok installed" ]] || printf '%s\n' "$p"
    done
}

download() { curl -fsSL --retry 3 --retry-delay 2 --connect-timeout 20 -o "$2" "$1"; }

step_base_packages() {
    local missing
    mapfile -t missing < <(missing_packages "${BASE_PACKAGES[@]}")
    if ((${#missing[@]} == 0)); then
        hb_log "base packages already installed"
        return
    fi
    hb_log "installing: ${missing[*]}"
    apt_update
    apt_get install --no-install-recommends "${missing[@]}"
    apt-get clean
}

node_major() {
    local v
    v=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null) || v=0
    printf '%s\n' "${v:-0}"
}

step_node() {
    local major
    major=$(node_major)
    if ((major >= NODE_MIN_MAJOR)); then
        hb_log "node $(node --version) already installed"
        return
    fi
    local candidate
    candidate=$(apt-cache policy nodejs 2>/dev/null | awk '/Candidate:/ {print $2}')
    candidate=${candidate#*:}
    if [[ ${candidate%%.*} =~ ^[0-9]+$ ]] && ((${candidate%%.*} >= NODE_MIN_MAJOR)); then
        hb_log "installing the distribution's nodejs $candidate"
        apt_get install --no-install-recommends nodejs npm
    else
        hb_log "distribution nodejs (${candidate:-none}) is too old: using NodeSource node ${NODE_MAJOR}.x"
        local arch key
        arch=$(dpkg --print-architecture)
        install -d -m 0755 /etc/apt/keyrings
        key=$(mktemp)
        download https://deb.nodesource.com/gpgkey/nodesource-repo.gpg.key "$key"
        gpg --batch --yes --dearmor -o /etc/apt/keyrings/nodesource.gpg "$key"
        rm -f "$key"
        chmod 0644 /etc/apt/keyrings/nodesource.gpg
        printf 'deb [arch=%s signed-by=/etc/apt/keyrings/nodesource.gpg] https://deb.nodesource.com/node_%s.x nodistro main\n' \
            "$arch" "$NODE_MAJOR" >/etc/apt/sources.list.d/nodesource.list
        printf 'Package: nodejs\nPin: origin deb.nodesource.com\nPin-Priority: 600\n' >/etc/apt/preferences.d/nodesource
        apt_update
        apt_get install --no-install-recommends nodejs
    fi
    apt-get clean
    major=$(node_major)
    ((major >= NODE_MIN_MAJOR)) || hb_die "node >= $NODE_MIN_MAJOR is required, got $(node --version 2>&1)"
    hb_log "node $(node --version)"
}

step_npm_tools() {
    local prefix=$HB_NODE_GLOBAL spec name ver have todo=()
    install -d -m 0755 "$prefix"
    for spec in "@anthropic-ai/claude-code@$CLAUDE_CODE_VERSION" "@openai/codex@$CODEX_VERSION" "executor@$EXECUTOR_VERSION"; do
        name=${spec%@*}
        ver=${spec##*@}
        have=$(node -p 'require(process.argv[1]).version' "$prefix/lib/node_modules/$name/package.json" 2>/dev/null) || have=
        if [[ $have == "$ver" ]]; then
            hb_log "$name $ver already installed"
        else
            todo+=("$spec")
        fi
    done
    ((${#todo[@]})) || return 0
    hb_log "npm install -g ${todo[*]}"
    local cache
    cache=$(mktemp -d)
    npm install -g --prefix "$prefix" --cache "$cache" --no-fund --no-audit --loglevel=warn "${todo[@]}"
    rm -rf "$cache"
    for name in claude codex executor; do
        [[ -x $prefix/bin/$name ]] || hb_die "$prefix/bin/$name was not installed"
    done
}

step_uv() {
    local dir=$HB_TOOLING/uv
    if [[ $("$dir/uv" --version 2>/dev/null) == "uv $UV_VERSION"* ]]; then
        hb_log "uv $UV_VERSION already installed"
        return
    fi
    local triple
    case $(uname -m) in
        x86_64 | amd64) triple=x86_64-unknown-linux-gnu ;;
        aarch64 | arm64) triple=aarch64-unknown-linux-gnu ;;
        *) hb_die "no uv build for $(uname -m)" ;;
    esac
    local base=https://github.com/astral-sh/uv/releases/download/$UV_VERSION tmp expected actual
    tmp=$(mktemp -d)
    download "$base/uv-$triple.tar.gz" "$tmp/uv.tar.gz"
    download "$base/uv-$triple.tar.gz.sha256" "$tmp/uv.sha256"
    expected=$(awk '{print $1; exit}' "$tmp/uv.sha256")
    actual=$(sha256sum "$tmp/uv.tar.gz" | awk '{print $1}')
    [[ -n $expected && $expected == "$actual" ]] || hb_die "uv download checksum mismatch"
    tar -xzf "$tmp/uv.tar.gz" -C "$tmp"
    install -d -m 0755 "$dir"
    install -m 0755 "$tmp/uv-$triple/uv" "$tmp/uv-$triple/uvx" "$dir/"
    rm -rf "$tmp"
    hb_log "$("$dir/uv" --version)"
}

step_hermes() {
    local uv=$HB_TOOLING/uv/uv have
    export UV_PYTHON_INSTALL_DIR=$HB_TOOLING/python
    have=$("$HERMES_VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("hermes-agent"))' 2>/dev/null) || have=
    if [[ $have == "$HERMES_AGENT_VERSION" && -x $HERMES_VENV/bin/hermes ]]; then
        hb_log "hermes-agent $have already installed"
    else
        local cache
        cache=$(mktemp -d)
        if ! "$HERMES_VENV/bin/python" -c 'import sys' 2>/dev/null; then
            rm -rf "$HERMES_VENV"
            UV_CACHE_DIR=$cache "$uv" venv --python "$HERMES_PYTHON_VERSION" --python-preference only-managed "$HERMES_VENV"
        fi
        UV_CACHE_DIR=$cache "$uv" pip install --python "$HERMES_VENV/bin/python" "hermes-agent==$HERMES_AGENT_VERSION"
        rm -rf "$cache"
        [[ -x $HERMES_VENV/bin/hermes ]] || hb_die "hermes-agent $HERMES_AGENT_VERSION installed no 'hermes' command"
    fi
    ln -sfn "$HERMES_VENV/bin/hermes" /usr/local/bin/hermes
}

step_verify() {
    hb_verify_guest
}

hb_run_steps base-packages agent-user data-skeleton node npm-tools uv hermes guest-files env-file agent-settings verify finish
