"""What `hbtui agents resume` and `start` run in a box: each agent's own command line to go
on with a session (a fork of it where the session came from another box), which session
is resumed, and the launcher around a command line of its own."""

from __future__ import annotations

import pytest

from hbtui.core.agents.lifecycle import ended_session, forks, resume_command
from hbtui.core.agents.sessions import ENDED, IDLE, AgentError, AgentSession
from hbtui.core.work.agent import launcher


def session(sid: str, status: str = ENDED, since: float = 1.0, origin: str = "") -> AgentSession:
    return AgentSession("b1", "local", "claude", sid, status, since=since, origin=origin)


@pytest.mark.parametrize(
    ("agent", "fork", "line"),
    [
        ("claude", False, "claude --resume 1a2b-3c"),
        ("claude", True, "claude --resume 1a2b-3c --fork-session"),
        ("codex", False, "codex resume 1a2b-3c"),
        ("codex", True, "codex fork 1a2b-3c"),
        ("hermes", False, "hermes --resume 1a2b-3c"),
        ("hermes", True, "hermes --resume 1a2b-3c"),  # no fork: its store is the box's own
    ],
)
def test_each_agent_goes_on_with_a_session_by_its_own_command_line(agent, fork, line):
    assert resume_command(agent, "1a2b-3c", fork) == line


def test_an_id_is_quoted_for_the_launcher_s_shell():
    assert resume_command("claude", "x; rm -rf ~", False) == "claude --resume 'x; rm -rf ~'"


def test_a_session_from_another_box_is_forked():
    assert forks(session("s", origin="b1"), "b1", parent="") is False
    assert forks(session("s", origin="b1"), "b2", parent="b1") is True
    assert forks(session("s", origin="b2"), "b2", parent="b1") is False  # the branch's own
    # A helper that did not name its box: a branch forks, a box of its own does not.
    assert forks(session("s"), "b2", parent="b1") is True
    assert forks(session("s"), "b1", parent="") is False


def test_the_most_recent_ended_session_is_resumed_unless_one_is_named():
    all_ = (session("aaaa1111", since=5.0), session("bbbb2222", since=9.0),
            session("cccc3333", IDLE, since=20.0))  # fmt: skip
    assert ended_session(all_, "b1", None).session_id == "bbbb2222"
    assert ended_session(all_, "b1", "aaaa").session_id == "aaaa1111"
    with pytest.raises(AgentError, match="session cccc3333 in box b1 is idle"):
        ended_session(all_, "b1", "cccc")
    with pytest.raises(AgentError, match="no agent session 'dddd'"):
        ended_session(all_, "b1", "dddd")
    with pytest.raises(AgentError, match="no ended agent session"):
        ended_session(all_[2:], "b1", None)


def test_a_launcher_with_its_own_command_line_keeps_the_window_and_says_how_it_ended():
    text = launcher("claude", "/l/1/hbtui-task", "claude --resume 'abc'")
    assert "printf '%s\\n' \"$TMUX_PANE\" > '/l/1/hbtui-pane'\nclaude --resume 'abc'\n" in text
    assert "'/l/1/hbtui-ended'" in text and "exec bash -l" in text
    assert "hbtui-task" not in text  # no task is read: the command line is all it runs
