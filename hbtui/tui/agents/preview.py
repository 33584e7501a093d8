"""The selected box's agent, live: its session's state and its tmux pane's screen.

The screen comes from the box and is untrusted. It is drawn through
`hbtui.boxtext.colours` (only text and colour sequences survive, whatever
`Service.agents.pane` already did), then capped: its last PREVIEW_LINES lines, each at
most PREVIEW_WIDTH cells, from at most PREVIEW_BYTES of text.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from hbtui import boxtext
from hbtui.core.agents import AgentSession
from hbtui.names import LOCAL
from hbtui.present import AGENT_STYLE, elapsed
from hbtui.tui import plain
from hbtui.tui.activity import BoxKey
from hbtui.tui.failure import Failure

PREVIEW_LINES = 200
PREVIEW_WIDTH = 300
PREVIEW_BYTES = 256 * 1024


def screen_text(raw: str) -> Text:
    """A pane capture as the preview draws it: colours and text only, capped."""
    safe = boxtext.colours(raw[-PREVIEW_BYTES:]).expandtabs()
    lines = safe.rstrip("\n").split("\n")
    while lines and not boxtext.line(lines[-1]):
        lines.pop()  # the blank rows under the prompt
    drawn = Text(end="", no_wrap=True)
    for i, line in enumerate(lines[-PREVIEW_LINES:]):
        row = plain.row(line)
        row.truncate(PREVIEW_WIDTH, overflow="ellipsis")
        if i:
            drawn.append("\n")
        drawn.append_text(row)
    return drawn


class AgentPreview(Vertical):
    """A header (box, agent, status, what it waits for) over the agent's screen."""

    DEFAULT_CSS = """
    AgentPreview { height: 1fr; }
    AgentPreview #agent-header { height: auto; max-height: 3; padding: 0 1; background: $panel; }
    AgentPreview VerticalScroll { height: 1fr; background: $surface; }
    AgentPreview #agent-screen { width: auto; padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key: BoxKey | None = None
        self.pane = ""  # the pane shown
        self._raw: str | None = None  # what the screen was drawn from

    def compose(self) -> ComposeResult:
        yield Static("", id="agent-header", markup=False)
        with VerticalScroll():
            yield Static("", id="agent-screen", markup=False)

    @property
    def screen_text(self) -> str:
        """What the screen part shows, as plain text (for tests)."""
        return str(self.query_one("#agent-screen", Static).render())

    def show_session(
        self,
        key: BoxKey | None,
        session: AgentSession | None,
        others: int,
        why: str,
        now: float,
        back: str = "",
    ) -> None:
        """The box and its session as the last ask saw them (`why`: the box's reason
        when it could not be asked; `back`: the key that brings the log back)."""
        header = Text()
        if key is None:
            header.append("no box selected", style="dim")
        else:
            header.append(key[1], style="bold")
            if key[0] != LOCAL:
                header.append(f" @{key[0]}", style="dim")
        if why:
            header.append(f"  ✗ {why}", style="red")
        elif session is None:
            header.append("  no agent session with a screen", style="dim")
        else:
            header.append(f"  {session.agent} {session.session_id[:8]}  ")
            header.append(session.status, style=AGENT_STYLE.get(session.status, ""))
            if session.since is not None:
                header.append(f" {elapsed(max(0.0, now - session.since))}", style="dim")
            if others:
                header.append(f"  (+{others} more)", style="dim")
            if session.waiting_for:
                header.append(f"\nwaits for: {session.waiting_for}", style="yellow")
        if back:
            header.append(f"   {back}: back to the log", style="dim")
        self.query_one("#agent-header", Static).update(header)
        pane = session.pane if session is not None else ""
        if (key, pane) != (self.key, self.pane):
            self.key, self.pane = key, pane
            self.show_screen("" if pane else "(no screen to show)")

    def show_screen(self, raw: str, failure: Failure | None = None) -> None:
        """The pane as just captured, or why it could not be; unchanged, nothing is redrawn."""
        if failure is not None:
            raw = f"\x1b[31m{failure.text}\x1b[0m"
        if raw == self._raw:
            return
        self._raw = raw
        self.query_one("#agent-screen", Static).update(screen_text(raw))
        self.query_one(VerticalScroll).scroll_end(animate=False)
