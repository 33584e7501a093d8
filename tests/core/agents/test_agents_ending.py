"""Nothing ends a live agent without asking, against the simulator: a box with a session
that is working (a status file beside a live process, as the box's hook writes one) is
not stopped, removed, repaired, remade or restarted for a branch by a CLI without a
terminal unless `--yes`; at a terminal the CLI asks, and only `y` goes on."""

from __future__ import annotations

import os
import pty
import subprocess

import pytest

from support import HBTUI_BIN, SIM_RECIPE
from support.agents import LIVE
from support.cli import as_root, hbtui, in_box, ls_json, run_ok

pytestmark = pytest.mark.sim


def live_box(env) -> None:
    run_ok("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=env)
    in_box("b1", "sh", "-c", LIVE, env=env)


def refused(done, doing: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"error: {doing} would end its live agents: claude 5e55104a (working); refusing "
        "without a terminal to ask (pass --yes to go on)"
    ], done.stderr


def untouched(env) -> None:
    [box] = ls_json(env)
    assert box["state"] == "running"
    [session] = [s for s in _sessions(env) if s["session_id"] == "5e55104aaa"]
    assert session["status"] == "working"


def _sessions(env) -> list[dict]:
    import json

    [row] = json.loads(run_ok("agents", "b1", "--json", env=env))
    return list(row["sessions"])


def test_without_a_terminal_a_live_agent_is_ended_only_with_yes(sim_env):
    live_box(sim_env)
    refused(hbtui("stop", "b1", env=sim_env), "stopping b1")
    refused(hbtui("rm", "b1", env=sim_env), "deleting b1")
    refused(hbtui("repair", "b1", env=sim_env), "repairing b1 (its recipe runs again)")
    refused(
        hbtui("credentials", "b1", "add", "anthropic", env=sim_env),
        "making b1 again with other credentials",
    )
    refused(
        hbtui("branch", "b1", "b2", env=sim_env),
        "branching b1 (it stops, its disk is copied, and it starts again)",
    )
    untouched(sim_env)
    assert [b["name"] for b in ls_json(sim_env)] == ["b1"]

    # Pausing ends nothing: it needs no answer, and the session is there after it.
    run_ok("pause", "b1", env=sim_env)
    run_ok("resume", "b1", env=sim_env)
    untouched(sim_env)

    out = run_ok("stop", "b1", "--yes", env=sim_env)
    assert "✓ b1 stopped: stopped" in out
    # Stopped, it has no live agent: nothing to ask.
    run_ok("rm", "b1", "--force", env=sim_env)
    assert ls_json(sim_env) == []


def at_terminal(env, answer: bytes, *argv: str) -> tuple[int, str]:
    """`hbtui ARGV` with a terminal for its stdin, `answer` typed; its status and output."""
    leader, follower = pty.openpty()
    child = subprocess.Popen(
        [HBTUI_BIN, *argv],
        env=env,
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    os.close(follower)
    os.write(leader, answer)
    out, _ = child.communicate(timeout=120)
    os.close(leader)
    return child.returncode, out.decode()


def test_at_a_terminal_the_cli_asks_and_only_yes_goes_on(sim_env):
    live_box(sim_env)
    status, out = at_terminal(sim_env, b"n\n", "stop", "b1")
    assert status == 2, out
    assert "Stopping b1 would end its live agents: claude 5e55104a (working). Go on? [y/N]" in out
    assert "error: not confirmed; b1 was not touched" in out
    untouched(sim_env)

    status, out = at_terminal(sim_env, b"y\n", "stop", "b1")
    assert status == 0 and "✓ b1 stopped: stopped" in out, out


def test_a_box_whose_agents_cannot_be_read_is_asked_about_too(sim_env):
    """No word from the box is no proof that nothing works there: a stop of a running box
    whose `hb agents` fails (its helper broken) is refused without a terminal, naming why,
    unless --yes."""
    run_ok("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env)
    as_root(sim_env, "b1", "echo 'process.exit(3)' > /opt/hermes-box/bin/hb-agents")
    done = hbtui("stop", "b1", env=sim_env)
    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        "error: stopping b1 may end agents at work: the agents in box b1 could not be read ("
    ), line
    assert line.endswith("; refusing without a terminal to ask (pass --yes to go on)"), line
    assert [b["state"] for b in ls_json(sim_env)] == ["running"]
    assert "✓ b1 stopped: stopped" in run_ok("stop", "b1", "--yes", env=sim_env)
    run_ok("rm", "b1", "--force", env=sim_env)  # stopped: nothing to ask
