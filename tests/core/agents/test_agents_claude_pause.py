"""The real `claude` in a simulator box across a pause: while it waits for the user, a stop
without a terminal is refused and the agent is untouched; pause and resume keep the same
process and tmux, and it answers the next prompt; `stop --yes` ends it."""

from __future__ import annotations

import shutil

import pytest

from support import SIM_RECIPE
from support.agents import CLAUDE, FAKE_API, SETUP, in_box, sessions, wait_session
from support.cli import hbtui, ls_json, run_ok

pytestmark = [
    pytest.mark.real_agent,
    pytest.mark.sim,
    pytest.mark.skipif(
        shutil.which("node") is None, reason="node is missing (the box's agent helpers need it)"
    ),
    pytest.mark.skipif(CLAUDE is None, reason="claude is not installed (.ci/run installs the pin)"),
    pytest.mark.skipif(
        CLAUDE is not None and CLAUDE < (2, 1, 139),
        reason=f"claude {CLAUDE} predates the session files and hooks these tests drive",
    ),
]

PIDS = "tmux display -p -t main '#{pid} #{pane_pid}'"  # tmux's server, and claude itself


def requests(env) -> int:
    return len(in_box(env, "cat ~/api.log").splitlines())


def needs_you(env, command: str) -> dict:
    assert hbtui("send", "b1", f"run: {command}", env=env).returncode == 0
    return wait_session(env, lambda s: s["status"] == "needs-you", timeout=90)


@pytest.mark.timeout(900)
def test_a_paused_claude_goes_on_and_a_live_one_is_stopped_only_with_yes(sim_env):
    run_ok("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env)
    in_box(sim_env, "cat > ~/fake_api.py", input=FAKE_API.read_text())
    in_box(sim_env, SETUP)
    wait_session(sim_env, lambda s: s["status"] == "idle" and s["pane"])
    in_box(sim_env, "mkfifo ~/gate")
    asked = needs_you(sim_env, "cat ~/gate")
    before = in_box(sim_env, PIDS)

    stop = hbtui("stop", "b1", env=sim_env)
    assert stop.returncode == 2
    assert stop.stderr.strip().splitlines() == [
        f"error: stopping b1 would end its live agents: claude {asked['session_id'][:8]} "
        "(needs-you); refusing without a terminal to ask (pass --yes to go on)"
    ], stop.stderr
    [box] = ls_json(sim_env)
    assert box["state"] == "running"
    assert [s["status"] for s in sessions(sim_env)] == ["needs-you"]

    run_ok("pause", "b1", env=sim_env)
    [box] = ls_json(sim_env)
    assert box["state"] == "paused"
    run_ok("resume", "b1", env=sim_env)
    assert in_box(sim_env, PIDS) == before  # the same claude, in the same tmux

    # It answers: allowed, the command runs; then the next prompt is a new request.
    assert hbtui("approve", "b1", env=sim_env).returncode == 0
    wait_session(sim_env, lambda s: s["status"] == "working", timeout=60)
    in_box(sim_env, "echo go > ~/gate")
    wait_session(sim_env, lambda s: s["status"] == "idle", timeout=60)
    seen = requests(sim_env)
    assert hbtui("send", "b1", "hello again", env=sim_env).returncode == 0
    wait_session(sim_env, lambda s: s["status"] == "idle" and requests(sim_env) > seen, 60)
    assert in_box(sim_env, PIDS) == before

    needs_you(sim_env, "cat ~/gate")
    assert "✓ b1 stopped: stopped" in run_ok("stop", "b1", "--yes", env=sim_env)
