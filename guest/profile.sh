# shellcheck shell=sh
# /etc/profile.d/hermes-box.sh: the box's login environment (installed by the hbtui recipe).
# POSIX sh: dash and bash login shells both source it. Safe to source more than once.
#
# For user agent every tool's state lands under /data/home/agent, so saving /data saves
# everything that matters. Other users (root) only get PATH and EDITOR.

hb_path_prepend() {
    case ":$PATH:" in
        *":$1:"*) ;;
        *) PATH="$1${PATH:+:$PATH}" ;;
    esac
}
hb_path_prepend /opt/hermes-box/tooling/uv
hb_path_prepend /opt/hermes-box/tooling/node-global/bin
hb_path_prepend /opt/hermes-box/bin

if [ "$(id -un 2>/dev/null)" = agent ]; then
    HOME=/data/home/agent
    XDG_CONFIG_HOME=$HOME/.config
    XDG_DATA_HOME=$HOME/.local/share
    XDG_STATE_HOME=$HOME/.local/state
    XDG_CACHE_HOME=$HOME/.cache
    HERMES_HOME=$HOME/.hermes
    CLAUDE_CONFIG_DIR=$HOME/.claude
    CODEX_HOME=$HOME/.codex
    # `npm install -g` by agent goes to ~/.local (durable, writable); the pinned tools stay
    # in /opt/hermes-box/tooling/node-global and are not self-updated.
    NPM_CONFIG_PREFIX=$HOME/.local
    DISABLE_AUTOUPDATER=1
    export HOME XDG_CONFIG_HOME XDG_DATA_HOME XDG_STATE_HOME XDG_CACHE_HOME
    export HERMES_HOME CLAUDE_CONFIG_DIR CODEX_HOME NPM_CONFIG_PREFIX DISABLE_AUTOUPDATER
    hb_path_prepend "$HOME/.local/bin"
    # Optional bearer token for executor's MCP endpoint (mode 0600, see `hb wire-mcp`).
    if [ -r "$XDG_CONFIG_HOME/hermes-box/executor-mcp.env" ]; then
        # shellcheck source=/dev/null
        . "$XDG_CONFIG_HOME/hermes-box/executor-mcp.env"
        [ -z "${EXECUTOR_MCP_TOKEN:-}" ] || export EXECUTOR_MCP_TOKEN
    fi
fi

export PATH
EDITOR=nvim
VISUAL=nvim
export EDITOR VISUAL
unset -f hb_path_prepend
