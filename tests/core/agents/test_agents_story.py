"""One story per box: `hbtui agents`, `agents --watch`, `try ls` and the dashboard's Agent
column give the same status for the same sessions (one function tells it), a session a box
reports from several sources is one row, and an agent that ended at its start is the box's
ended session everywhere (it had none: `no agent`, a blank column, and `ended` in try ls)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

from hbtui.cli.agents import agents_table
from hbtui.core.agents import ENDED, ERROR, IDLE, NEEDS_YOU, NO_AGENT, WORKING, box_status
from hbtui.core.agents.sessions import AgentSession, BoxAgents, parse_listing
from hbtui.core.agents.starts import StartBook
from hbtui.core.tries.operations import agent_status
from hbtui.paths import resolve_paths
from hbtui.tui.boxes.cells import agent_text

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def s(status: str, sid: str = "s1", since: float = 1.0) -> AgentSession:
    return AgentSession("b1", "local", "claude", sid, status, since=NOW.timestamp() - since)


ROWS = [
    (BoxAgents("b1", "local"), NO_AGENT),
    (BoxAgents("b1", "local", (s(ENDED),)), ENDED),
    (BoxAgents("b1", "local", (s(IDLE), s(WORKING, "s2"))), WORKING),
    (BoxAgents("b1", "local", (s(WORKING), s(NEEDS_YOU, "s2"))), NEEDS_YOU),
    (BoxAgents("b1", "local", (s(ENDED), s(IDLE, "s2"))), IDLE),
    (BoxAgents("b1", "local", error="hb agents exited with 2"), ERROR),
]


@pytest.mark.parametrize(("row", "status"), ROWS)
def test_every_view_tells_the_same_status(row: BoxAgents, status: str):
    assert box_status(row) == status
    assert agent_status(row)[0] == status  # try ls
    column = agent_text(row, NOW).plain  # the dashboard
    if status == NO_AGENT:
        assert column == ""
    elif status == ERROR:
        assert column.startswith("✗")
    else:
        assert column.split()[1] == status
    console = Console(width=200, color_system=None)
    with console.capture() as shown:
        console.print(agents_table([row], show_host=False))
    assert status in shown.get().splitlines()[1]  # hbtui agents, and --watch's table


def test_a_session_the_box_reports_from_several_sources_is_one_row():
    entry = {"agent": "claude", "session_id": "116c4e91", "status": "ended", "since": 1e9}
    said = json.dumps({"v": 1, "sessions": [entry, entry, dict(entry, since=2e9)]}).encode()
    assert [x.session_id for x in parse_listing("b1", "local", said)] == ["116c4e91"]


def test_an_agent_that_ended_at_its_start_is_the_box_s_ended_session(
    tmp_path: Path, hbtui_home: Path
):
    book = StartBook(resolve_paths())
    bare = BoxAgents("t-1", "local")
    assert book.told(bare) is bare  # nothing noted: no agent
    book.ended("local", "t-1", "claude", "Unable to connect to the API\x1b[31m")
    told = book.told(bare)
    assert box_status(told) == ENDED and agent_status(told)[0] == ENDED
    assert "ended" in agent_text(told, NOW).plain
    (session,) = told.sessions
    assert "Unable to connect" in session.error and "\x1b" not in session.error
    own = BoxAgents("t-1", "local", (s(IDLE),))
    assert book.told(own) is own  # a session of its own tells the story then
    book.drop("local", "t-1")
    assert book.told(bare) is bare
