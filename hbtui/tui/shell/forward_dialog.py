"""The Forward dialog (`F`): which port of the box to reach from here, from which port
here, and whether to open it; it stays open until the forward listens (forward.py), so a
host port that is taken is one line in it, and nothing is started."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Checkbox, Input, Label, Static

from hbtui.core.foundation import BoxView, Forwarded, check_port
from hbtui.errors import HbtuiError
from hbtui.tui.dialogs.base import Dialog, Field, ok_cancel

if TYPE_CHECKING:
    from textual.worker import Worker

    from hbtui.tui.failure import Failure


def typed_port_problem(text: str, what: str, *, optional: bool = False) -> str | None:
    """A typed port as `hbtui forward` checks it ("" is no problem for the optional one)."""
    if not text:
        return None if optional else f"which {what}? (a number, like 3000)"
    if not text.isascii() or not text.isdigit():
        return f"the {what} is a number" + (", or empty for a free one" if optional else "")
    try:
        check_port(int(text), what)
    except HbtuiError as exc:
        return exc.message
    return None


Starter = Callable[["ForwardDialog", int, "int | None", bool], "Worker[None]"]


class ForwardDialog(Dialog[None]):
    """The port in the box, the port here (empty: the same number when free, else any),
    and whether to open it in a browser; Forward stays off while a field is wrong."""

    TITLE_TEXT = "Forward a port"

    def __init__(self, view: BoxView, start: Starter, running: list[Forwarded]) -> None:
        super().__init__()
        self.view = view
        self._start = start
        self.running = running  # the box's forwards already (any process's)
        self.pending: Worker[None] | None = None  # started, not yet listening or refused

    def compose_body(self) -> ComposeResult:
        name = self.view.name
        yield Static(
            f"A port on this machine's 127.0.0.1 reaching a port on {name}'s own loopback "
            f"(where dev servers listen), while the dashboard and {name} run.",
            classes="hint",
            markup=False,
        )
        if self.running:
            held = ", ".join(f"{f.box_port} at {f.url}" for f in self.running)
            yield Static(f"Forwarded already: {held}", classes="hint", markup=False)
        with Horizontal(classes="row"):
            with Vertical():
                yield Label("Port in the box")
                yield Field(placeholder="3000", id="box-port")
            with Vertical(classes="wide"):
                yield Label("Port here (empty: the same if free, else any)")
                yield Field(placeholder="free", id="host-port")
        yield Checkbox("Open it in a browser", value=True, id="open")
        yield Label("", id="problem", classes="problem", markup=False)
        yield from ok_cancel("Forward", disabled=True)

    def on_mount(self) -> None:
        self.focus_field(self.query_one("#box-port", Input))

    def problem(self) -> str | None:
        return typed_port_problem(self.text("#box-port"), "port in the box") or typed_port_problem(
            self.text("#host-port"), "host port", optional=True
        )

    def check(self) -> bool:
        """Say what is wrong (nothing while the box's port is still empty); Forward when
        nothing is."""
        problem = self.problem()
        self.say("#problem", problem if problem and self.text("#box-port") else "")
        self.query_one("#ok", Button).disabled = problem is not None
        return problem is None

    @on(Input.Changed)
    def field_changed(self) -> None:
        if self.pending is None:
            self.check()

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def forward(self, event: Input.Submitted | Button.Pressed) -> None:
        self.as_submitted(event)
        if self.pending is not None or not self.check():
            return
        host_port = self.text("#host-port")
        self._lock(True)
        self.say("#problem", Text(f"forwarding {self.text('#box-port')}…", "cyan"))
        self.pending = self._start(
            self,
            int(self.text("#box-port")),
            int(host_port) if host_port else None,
            self.query_one("#open", Checkbox).value,
        )

    def _lock(self, locked: bool) -> None:
        for widget in self.query("Input, Checkbox, #ok"):
            widget.disabled = locked

    def listening(self) -> None:
        """The forward listens: the dialog's work is done."""
        self.pending = None
        self.close()

    def refused(self, failure: Failure) -> None:
        """The forward could not start (a taken host port, the box stopped): one line,
        and the fields to change."""
        self.pending = None
        self._lock(False)
        self.check()
        self.say("#problem", Text(failure.text, "bold red"))
        self.query_one("#host-port", Input).focus()

    def action_cancel(self) -> None:
        if self.pending is not None:  # not listening yet: nothing is left behind
            self.pending.cancel()
            self.pending = None
        self.dismiss(None)
