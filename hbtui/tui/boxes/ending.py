"""Asking before a stop ends agents at work: the boxes' live sessions named, and pausing
offered instead (a paused box's agents go on at resume). It dismisses with what to do:
STOP, PAUSE, or None (leave the boxes as they are)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from hbtui.core.agents import AgentSession
from hbtui.present import AGENT_STYLE
from hbtui.tui.dialogs.base import DIALOG_CSS
from hbtui.tui.widgets.key_footer import KeyFooter

STOP = "stop"
PAUSE = "pause"


def sessions_text(sessions: list[AgentSession]) -> Text:
    """One line per session: its box, agent, id and status (plain: parsed, checked text)."""
    lines = [
        Text.assemble(
            "  ",
            (s.box, "bold"),
            f"  {s.agent} {s.session_id[:8]}  ",
            (s.status, AGENT_STYLE.get(s.status, "")),
        )
        for s in sessions
    ]
    return Text("\n").join(lines)


class StopAskDialog(ModalScreen[str | None]):
    """Stop the boxes anyway (y), pause them instead (p), or keep them running (n, escape)."""

    CSS_PATH = DIALOG_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(None)", "Keep running"),
        Binding("y", "answer('stop')", "Stop"),
        Binding("p", "answer('pause')", "Pause instead"),
    ]

    def __init__(
        self, names: list[str], sessions: list[AgentSession], unread: Sequence[str] = ()
    ) -> None:
        super().__init__()
        self.names = names
        self.sessions = sessions
        self.unread = list(unread)  # boxes whose agents could not be read (the reasons)

    def compose(self) -> ComposeResult:
        which = ", ".join(self.names)
        with Vertical(classes="dialog"):
            yield Label("Stop ends agents at work", classes="dialog-title")
            if self.sessions:
                yield Static(
                    f"Stopping {which} ends these agents, working or waiting for you:",
                    markup=False,
                )
                yield Static(sessions_text(self.sessions), id="sessions", markup=False)
            if self.unread:
                yield Static(
                    f"Stopping {which} may end agents hbtui could not read: "
                    + "; ".join(self.unread),
                    id="unread",
                    markup=False,
                )
            yield Static(
                "Pausing instead keeps them: the engine saves the RAM and disks, and they go "
                "on at resume (Z, or s).",
                classes="hint",
                markup=False,
            )
            with Horizontal(classes="buttons"):
                yield Button("Pause instead (p)", variant="primary", id=PAUSE)
                yield Button("Stop (y)", variant="error", id=STOP)
                yield Button("Keep running (n)", id="keep")
        yield KeyFooter(compact=True)  # this screen's keys, over the main screen's

    def on_mount(self) -> None:
        self.query_one(f"#{PAUSE}", Button).focus()

    def action_answer(self, what: str | None) -> None:
        self.dismiss(what)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id if event.button.id in (STOP, PAUSE) else None)
