"""A running operation as one record, the requests that start one, and their messages.

An `Operation` is one core call that changes something (new, start, save,
...), run by the App in a worker. The record holds everything the dashboard
keeps about it while it runs: its worker, the log of a making operation the
core has not reserved a box for yet, the progress screen or the new-box
dialog watching it, and what to do once it has ended well (open the box's web
UI, after a start `o` asked for).
Its `report` is the Report the core call gets; events reported in one burst
(before the event loop next turns) travel together in one `OperationEvents`
message, so a recipe printing thousands of lines costs one message per
burst, not one per line. How its success is told (`Told`) the feature that
runs it says.

The requests that start one are in `hbtui.tui.requests`.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from textual.message import Message

from hbtui.events import Event, Report
from hbtui.tui.activity import Activity, BoxKey
from hbtui.tui.failure import Failure

if TYPE_CHECKING:
    from textual.worker import Worker


Call = Callable[[Report], Awaitable[object]]  # one Service call, given its Report


class Poster(Protocol):
    """Where an operation's messages go (the App)."""

    def post_message(self, message: Message) -> bool: ...


class ProgressView(Protocol):
    """A screen that shows one operation's progress (the archive operations')."""

    def show(self, event: Event) -> None: ...

    def finished(self, failure: Failure | None) -> None:
        """The operation ended: well (None), or with this failure."""


class WaitingDialog(Protocol):
    """A dialog that stays open until its operation has made its box, or was refused."""

    def close(self) -> None: ...

    def refused(self, failure: Failure, /) -> None:
        """The operation ended before its box existed, for this reason."""


class Operation:
    """One core call the App runs in a worker, the way its events reach the UI, and what
    the dashboard keeps about it until it ends."""

    def __init__(
        self, name: str, key: BoxKey | None, target: Poster, *, makes: bool = False
    ) -> None:
        self.name = name  # "new", "save", ...: the word the log and notifications use
        self.key = key  # the box it concerns; None when it concerns none (extract)
        self.worker: Worker[None] | None = None
        # A making operation's log, kept off every row until the core has reserved its box
        # (then it becomes the box's activity and this is None).
        self.unmade: Activity | None = None
        if makes and key is not None:
            self.unmade = Activity(key)
            self.unmade.begin(name, makes=True)
        self.progress: ProgressView | None = None  # the progress screen showing it
        self.dialog: WaitingDialog | None = None  # the new-box dialog waiting on it
        self.then: Callable[[], None] | None = None  # run once it has ended well
        self.holds: BoxKey | None = None  # another box it holds while it runs (see run_request)
        self.call: Call | None = None  # the Service call, to run it again (once unlocked)
        # Given the failure, asks again for the passphrase the operation was refused with.
        self.ask_again: Callable[[Failure], None] | None = None
        self._target = target
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._lock = threading.Lock()
        self._pending: list[Event] = []

    @property
    def label(self) -> str:
        """`new echo`: what notifications call it."""
        return f"{self.name} {self.key[1]}" if self.key else self.name

    def report(self, event: Event) -> None:
        """The Report the core call gets; any thread may call it."""
        with self._lock:
            self._pending.append(event)
            if len(self._pending) > 1:
                return  # a flush is already on its way
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self.flush)
        else:
            with contextlib.suppress(RuntimeError):  # the dashboard has closed: nobody watches
                self._loop.call_soon_threadsafe(self.flush)

    def flush(self) -> None:
        """Post what was reported since the last flush (on the event loop's thread)."""
        with self._lock:
            events, self._pending = self._pending, []
        if events:
            self._target.post_message(OperationEvents(self, tuple(events)))

    def cancel(self) -> None:
        """Cancel the worker; the core rolls back what the call made."""
        if self.worker is not None:
            self.worker.cancel()


@dataclass(frozen=True)
class Told:
    """How an operation's success is told: a notification's words, title and timeout."""

    message: str
    title: str
    timeout: float


Teller = Callable[[Operation, object], Told]  # an operation and its result: how it is told


@dataclass
class OperationEvents(Message):
    """Progress events of one operation, in the order they were reported."""

    operation: Operation
    events: tuple[Event, ...]


@dataclass
class OperationFinished(Message):
    """The operation returned `result`, or ended with `failure` (what its error's class
    says: cancelled and rolled back, waiting for the secrets passphrase, refused a
    passphrase, or failed)."""

    operation: Operation
    result: object
    failure: Failure | None = None
