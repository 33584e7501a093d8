"""Removing a box: type its name to confirm."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Button, Input, Label, Static

from hbtui.core.agents import AgentSession
from hbtui.core.foundation import BoxView
from hbtui.names import LOCAL
from hbtui.tui.boxes.ending import sessions_text
from hbtui.tui.dialogs.base import Dialog, Field, ok_cancel
from hbtui.tui.requests import RemoveRequest


class RemoveDialog(Dialog[RemoveRequest]):
    """Type the box's name to remove it."""

    TITLE_TEXT = "Remove box"

    def __init__(self, view: BoxView, *, ending: list[AgentSession] | None = None) -> None:
        super().__init__()
        self.view = view
        self.ending = ending or []  # the agents at work that removing it ends

    def compose_body(self) -> ComposeResult:
        v = self.view
        yield Static(
            Text.assemble(
                "Remove ",
                (v.name, "bold"),
                f" on {v.host}" if v.host != LOCAL else "",
                "? Its machine and its /data are removed and port ",
                str(v.port or "-"),
                " is freed.",
            ),
            markup=False,
        )
        if v.last_save:
            yield Static(f"Last save: {v.last_save}", classes="hint", markup=False)
        else:
            yield Static(Text("This box was never saved.", style="bold yellow"), markup=False)
        if self.ending:
            yield Static(Text("Its agents at work end with it:", style="bold yellow"), markup=False)
            yield Static(sessions_text(self.ending), id="ending", markup=False)
        yield Label(f"Type {v.name} to confirm", markup=False)
        yield Field(placeholder=v.name, id="confirm")
        yield from ok_cancel("Remove", variant="error", disabled=True)

    def on_mount(self) -> None:
        self.focus_field(self.query_one("#confirm", Input))

    @on(Input.Changed, "#confirm")
    def typed(self, event: Input.Changed) -> None:
        self.query_one("#ok", Button).disabled = event.value.strip() != self.view.name

    @on(Input.Submitted, "#confirm")
    @on(Button.Pressed, "#ok")
    def confirm(self) -> None:
        if self.query_one("#confirm", Input).value.strip() == self.view.name:
            self.dismiss(RemoveRequest(self.view.name, self.view.host))
