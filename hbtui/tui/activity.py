"""What the dashboard remembers about operations it runs, one record per box.

Progress events from a core operation land here first (the App applies each
`OperationEvents` message it handles); the widgets read from it when they
repaint. A box's last provisioning log is fed in through `apply` too.
Buffers are bounded, so a box whose recipe prints millions of lines costs
at most `MAX_LINES` strings.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from hbtui.events import Event, LogLine, Notice, Phase, Step
from hbtui.tui.failure import Failure

MAX_LINES = 5000

BoxKey = tuple[str, str]  # (host, name)


def row_key(key: BoxKey) -> str:
    return f"{key[0]}/{key[1]}"


@dataclass
class Activity:
    """One box's latest operation and its output, as the user will see it."""

    key: BoxKey
    operation: str = ""
    makes: bool = False  # the operation makes the box (new, branch, load): it is `creating`
    running: bool = False
    phase: str = ""
    step: Step | None = None
    failure: Failure | None = None  # why its last operation failed (a cancellation is none)
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    written: int = 0  # lines appended ever, so a viewer can tell what it missed
    ended_at: float = 0.0  # time.monotonic() when the operation ended
    # The box's (state, provisioning) in the first listing asked for after a failure: once
    # the box shows something else it has moved on (started or repaired elsewhere).
    failed_as: tuple[str, str] | None = None

    def begin(self, operation: str, *, makes: bool = False) -> None:
        self.operation = operation
        self.makes = makes
        self.running = True
        self.phase = operation
        self.step = None
        self.failure = None
        self.failed_as = None
        self.append(f"\x1b[1m── {operation} ──\x1b[0m")

    def append(self, text: str) -> None:
        self.lines.append(text)
        self.written += 1

    def apply(self, event: Event) -> None:
        if isinstance(event, LogLine):
            self.append(event.text)
        elif isinstance(event, Step):
            self.step = event
            self.append(f"\x1b[36m▶ step {event.index}/{event.total} {event.name}\x1b[0m")
        elif isinstance(event, Phase):
            self.phase = event.message
            self.append(f"\x1b[2m• {event.message}\x1b[0m")
        elif isinstance(event, Notice):
            self.append(f"\x1b[33m! {event.message}\x1b[0m")
        # Transfer events are drawn by the progress screen of the archive operations.

    @property
    def making(self) -> bool:
        """A new, branch or load is making this box right now."""
        return self.running and self.makes

    def settle(self, state: str, provisioning: str, asked_at: float) -> None:
        """A listing asked for at `asked_at` shows the box so: the first after a failure
        says what the failure left."""
        if self.failure is not None and self.failed_as is None and asked_at >= self.ended_at:
            self.failed_as = (state, provisioning)

    def standing_failure(self, state: str, provisioning: str) -> Failure | None:
        """A failure shows on its row until the box is listed otherwise than it left it."""
        return self.failure if self.failed_as in (None, (state, provisioning)) else None

    def hold(self, operation: str, by: str) -> None:
        """An operation making another box holds this one (a branch, its source)."""
        self.begin(operation)
        self.phase = f"{operation} → {by}"

    def let_go(self, how: str) -> None:
        """The operation that held this box has ended: no failure of this box's."""
        self.running = False
        self.ended_at = time.monotonic()
        self.append(f"\x1b[2m{how}\x1b[0m")

    def finish(self, failure: Failure | None = None) -> None:
        """The operation ended; a cancelled one is no failure (the core rolled it back), nor
        one whose box was made whole before a later part failed (its setup)."""
        if failure is not None and failure.cancelled:
            self.halt(failure.text)
        elif failure is not None and failure.made:  # the box is there: not a failed operation
            self._end(None)
            self.append(f"\x1b[33m⚠ {self.operation} done, but {failure.text}\x1b[0m")
        elif failure is not None:
            self._end(failure)
            self.append(f"\x1b[31m✗ {self.operation} failed: {failure.text}\x1b[0m")
        else:
            self._end(None)
            self.append(f"\x1b[32m✓ {self.operation} done\x1b[0m")

    def halt(self, why: str) -> None:
        """The operation stopped short of failing (cancelled, or waiting for a passphrase)."""
        self._end(None)
        self.append(f"\x1b[33m⊘ {self.operation}: {why or 'cancelled'}\x1b[0m")

    def _end(self, failure: Failure | None) -> None:
        self.running = False
        self.ended_at = time.monotonic()
        self.failure = failure
