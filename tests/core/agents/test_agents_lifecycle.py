"""An agent's life in a box that exists, end to end with the real `claude` against the
fake Messages API in a simulator box: `hbtui agents start` (to needs-you, which keeps its
since when the hook's wait for hbtui's answer runs out), `stop` refused
without --yes and no terminal (the agent untouched), `stop --yes`, `resume` (the fake API
sees the earlier conversation in the resumed session's next request), and `forget`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.agents import API_LOG, CLAUDE, in_box, real_claude_recipe, sessions, wait_session
from support.cli import hbtui, ok

pytestmark = [
    pytest.mark.real_agent,
    pytest.mark.sim,
    pytest.mark.skipif(CLAUDE is None or shutil.which("node") is None, reason="needs claude, node"),
]


def one_line(done, code: int, *words: str) -> str:
    assert done.returncode == code, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def requests(env) -> list[dict]:
    return [json.loads(line) for line in in_box(env, f"cat {API_LOG}").splitlines()]


@pytest.mark.timeout(900)
def test_start_stop_resume_and_forget_the_real_claude_in_a_box_that_exists(sim_env, tmp_path: Path):
    env = dict(sim_env, HBTUI_RECIPE=str(real_claude_recipe(tmp_path)))
    ok(hbtui("new", "b1", "-q", env=env))
    # Bad input: one line each, nothing started.
    one_line(hbtui("agents", "start", "b1", env=env), 2, "--agent claude|codex|hermes")
    one_line(hbtui("agents", "start", "b1", "--agent", "claude", env=env), 1,
             "binds no credential to ANTHROPIC_API_KEY", "--keyless")  # fmt: skip
    one_line(hbtui("agents", "start", "b9", "--agent", "claude", env=env), 1, "b9")
    one_line(hbtui("agents", "resume", "b1", env=env), 1, "no ended agent session")
    assert sessions(env) == []

    # 1. A new session on a task, in the box's workspace: it asks to run the command.
    started = hbtui(
        "agents", "start", "b1", "--agent", "claude", "--keyless", "--task",
        "run: touch /data/home/agent/workspace/ran", env=env,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    assert "claude started on the task in b1 (seen after " in started.stdout, started.stdout
    asked = wait_session(env, lambda s: s["status"] == "needs-you")
    assert asked["waiting_for"] == "Bash: touch /data/home/agent/workspace/ran", asked
    assert asked["origin"] == "b1", asked  # the hook names the box it ran in

    # 1b. Nobody answers through hbtui: the hook's 30 s wait for an answer runs out (its
    # request goes) and the request is left to Claude's own prompt. The session still
    # needs you, since the moment it asked.
    assert asked["request"], asked
    left = wait_session(
        env, lambda s: s["session_id"] == asked["session_id"] and not s["request"], timeout=120
    )
    assert (left["status"], left["since"]) == ("needs-you", asked["since"]), (left, asked)
    assert left["waiting_for"] == asked["waiting_for"], left

    # 2. No terminal and no --yes: refused in one line naming the session; it still asks.
    refused = hbtui("agents", "stop", "b1", env=env)
    one_line(refused, 1, f"session {asked['session_id'][:8]}", "needs-you", "--yes")
    [still] = [s for s in sessions(env) if s["session_id"] == asked["session_id"]]
    assert still["status"] == "needs-you" and still["pane"] == asked["pane"], still

    # 3. Stopped with --yes: the session ended, nothing ran.
    stopped = ok(hbtui("agents", "stop", "b1", "--yes", env=env))
    said = f"✓ stopped claude session {asked['session_id'][:8]} in b1 ("
    assert said in stopped.stdout, stopped.stdout
    wait_session(env, lambda s: s["session_id"] == asked["session_id"] and s["status"] == "ended")
    assert in_box(env, "ls /data/home/agent/workspace").strip() == ""

    # 4. Resumed: the same session again, its conversation sent with its next prompt.
    resumed = ok(hbtui("agents", "resume", "b1", env=env))
    said = f"claude resumed session {asked['session_id'][:8]} in b1 (seen after "
    assert said in resumed.stdout, resumed.stdout
    back = wait_session(
        env,
        lambda s: s["session_id"] == asked["session_id"] and s["status"] in ("idle", "working"),
    )
    before = len(requests(env))
    ok(hbtui("send", "b1", "--session", back["session_id"], "and now?", env=env))
    wait_session(env, lambda s: s["session_id"] == asked["session_id"] and s["status"] == "idle")
    later = requests(env)[before:]
    assert later, "the resumed session asked the API nothing"
    user = later[0]["user"]
    assert "run: touch /data/home/agent/workspace/ran" in user and "and now?" in user, user

    # 5. Forget: a live session is refused; stopped (idle: no --yes needed), it goes.
    one_line(
        hbtui("agents", "forget", "b1", "--session", asked["session_id"][:8], env=env),
        1, "a live session is not forgotten",
    )  # fmt: skip
    ok(hbtui("agents", "stop", "b1", env=env))
    wait_session(env, lambda s: s["session_id"] == asked["session_id"] and s["status"] == "ended")
    forgot = ok(hbtui("agents", "forget", "b1", "--json", env=env))
    assert [s["session_id"] for s in json.loads(forgot.stdout)] == [asked["session_id"]]
    assert sessions(env) == []
    assert "no ended agent session" in ok(hbtui("agents", "forget", "b1", env=env)).stdout


@pytest.mark.timeout(900)
def test_a_branch_resumes_its_source_s_session_as_a_fork(sim_env, tmp_path: Path):
    """The session the branch's copy of /data holds is its source's: resumed in the branch
    it goes on under a new id (Claude's --fork-session), so the two never write one."""
    env = dict(sim_env, HBTUI_RECIPE=str(real_claude_recipe(tmp_path)))
    ok(hbtui("new", "b1", "-q", env=env))
    # A conversation to go on with (a session that was never asked anything has none).
    ok(hbtui("agents", "start", "b1", "--agent", "claude", "--keyless", "--task", "hi", env=env))
    up = wait_session(env, lambda s: s["status"] == "idle")
    ok(hbtui("agents", "stop", "b1", "--yes", env=env))
    wait_session(env, lambda s: s["session_id"] == up["session_id"] and s["status"] == "ended")
    ok(hbtui("branch", "b1", "b2", env=env))

    resumed = ok(hbtui("agents", "resume", "b2", env=env))
    said = f"claude resumed session {up['session_id'][:8]} as a fork (it ran in b1) in b2"
    assert said in resumed.stdout, resumed.stdout
    listed = json.loads(ok(hbtui("agents", "b2", "--json", env=env)).stdout)[0]["sessions"]
    forked = [s for s in listed if s["session_id"] != up["session_id"] and s["status"] != "ended"]
    assert forked and forked[0]["origin"] == "b2", listed
    # The source's own resume is no fork: the session ran there.
    again = ok(hbtui("agents", "resume", "b1", env=env))
    assert f"claude resumed session {up['session_id'][:8]} in b1" in again.stdout, again.stdout
