"""`new --agent` and `try` say the agent started only once they saw it on its task: an
agent that ends at once is said to have ended, with its last words (made safe) and a
non-zero exit, its box kept; one that says nothing is waited for only so long.

Before, both printed that the agent started (`try`: "✓ t-1 started claude on the task")
whatever it did: a Claude Code that could not reach its API ended 2.4 s later, and only
`hbtui agents` told."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support import SIM_RECIPE, recipe_with
from support.agents import CLAUDE, real_claude_recipe
from support.cli import hbtui, ok
from support.work import ENDING_AGENT, LIVE_AGENT, SILENT_AGENT, box_sh, host_repo, stand_in

pytestmark = pytest.mark.sim


def one_error_line(done) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    return lines[0]


def ready_boxes(env) -> dict[str, str]:
    return {
        b["name"]: b["provisioning"] for b in json.loads(ok(hbtui("ls", "--json", env=env)).stdout)
    }


@pytest.mark.timeout(600)
def test_an_agent_that_ends_at_once_fails_new_and_its_box_stays(sim_env, tmp_path: Path):
    env = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, ENDING_AGENT)))
    repo = host_repo(tmp_path)
    done = hbtui("new", "b1", "--repo", str(repo), "--task", "x", "--agent", "claude", env=env)
    said = one_error_line(done)
    assert said == (
        "error: claude ended at once in b1 (exit status 3): Starting up | Unable to connect to "
        "the API | Failed to connect: EAI_AGAIN; the box stays, made and ready: hbtui enter b1"
    ), said
    assert "started" not in done.stdout, done.stdout
    # Made and ready, its clone in, its window left with the agent's words and a shell.
    assert ready_boxes(env) == {"b1": "ready"}
    assert box_sh(env, "b1", "git symbolic-ref --short HEAD") == "hb/b1"
    screen = box_sh(env, "b1", "tmux capture-pane -p -t main")
    assert "claude ended (exit status 3)" in screen, screen


@pytest.mark.timeout(600)
def test_new_json_of_an_agent_that_ends_prints_the_box_and_how_its_agent_ended(
    sim_env, tmp_path: Path
):
    """A script asking `new --json` gets the box it has now (it printed an error and no
    JSON, though the box was made), with how its agent ended, and exit status 1."""
    env = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, ENDING_AGENT)))
    repo = host_repo(tmp_path)
    done = hbtui(
        "new", "b1", "--repo", str(repo), "--task", "x", "--agent", "claude", "--json", env=env
    )
    assert done.returncode == 1, done.stdout + done.stderr
    printed = json.loads(done.stdout)
    assert printed["name"] == "b1" and printed["provisioning"] == "ready", printed
    assert printed["agent"]["state"] == "ended" and printed["agent"]["status"] == 3, printed
    assert printed["agent"]["words"].startswith("Starting up | Unable to connect"), printed


@pytest.mark.timeout(600)
def test_a_live_agent_is_said_to_have_started(sim_env, tmp_path: Path):
    repo = host_repo(tmp_path)
    live = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)))
    done = ok(hbtui("new", "b1", "--repo", str(repo), "--task", "x", "--agent", "claude", env=live))
    assert "• claude started on the task in b1 (seen after " in done.stdout, done.stdout
    assert ready_boxes(live) == {"b1": "ready"}


@pytest.mark.timeout(600)
def test_an_agent_that_never_says_and_never_ends_is_waited_for_only_the_bound(
    sim_env, tmp_path: Path
):
    """`new` ends at the bound (the seconds said are those the box's step waited),
    saying only what it saw."""
    repo = host_repo(tmp_path)
    silent = dict(
        sim_env,
        HBTUI_RECIPE=str(recipe_with(tmp_path, SILENT_AGENT, "silent")),
        HBTUI_AGENT_WAIT_SECONDS="3",
    )
    done = ok(
        hbtui("new", "b2", "--repo", str(repo), "--task", "x", "--agent", "claude", env=silent)
    )
    assert (
        "! claude runs in b2 but has not said it took the task within 3 s; its screen ends: "
        "Sign in to go on? (y/n) (see: hbtui agents b2, or hbtui enter b2)"
    ) in done.stdout, done.stdout
    assert "started on the task" not in done.stdout, done.stdout
    # A bound that is not a number of seconds stops `new` before any box is made.
    bad = dict(silent, HBTUI_AGENT_WAIT_SECONDS="forever")
    refused = hbtui("new", "b3", "--repo", str(repo), "--task", "x", "--agent", "claude", env=bad)
    assert refused.returncode == 2 and "HBTUI_AGENT_WAIT_SECONDS" in refused.stderr, refused.stderr
    assert ready_boxes(sim_env) == {"b2": "ready"}


@pytest.mark.timeout(600)
def test_a_try_whose_agent_ends_says_so_and_try_ls_shows_it(sim_env, tmp_path: Path):
    ends_in_first = stand_in(
        "case $(hostname) in",
        "  *-1) printf 'Unable to connect to Anthropic services\\n'; exit 1 ;;",
        "esac",
        """printf '{"session_id":"s-%s","hook_event_name":"UserPromptSubmit"}' "$$" \\""",
        "    | /opt/hermes-box/bin/hb-agent-hook",
        "exec sleep 600",
    )
    env = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, ends_in_first)))
    repo = host_repo(tmp_path)
    done = hbtui("try", "2", "t", "--repo", str(repo), "--task", "x", "-q", env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "✓ t-2 started claude on the task\n" in done.stdout, done.stdout
    assert (
        "✗ t-1: claude ended at once in t-1 (exit status 1): Unable to connect to Anthropic "
        "services; the box stays, made and ready: hbtui enter t-1\n"
    ) in done.stdout, done.stdout
    assert ready_boxes(env) == {"t-1": "ready", "t-2": "ready"}

    listed = json.loads(ok(hbtui("try", "ls", "t", "--json", env=env)).stdout)
    rows = {r["box"]: r for r in listed["boxes"]}
    assert rows["t-1"]["agent"] == "ended" and rows["t-1"]["commits"] == 0, rows["t-1"]
    assert "Unable to connect to Anthropic services" in rows["t-1"]["note"], rows["t-1"]
    assert rows["t-2"]["agent"] != "ended" and rows["t-2"]["note"] == "", rows["t-2"]
    table = ok(hbtui("try", "ls", "t", env=env)).stdout
    assert "t-1: claude ended at once in t-1 (exit status 1)" in table, table


@pytest.mark.real_agent
@pytest.mark.skipif(CLAUDE is None or shutil.which("node") is None, reason="needs claude, node")
@pytest.mark.timeout(600)
def test_the_real_claude_is_seen_on_its_task_or_ending_for_want_of_its_api(sim_env, tmp_path: Path):
    repo = host_repo(tmp_path)
    env = dict(sim_env, HBTUI_RECIPE=str(real_claude_recipe(tmp_path)))
    done = ok(
        hbtui("new", "b1", "--repo", str(repo), "--task", "say ok", "--agent", "claude", env=env)
    )
    assert "• claude started on the task in b1 (seen after " in done.stdout, done.stdout
    assert box_sh(env, "b1", "cat ~/claude-prompt") == "say ok"
    # The recipe's own claude, with no API to reach (the box has no network): it ends.
    plain = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    ended = hbtui("new", "b2", "--repo", str(repo), "--task", "x", "--agent", "claude", env=plain)
    said = one_error_line(ended)
    assert said.startswith("error: claude ended at once in b2 (exit status "), said
    assert "Unable to connect" in said and said.endswith("hbtui enter b2"), said
    assert ready_boxes(plain) == {"b1": "ready", "b2": "ready"}


async def test_ctrl_c_while_new_waits_for_its_agent_ends_only_the_wait(
    sim_env, tmp_path: Path, monkeypatch
):
    """The box is whole when the wait begins: a cancel then ends the wait, not `new`
    (an "interrupted" for a box that is made and ready would be untrue)."""
    import asyncio

    from hbtui.core.foundation.specs import NewSpec, WorkRequest
    from hbtui.core.work import agent as work_agent
    from hbtui.events import Notice
    from hbtui.wiring import build_service

    monkeypatch.setenv("HBTUI_RECIPE", str(recipe_with(tmp_path, SILENT_AGENT)))
    monkeypatch.setenv(work_agent.WAIT_ENV, "300")
    service = build_service()
    seed = await service.work.repo_seed(str(host_repo(tmp_path)))
    waiting = asyncio.Event()
    wait = work_agent.await_start

    async def await_start(*args, **kwargs):
        waiting.set()
        return await wait(*args, **kwargs)

    monkeypatch.setattr(work_agent, "await_start", await_start)
    seen: list = []
    spec = NewSpec("w", work=WorkRequest(seed, "x", "claude"))
    making = asyncio.create_task(service.new(spec, report=seen.append))
    await waiting.wait()
    making.cancel()
    view = await making
    assert (view.name, view.provisioning) == ("w", "ready")
    notices = [e.message for e in seen if isinstance(e, Notice)]
    assert (
        notices[-1]
        == "not seen whether claude started in w (the wait was interrupted): see hbtui agents w"
    )
    assert not making.cancelled()
