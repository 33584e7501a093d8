"""`hbtui agents`'s actions on the command line: which words are actions, which options
go with which, one line for anything else (checked before any box is asked)."""

from __future__ import annotations

import subprocess

import pytest

from support import HBTUI_BIN


def hbtui(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([HBTUI_BIN, *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["agents", "start", "b1"], "agents start needs the agent: --agent claude|codex|hermes"),
        (["agents", "start"], "agents start takes one box: hbtui agents start BOX"),
        (["agents", "stop", "b1", "b2"], "agents stop takes one box: hbtui agents stop BOX"),
        (
            ["agents", "resume", "b1", "--agent", "claude"],
            "--agent does not apply to agents resume",
        ),
        (["agents", "forget", "b1", "--yes"], "--yes does not apply to agents forget"),
        (["agents", "stop", "b1", "--task", "x"], "--task does not apply to agents stop"),
        (["agents", "b1", "--session", "abcd"], "--session does not apply to a listing"),
        (["agents", "ls", "start", "--yes"], "--yes does not apply to a listing"),
        (["agents", "start", "b1", "--watch"], "--watch does not apply to agents start"),
        (
            ["agents", "start", "b1", "--agent", "claude", "--task", "a", "--task-file", "f"],
            "give the task as --task TEXT or --task-file FILE, not both",
        ),
        (
            ["agents", "start", "b1", "--agent", "claude", "--task-file", "/nonexistent/t"],
            "the task file /nonexistent/t does not exist",
        ),
        (["agents", "start", "b1", "--agent", "gpt"], "argument --agent: invalid choice: 'gpt'"),
    ],
)
def test_agents_actions_take_their_own_options_and_one_box(hbtui_home, argv, said):
    done = hbtui(*argv)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert said in lines[0], lines[0]


def test_the_help_says_how_to_list_a_box_named_like_an_action(hbtui_home):
    done = hbtui("agents", "--help")
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert "list a box of that name with agents ls NAME" in flat, flat
    for action in ("start", "resume", "stop", "forget"):
        assert action in flat
