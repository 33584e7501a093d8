"""What travels between the dashboard's workers, its App and its main screen.

Workers never touch widgets: each one ends by posting a result message
(`post_message` is thread-safe), and the App routes it to whoever shows it.
The main screen never touches the Service: it posts a `...Wanted` message,
which bubbles up to the App, and gets a `...Loaded` message back.

An `Operation` is one core call that changes something (new, start, save,
...). Its `report` is the Report the core call gets; events reported in one
burst (before the event loop next turns) travel together in one
`OperationEvents` message, so a recipe printing thousands of lines costs one
message per burst, not one per line.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from hbtui.core.ports import PortSlot
from hbtui.core.views import BoxStats, HostListing
from hbtui.events import Event
from hbtui.tui.activity import BoxKey

if TYPE_CHECKING:
    from textual.message_pump import MessagePump
    from textual.worker import Worker

    from hbtui.core.hosts import WebAccess

# -- the main screen asks ----------------------------------------------------------------


class ListingWanted(Message):
    """List the boxes again (the refresh tick, or a panel that needs it now)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ListingWanted)


class PortsWanted(Message):
    """The port map of `host`, for the port allocator panel."""

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host


class WorkloadLogWanted(Message):
    def __init__(self, key: BoxKey) -> None:
        super().__init__()
        self.key = key


class ProvisionLogWanted(Message):
    """A box seen for the first time: its last provisioning log, if it has one."""

    def __init__(self, key: BoxKey) -> None:
        super().__init__()
        self.key = key


# -- read-only results -------------------------------------------------------------------


class ListingLoaded(Message):
    """A `list_boxes()` answer, or why there is none (only the newest one matters).

    `asked_at` (time.monotonic()) is when the question was asked: what an
    operation reported about a box after that is newer than this answer."""

    def __init__(
        self, listing: HostListing | None, asked_at: float, error: str = "", bases: int = 0
    ) -> None:
        super().__init__()
        self.listing = listing
        self.bases = bases  # how many bases there are, on every host
        self.asked_at = asked_at
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ListingLoaded)


class PortsLoaded(Message):
    def __init__(self, host: str, slots: list[PortSlot], error: str = "") -> None:
        super().__init__()
        self.host = host
        self.slots = slots
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PortsLoaded)


class WorkloadLogLoaded(Message):
    def __init__(self, key: BoxKey, text: str) -> None:
        super().__init__()
        self.key = key
        self.text = text


class ProvisionLogLoaded(Message):
    """A box's last provisioning log: its file, and its lines as progress events."""

    def __init__(self, key: BoxKey, path: Path, events: list[Event]) -> None:
        super().__init__()
        self.key = key
        self.path = path
        self.events = events


class WebReady(Message):
    """A URL on this machine for a box's web UI (a remote box's is a kept forward)."""

    def __init__(self, key: BoxKey, access: WebAccess) -> None:
        super().__init__()
        self.key = key
        self.access = access


# -- operations --------------------------------------------------------------------------


class Operation:
    """One core call the App runs in a worker, and the way its events reach the UI."""

    def __init__(self, name: str, key: BoxKey | None, target: MessagePump) -> None:
        self.name = name  # "new", "save", ...: the word the log and notifications use
        self.key = key  # the box it concerns; None when it concerns none (extract)
        self.worker: Worker[None] | None = None
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
            try:
                self._loop.call_soon_threadsafe(self.flush)
            except RuntimeError:  # the dashboard has closed: nobody is watching
                pass

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


class OperationEvents(Message):
    """Progress events of one operation, in the order they were reported."""

    def __init__(self, operation: Operation, events: tuple[Event, ...]) -> None:
        super().__init__()
        self.operation = operation
        self.events = events


class OperationFinished(Message):
    """The operation returned `result`, or failed with the one-line `error` (and `hint`);
    `cancelled`: it was cancelled and rolled back, and `error` says what was undone."""

    def __init__(
        self,
        operation: Operation,
        result: object,
        error: str = "",
        hint: str = "",
        cancelled: bool = False,
    ) -> None:
        super().__init__()
        self.operation = operation
        self.result = result
        self.error = error
        self.hint = hint
        self.cancelled = cancelled


class StatsWanted(Message):
    """The main screen would like the CPU and memory of these running boxes."""

    def __init__(self, keys: list[BoxKey]) -> None:
        super().__init__()
        self.keys = keys


class StatsLoaded(Message):
    """Running boxes' CPU and memory; a box the engine said nothing of is absent."""

    def __init__(self, usage: dict[BoxKey, BoxStats]) -> None:
        super().__init__()
        self.usage = usage
