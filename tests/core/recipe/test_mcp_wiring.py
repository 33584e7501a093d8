"""`hb wire-mcp` gives the box's Claude Code executor's MCP endpoint with its bearer token
named, not written: the header holds `${EXECUTOR_MCP_TOKEN}`, which claude expands from the
agent's login environment when it connects. The token never reaches a command line (every
process in the box can read those) nor claude's config."""

from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from support import SIM_RECIPE
from support.cli import ArgvWatch, as_root, hbtui, ok

CLAUDE = shutil.which("claude")
TOKEN = "mcp-token-7f3a9c1e5b"
STATE = "/data/home/agent/.config/hermes-box"
HB = "/opt/hermes-box/bin/hb"

needs_claude = pytest.mark.skipif(CLAUDE is None, reason="claude is not installed (.ci/run does)")


@pytest.mark.real_agent
@needs_claude
def test_claude_expands_the_named_token_when_it_connects(tmp_path: Path) -> None:
    """What the recipe relies on, against the real claude: a user-scope HTTP server whose
    header names a variable gets the variable's value on the wire."""
    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            seen.append(self.headers.get("Authorization"))
            self.send_response(401)
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    url = f"http://127.0.0.1:{server.server_port}/mcp"
    try:
        header = "Authorization: Bearer ${EXECUTOR_MCP_TOKEN}"
        added = subprocess.run(
            [CLAUDE, "mcp", "add", "--transport", "http", "--scope", "user", "executor", url,
             "--header", header],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        config = (tmp_path / "claude" / ".claude.json").read_text()
        assert "${EXECUTOR_MCP_TOKEN}" in config
        subprocess.run(
            [CLAUDE, "mcp", "list"],
            env={**env, "EXECUTOR_MCP_TOKEN": TOKEN},
            capture_output=True,
            timeout=120,
        )
    finally:
        server.shutdown()
    assert f"Bearer {TOKEN}" in seen, seen


@pytest.mark.sim
def test_wire_mcp_keeps_the_token_off_command_lines_and_out_of_the_config(sim_env) -> None:
    ok(hbtui("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env))
    # A stand-in claude that records how it was configured (the real one is tested above).
    as_root(
        sim_env,
        "b1",
        f"""set -e
        install -d -o agent -g agent -m 0700 {STATE}
        umask 077
        echo 'EXECUTOR_MCP_TOKEN={TOKEN}' > {STATE}/executor-mcp.env
        chown agent:agent {STATE}/executor-mcp.env
        mkdir -p /usr/local/bin
        printf '%s\\n' '#!/bin/sh' 'printf "%s\\n" "$@" >> /tmp/claude-args' > /usr/local/bin/claude
        chmod 755 /usr/local/bin/claude
        """,
    )
    # The sim recipe sets HB_MCP_AUTOWIRE=0: a supervisor pass leaves the wiring alone.
    as_root(sim_env, "b1", f"{HB} _reconcile")
    assert as_root(sim_env, "b1", "ls /tmp").split().count("claude-args") == 0
    with ArgvWatch(TOKEN) as watch:
        ok(hbtui("exec", "b1", "--", "hb", "wire-mcp", "--force", env=sim_env))
    assert watch.samples > 0
    assert watch.hits == []
    args = as_root(sim_env, "b1", "cat /tmp/claude-args").splitlines()
    assert "Authorization: Bearer ${EXECUTOR_MCP_TOKEN}" in args
    assert not any(TOKEN in arg for arg in args)
    # The agent's login environment has the variable the header names.
    said = as_root(sim_env, "b1", "su - agent -c 'printenv EXECUTOR_MCP_TOKEN'")
    assert said.strip() == TOKEN
    # Without the setting (every other recipe), the next pass after the stamp is gone (as
    # after a repair) wires it by itself.
    as_root(
        sim_env,
        "b1",
        f"rm /tmp/claude-args {STATE}/mcp-wired && sed -i /^HB_MCP_AUTOWIRE=/d /etc/hermes-box.env"
        f" && {HB} _reconcile",
    )
    args = as_root(sim_env, "b1", "cat /tmp/claude-args").splitlines()
    assert "Authorization: Bearer ${EXECUTOR_MCP_TOKEN}" in args
    assert "claude" in as_root(sim_env, "b1", f"cat {STATE}/mcp-wired").splitlines()[1].split()
