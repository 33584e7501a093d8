"""The progress of an archive operation (save, load, extract): phase, bytes, rate, ETA.

The archives feature pushes it when it starts the operation; the App feeds it the operation's
events; Cancel cancels the worker, and the core rolls back what it made
(the screen says so until the operation has wound up). A failure stays on
screen until closed, with the bar stopped; success or a cancellation closes it.
A load also shows its stages (decrypt+check, create, provision, restore,
ready) and which one it is in.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, ProgressBar

from hbtui.events import Event, LogLine, Notice, Phase, Stage, Step, Transfer
from hbtui.present import duration, human_bytes
from hbtui.tui import plain
from hbtui.tui.dialogs.base import DIALOG_CSS, Closable
from hbtui.tui.failure import Failure
from hbtui.tui.operations import Operation
from hbtui.tui.widgets.key_footer import KeyFooter


class TransferMeter:
    """Bytes, rate and ETA from a stream of Transfer events (rate over ~5 s)."""

    WINDOW = 5.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.samples: list[tuple[float, int]] = []

    def add(self, event: Transfer) -> str:
        now = self.clock()
        self.samples.append((now, event.done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.WINDOW:
            self.samples.pop(0)
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        rate = (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0
        text = human_bytes(event.done)
        if event.total:
            text += f" / {human_bytes(event.total)}"
        if rate > 0:
            text += f" · {human_bytes(rate)}/s"
            if event.total and event.total > event.done:
                text += f" · ETA {duration((event.total - event.done) / rate)}"
        return text


# A load's stages, as the progress window names them: its first Phase with a
# stage (the core's hbtui.events.Stage), or its first recipe step, begins each.
LOAD_STAGES = ("decrypt+check", "create", "provision", "restore", "ready")
STAGE_INDEX = {Stage.CHECK: 0, Stage.CREATE: 1, Stage.RESTORE: 3, Stage.DONE: 4}


def load_stage(event: Event) -> int | None:
    """The stage of a load this event begins, if it begins one."""
    if isinstance(event, Step):
        return 2
    if isinstance(event, Phase) and event.stage is not None:
        return STAGE_INDEX.get(event.stage)
    return None


def stages_text(current: int, failed: bool) -> Text:
    """`✓ decrypt+check › ▶ create › provision …`: done, current (✗ if it failed), to come."""
    text = Text()
    for i, name in enumerate(LOAD_STAGES):
        if i:
            text.append(" › ", style="dim")
        if i < current:
            text.append(f"✓ {name}", style="green")
        elif i == current:
            text.append(
                f"✗ {name}" if failed else f"▶ {name}", style="bold red" if failed else "bold cyan"
            )
        else:
            text.append(name, style="dim")
    return text


class ProgressScreen(Closable[None]):
    CSS_PATH = DIALOG_CSS
    # Nothing focused: an Enter meant for the dialog before must not cancel (esc does).
    AUTO_FOCUS = ""
    # esc cancels while the operation runs; once it has failed, it closes the window.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("escape", "close_failed", "Close"),
    ]

    def __init__(self, operation: Operation, title: str) -> None:
        super().__init__()
        self.operation = operation
        self.title_text = title
        self.meter = TransferMeter()
        self.transfer = ""  # the label of the pass the bar and the rate are about
        self.cancelling = False
        self.failure: Failure | None = None  # why the operation failed, once it has
        self._early: list[Event] = []  # events that came before the widgets
        self.stage = 0  # of a load: an index in LOAD_STAGES

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title", markup=False)
            with Vertical(classes="progress"):
                if self.operation.name == "load":
                    yield Label(stages_text(0, failed=False), id="stages", markup=False)
                yield Label(self.operation.name, id="phase", markup=False)
                yield ProgressBar(id="bytes", show_eta=False)
                yield Label("", id="rate", markup=False)
            yield Label("", id="error", classes="problem", markup=False)
            with Horizontal(classes="buttons"):
                yield Button("Cancel", id="cancel")
        yield KeyFooter(compact=True)  # this screen's keys, over the main screen's

    def on_mount(self) -> None:
        early, self._early = self._early, []
        for event in early:
            self.show(event)
        if self.failure is not None:
            self._show_failure(self.failure)

    def show(self, event: Event) -> None:
        if not self.is_mounted:
            self._early.append(event)
            return
        stage = load_stage(event) if self.operation.name == "load" else None
        if stage is not None and stage > self.stage:
            self.stage = stage
            self.query_one("#stages", Label).update(stages_text(stage, failed=False))
            self._restart_bar()  # the last stage's bytes say nothing of this one
        if isinstance(event, Phase):
            self.query_one("#phase", Label).update(event.message)
        elif isinstance(event, Step):
            self.query_one("#phase", Label).update(f"step {event.index}/{event.total} {event.name}")
            self.query_one("#bytes", ProgressBar).update(total=event.total, progress=event.index)
        elif isinstance(event, Notice):
            self.query_one("#rate", Label).update(Text(event.message, style="yellow"))
        elif isinstance(event, Transfer):
            if event.label != self.transfer:
                self._restart_bar()  # another pass (checking, then restoring): its own rate
                self.transfer = event.label
            self.query_one("#bytes", ProgressBar).update(total=event.total, progress=event.done)
            label = self.meter.add(event)
            self.query_one("#rate", Label).update(f"{event.label}  {label}".strip())
        elif isinstance(event, LogLine) and event.stream == "stderr":
            self.query_one("#rate", Label).update(plain.row(event.text))

    def _restart_bar(self) -> None:
        """A new stage or pass: the bar waits for its own figures (indeterminate until then),
        the rate starts over."""
        self.query_one("#bytes", ProgressBar).update(total=None, progress=0)
        self.query_one("#rate", Label).update("")
        self.meter = TransferMeter()
        self.transfer = ""

    def finished(self, failure: Failure | None) -> None:
        """The operation is over: close, or show why it failed."""
        if failure is None or failure.cancelled or self.cancelling:
            self.close()
            return
        self.failure = failure
        if self.is_mounted:
            self._show_failure(failure)

    def _show_failure(self, failure: Failure) -> None:
        self.query_one("#phase", Label).update(Text(f"{self.operation.label} failed", "bold red"))
        self.query_one("#bytes", ProgressBar).display = False  # nothing moves any more
        if self.operation.name == "load":
            self.query_one("#stages", Label).update(stages_text(self.stage, failed=True))
        self.query_one("#error", Label).update(failure.text)
        close = self.query_one("#cancel", Button)
        close.label = "Close"
        close.focus()  # now Enter may end it: nothing is left to lose
        self.refresh_bindings()  # and the footer says so

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """One of esc's two meanings at a time, in the footer too."""
        if action == "cancel":
            return self.failure is None
        if action == "close_failed":
            return self.failure is not None
        return True

    def action_close_failed(self) -> None:
        self.close()

    @on(Button.Pressed, "#cancel")
    def cancel_pressed(self) -> None:
        self.action_cancel()

    def action_cancel(self) -> None:
        if self.failure is not None:
            self.close()
        elif not self.cancelling:
            self.cancelling = True
            self.query_one("#phase", Label).update("cancelling: rolling back…")
            self.operation.cancel()
