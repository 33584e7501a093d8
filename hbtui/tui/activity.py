"""What the dashboard remembers about operations it runs, one record per box.

Progress events from a core operation land here first; the widgets read
from it when they repaint. Buffers are bounded, so a box whose recipe
prints millions of lines costs at most `MAX_LINES` strings.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from hbtui.events import Event, LogLine, Notice, Phase, Step, Transfer

MAX_LINES = 5000

BoxKey = tuple[str, str]  # (host, name)


def row_key(key: BoxKey) -> str:
    return f"{key[0]}/{key[1]}"


@dataclass
class Activity:
    """One box's latest operation and its output, as the user will see it."""

    key: BoxKey
    operation: str = ""
    running: bool = False
    phase: str = ""
    step: Step | None = None
    transfer: Transfer | None = None
    error: str = ""
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    written: int = 0  # lines appended ever, so a viewer can tell what it missed

    def begin(self, operation: str) -> None:
        self.operation = operation
        self.running = True
        self.phase = operation
        self.step = None
        self.transfer = None
        self.error = ""
        self.append(f"\x1b[1m── {operation} ──\x1b[0m")

    def append(self, text: str) -> None:
        self.lines.append(text)
        self.written += 1

    def apply(self, event: Event) -> None:
        if isinstance(event, LogLine):
            if not event.text.startswith("::hbtui::"):
                self.append(event.text)
        elif isinstance(event, Step):
            self.step = event
            self.append(f"\x1b[36m▶ step {event.index}/{event.total} {event.name}\x1b[0m")
        elif isinstance(event, Phase):
            self.phase = event.message
            self.append(f"\x1b[2m• {event.message}\x1b[0m")
        elif isinstance(event, Notice):
            self.append(f"\x1b[33m! {event.message}\x1b[0m")
        elif isinstance(event, Transfer):
            self.transfer = event

    def finish(self, error: str = "") -> None:
        self.running = False
        self.error = error
        self.transfer = None
        if error:
            self.append(f"\x1b[31m✗ {self.operation} failed: {error}\x1b[0m")
        else:
            self.append(f"\x1b[32m✓ {self.operation} done\x1b[0m")

    def summary(self) -> str:
        """A few words for the table's provisioning column."""
        if self.error:
            return f"failed: {self.error}"
        if not self.running:
            return ""
        if self.step is not None:
            return f"{self.step.index}/{self.step.total} {self.step.name}"
        return self.phase
