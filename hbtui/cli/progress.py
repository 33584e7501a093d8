"""Rendering core progress events (the CLI's side): on a terminal with rich, as plain
lines to a pipe or a file.

The same events drive the dashboard. On a terminal they become a progress bar for
recipe steps and byte transfers, dim phase lines, and the live child output; the bars
(rich.progress) load with the first step or transfer: a verb that only says what it
does (pull, diff) does not pay for them before its work starts. A pipe or a file gets
the same lines without rich, which a script's `pull --json 2>log` would load for nothing
(rich and what it imports are a tenth of a pull's start-up).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, TextIO

from hbtui import boxtext
from hbtui.events import Event, LogLine, Notice, Phase, Step, Transfer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID


class LineReporter:
    """A Report callable for a pipe or a file: a line an event, as the terminal's shows
    them without its styles; a transfer's bar has nothing to say there. Use as a context
    manager around the operation."""

    def __init__(self, stream: TextIO, *, show_logs: bool = True) -> None:
        self.stream = stream
        self.show_logs = show_logs
        self.silenced = False

    def __enter__(self) -> LineReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, event: Event) -> None:
        """Write one event's line. Output that cannot be written (a full disk, a closed
        pipe) is dropped: showing progress must never fail the operation."""
        if self.silenced:
            return
        if isinstance(event, Phase):
            line = f"• {event.message}"
        elif isinstance(event, Notice):
            line = f"! {event.message}"
        elif isinstance(event, LogLine):
            if not self.show_logs:
                return
            line = boxtext.lines(event.text)  # the core left only its colours
        elif isinstance(event, Step):
            line = f"step {event.index}/{event.total} {event.name}"
        else:
            return
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except OSError:
            self.silenced = True

    def finish_steps(self) -> None:
        return None


class ConsoleReporter:
    """A Report callable; use as a context manager around the operation."""

    def __init__(self, console: Console, *, show_logs: bool = True) -> None:
        self.console = console
        self.show_logs = show_logs
        self._steps: TaskID | None = None
        self._transfer: TaskID | None = None
        self._started: list[Progress] = []
        self.silenced = False

    @cached_property
    def progress(self) -> Progress:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )

    @cached_property
    def bytes(self) -> Progress:
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )

        return Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            console=self.console,
            transient=True,
        )

    def __enter__(self) -> ConsoleReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self._started:
            p.stop()

    def _start(self, p: Progress) -> None:
        if self.console.is_terminal and p not in self._started:
            self._started.append(p)
            p.start()

    def __call__(self, event: Event) -> None:
        """Render one event. Output that cannot be written (a full disk behind stdout, a
        closed pipe) is dropped: showing progress must never fail the operation."""
        if self.silenced:
            return
        try:
            self._render(event)
        except OSError:
            self.silenced = True

    def _render(self, event: Event) -> None:
        from rich.markup import escape
        from rich.text import Text

        # What the core says may quote a box (its name for a step, its stderr): the event
        # made it one plain line; a box's log lines come with only their colours (the core
        # made them so), and a bar's description is markup, so names in it are escaped.
        if isinstance(event, Phase):
            self.console.print(Text.assemble(("•", "dim"), " ", event.message))
        elif isinstance(event, Notice):
            self.console.print(Text.assemble(("!", "yellow"), " ", event.message))
        elif isinstance(event, LogLine):
            if self.show_logs:
                self.console.print(Text.from_ansi(event.text))
        elif isinstance(event, Step):
            if self._steps is None:
                self._steps = self.progress.add_task("provisioning", total=event.total)
                self._start(self.progress)
            self.progress.update(
                self._steps,
                completed=event.index - 1,
                total=event.total,
                description=escape(f"step {event.index}/{event.total} {event.name}"),
            )
            if not self.console.is_terminal:
                self.console.print(
                    Text.assemble((f"step {event.index}/{event.total}", "dim"), " ", event.name)
                )
        elif isinstance(event, Transfer):
            label = escape(event.label or "transfer")
            if self._transfer is None:
                self._transfer = self.bytes.add_task(label, total=event.total)
                self._start(self.bytes)
            self.bytes.update(
                self._transfer, completed=event.done, total=event.total, description=label
            )

    def finish_steps(self) -> None:
        if self._steps is not None:
            task = self.progress.tasks[0]
            self.progress.update(self._steps, completed=task.total)
