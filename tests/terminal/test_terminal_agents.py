"""The installed `hbtui` in a real terminal (tmux 160x45) against the simulator, with a box
whose agent is at work: `x` asks before stopping it, `p` pauses the box instead (its agent
goes on at resume), and `Z` resumes it."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from support import HBTUI_BIN, SIM_RECIPE
from support.agents import LIVE
from support.cli import in_box, ls_json, run_ok
from support.tmux import SOCKET, tmux, tmux_env, wait_screen

pytestmark = [
    pytest.mark.terminal,
    pytest.mark.sim,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def row(screen: str, name: str) -> str:
    return next((r for r in screen.splitlines() if r.startswith(f"│ {name} ")), "")


def test_stop_of_a_box_whose_agent_works_asks_and_pause_keeps_it(sim_env, tmp_path):
    run_ok("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env)
    in_box("b1", "sh", "-c", LIVE + "echo $pid > /tmp/agent-pid\n", env=sim_env)
    session = f"hbtui-{tmp_path.name}"[:40]
    env = dict(sim_env, TERM="xterm-256color")
    env_args = tmux_env(env)
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "45", *env_args, HBTUI_BIN)
    try:
        wait_screen(session, lambda s: "working" in row(s, "b1"), 60, "b1's agent working")
        tmux("send-keys", "-t", session, "x")
        wait_screen(session, lambda s: "Stop ends agents at work" in s, 15, "the ask")
        assert "Pause instead" in wait_screen(session, lambda s: "5e55104a" in s, 5, "the agent")
        tmux("send-keys", "-t", session, "p")
        wait_screen(session, lambda s: " paused " in row(s, "b1"), 60, "b1 paused")
        assert [b["state"] for b in ls_json(sim_env)] == ["paused"]
        tmux("send-keys", "-t", session, "Z")
        wait_screen(session, lambda s: " running " in row(s, "b1"), 60, "b1 running again")
        alive = in_box("b1", "sh", "-c", 'kill -0 "$(cat /tmp/agent-pid)" && echo alive',
                       env=sim_env)  # fmt: skip
        assert "alive" in alive
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
