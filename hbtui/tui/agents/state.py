"""The agents of a box as the dashboard reads them: which session leads its row, which
wait for an answer. No Textual here; what a row says is box_cells.py's.

A status is data (`hbtui.core.agents.sessions.STATUSES`), never words to decode.
"""

from __future__ import annotations

from hbtui.core.agents import (
    ENDED,
    ERROR,
    NEEDS_YOU,
    WORKING,
    AgentSession,
    BoxAgents,
    lead,
)

__all__ = ["at_work", "lead", "live", "on_screen", "waiting"]  # lead: the core's one story


def waiting(row: BoxAgents | None) -> list[AgentSession]:
    """The sessions that wait for the user (a permission, a question)."""
    return [s for s in row.sessions if s.status == NEEDS_YOU] if row is not None else []


def live(row: BoxAgents | None) -> list[AgentSession]:
    """The sessions a line can be sent to."""
    return [s for s in row.sessions if s.status not in (ENDED, ERROR)] if row is not None else []


def at_work(row: BoxAgents | None) -> list[AgentSession]:
    """The sessions that stopping the box would cut off: working, or waiting for the user."""
    return [s for s in row.sessions if s.status in (WORKING, NEEDS_YOU)] if row is not None else []


def on_screen(row: BoxAgents | None) -> AgentSession | None:
    """The session whose pane the preview shows: the lead one, if it has a pane, else
    the first with one."""
    if row is None:
        return None
    first = lead(row)
    if first is not None and first.pane:
        return first
    return next((s for s in row.sessions if s.pane), None)
