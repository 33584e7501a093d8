"""What the agents do, as it changes: one status stream per running box.

`hb agents --watch --json` in the box prints the whole session list (the schema of
`hb agents --json`) once at start and again whenever it changes, so a permission request
reaches the host in a fraction of a second where a 2 s poll cannot. `AgentWatch` keeps one
such exec per running box (started a bounded number at once), ends it when the box stops,
restarts it when it ends (a box restarted, a dropped SSH connection: after 1 s, doubled up
to 60 s while the new one fails or ends within 10 s), and polls
the boxes whose helper has no `--watch`: an exec that exits with status 2 (`hb`'s and
`hb agents`' "bad usage") before its first line.

Every line is untrusted: it is parsed by `agent_sessions.parse_listing` (the poll's schema and
caps), may be at most LINE_MAX bytes, and a box may send at most LINES_PER_SECOND lines
and BYTES_PER_SECOND bytes (each with a burst); a box over a cap loses its stream, its
row says why, and it is tried again only after a growing pause.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass

from hbtui.core.agents.operations import (
    CONCURRENCY,
    HB,
    _box_agents,
    _Limits,
    _why,
)
from hbtui.core.agents.sessions import (
    AgentError,
    AgentEvent,
    AgentsChanged,
    AgentsGone,
    BoxAgents,
    parse_listing,
)
from hbtui.core.agents.starts import StartBook
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation.views import BOX, BoxView
from hbtui.engine import EngineError, EngineLineTooLong
from hbtui.errors import HbtuiError
from hbtui.events import MachineState

LINE_MAX = 1024 * 1024  # one status line (the local exec's line limit, too)
LINES_PER_SECOND, LINES_BURST = 10.0, 30.0
BYTES_PER_SECOND, BYTES_BURST = 512 * 1024.0, 2 * 1024 * 1024.0
STREAMS_MAX = 100  # streams at once; boxes past it are polled
POLL_SECONDS = 2.0  # for a box whose helper has no --watch
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 60.0
LASTED = 10.0  # a stream that ends sooner (and did not fail) still doubles the pause
GARBAGE_FIRST = 5  # lines that are not JSON tolerated before the first good one
NO_WATCH = 2  # the exit status of a helper that does not know --watch

Key = tuple[str, str]  # (host, box)


class _Bucket:
    """A token bucket: `take` is False once more than `rate` a second (plus `burst`) came."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst, self.level = rate, burst, burst
        self.at = asyncio.get_running_loop().time()

    def take(self, amount: float) -> bool:
        now = asyncio.get_running_loop().time()
        self.level = min(self.burst, self.level + (now - self.at) * self.rate)
        self.at = now
        self.level -= amount
        return self.level >= 0


@dataclass
class _Ended:
    good: bool  # it delivered a listing and ended for no fault of the box's
    no_watch: bool = False
    error: str = ""  # shown in the box's row (unless a good stream ended: tried again first)


class AgentWatch:
    """The running boxes' agents as an async iterator of AgentEvents (`events()`).

    The caller says which boxes run (`track`, e.g. from a listing it has anyway), or
    gives `relist` seconds and the watch lists the boxes itself."""

    def __init__(
        self,
        boxes: BoxCore,
        *,
        relist: float | None = None,
        hosts: list[str] | None = None,
        names: Iterable[str] | None = None,
    ) -> None:
        self._boxes = boxes
        self._starts = StartBook(boxes.paths)
        self._relist = relist
        self._hosts = hosts  # what `relist` lists: these hosts (None: all) ...
        self._names = set(names) if names is not None else None  # ... these boxes (None: all)
        self._tasks: dict[Key, asyncio.Task[None]] = {}
        self._views: dict[Key, BoxView] = {}
        self._last: dict[Key, BoxAgents] = {}
        self._pending: dict[Key, AgentEvent] = {}  # one per box: a slow reader never piles up
        self._wake = asyncio.Event()
        self._starting = asyncio.Semaphore(CONCURRENCY)
        self._limits = _Limits()
        self._polled: set[Key] = set()  # their helper has no --watch
        self._live: set[Key] = set()  # their stream runs and its last line was a listing
        self.streams = 0  # running now (for tests and the bench)

    # -- which boxes --------------------------------------------------------------------------

    def track(self, views: Iterable[BoxView]) -> None:
        """These boxes run now (every other one is dropped): a stream for each new one."""
        running = {
            (v.host, v.name): v for v in views if v.kind == BOX and v.state == MachineState.RUNNING
        }
        for key in [k for k in self._tasks if k not in running]:
            self._tasks.pop(key).cancel()
            self._views.pop(key, None)
            self._last.pop(key, None)
            self._polled.discard(key)
            self._put(key, AgentsGone(*key))
        for key, view in running.items():
            self._views[key] = view
            if key not in self._tasks:
                self._tasks[key] = asyncio.create_task(self._follow(key))

    async def _relisting(self, every: float) -> None:
        while True:
            try:
                listing = await self._boxes.list_boxes(hosts=self._hosts)
            except (EngineError, HbtuiError, OSError):
                pass  # the next listing may work; the streams go on meanwhile
            else:
                # A host that could not be listed keeps its boxes' streams (they fail alone).
                kept = [v for k, v in self._views.items() if k[0] in listing.errors]
                views = [*listing.boxes, *kept]
                self.track(v for v in views if self._names is None or v.name in self._names)
            await asyncio.sleep(every)

    def current(self, host: str, box: str) -> BoxAgents | None:
        """The box's sessions as its stream says them now; None unless that stream runs
        and its last line was a good listing."""
        row = self._last.get((host, box))
        return row if (host, box) in self._live and row is not None and not row.error else None

    # -- the events ---------------------------------------------------------------------------

    def _put(self, key: Key, event: AgentEvent) -> None:
        if isinstance(event, AgentsChanged):
            event = AgentsChanged(self._starts.told(event.row), event.via)
            if self._last.get(key) == event.row:
                return
            self._last[key] = event.row
        self._pending.pop(key, None)
        self._pending[key] = event
        self._wake.set()

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Every change, oldest first; ends every stream when the reader stops."""
        relisting = asyncio.create_task(self._relisting(self._relist)) if self._relist else None
        try:
            while True:
                while not self._pending:
                    self._wake.clear()
                    await self._wake.wait()
                key = next(iter(self._pending))
                yield self._pending.pop(key)
        finally:
            if relisting is not None:
                relisting.cancel()
            await self.close()

    async def close(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- one box ------------------------------------------------------------------------------

    async def _follow(self, key: Key) -> None:
        """Stream the box's agents; poll them if its helper cannot stream."""
        pause = BACKOFF_FIRST
        while True:
            view = self._views[key]
            if key in self._polled or self.streams >= STREAMS_MAX:
                self._put(
                    key, AgentsChanged(await _box_agents(self._boxes, view, self._limits), "poll")
                )
                await asyncio.sleep(POLL_SECONDS)
                continue
            began = asyncio.get_running_loop().time()
            ended = await self._stream(key, view)
            lasted = asyncio.get_running_loop().time() - began >= LASTED
            if ended.no_watch:
                self._polled.add(key)
                continue
            if ended.error and not ended.good:
                self._put(
                    key, AgentsChanged(BoxAgents(view.name, view.host, error=ended.error), "stream")
                )
            pause = BACKOFF_FIRST if ended.good and lasted else min(pause * 2, BACKOFF_MAX)
            await asyncio.sleep(pause)

    async def _stream(self, key: Key, view: BoxView) -> _Ended:
        reader = _Reader(key, view, self._put)
        held = True  # the start-up slot, until the first line or the end
        await self._starting.acquire()
        self.streams += 1
        try:
            host = await self._boxes.hosts.get(view.host)
            stream = host.engine.exec_stream(view.name, [HB, "agents", "--watch", "--json"])
            reading = aiter(stream)
            try:
                while True:
                    try:
                        line = await anext(reading)
                    except StopAsyncIteration:
                        break
                    except EngineLineTooLong:
                        return _Ended(False, error=_too_long())
                    if held:
                        held = False
                        self._starting.release()
                    hostile = reader.line(line)
                    if hostile:
                        return _Ended(False, error=hostile)
                    if reader.good:
                        self._live.add(key)
            finally:
                with contextlib.suppress(Exception):
                    await reading.aclose()  # type: ignore[attr-defined]
        except (EngineError, HbtuiError, OSError, TimeoutError) as exc:
            return _Ended(reader.good, error=_why(exc))
        finally:
            self.streams -= 1
            self._live.discard(key)
            if held:
                self._starting.release()
        if not reader.good and stream.returncode == NO_WATCH:
            return _Ended(False, no_watch=True)
        if stream.returncode:
            return _Ended(reader.good, error=f"hb agents --watch exited with {stream.returncode}")
        return _Ended(reader.good)


class _Reader:
    """One stream's lines, checked: each good one is the box's new row."""

    def __init__(self, key: Key, view: BoxView, put: Callable[[Key, AgentEvent], None]) -> None:
        self.key, self.view, self.put = key, view, put
        self.lines = _Bucket(LINES_PER_SECOND, LINES_BURST)
        self.bytes = _Bucket(BYTES_PER_SECOND, BYTES_BURST)
        self.good = False  # a listing came
        self.garbage = 0

    def line(self, line: str) -> str:
        """Why the stream must end (a hostile box), or ""."""
        if len(line) > LINE_MAX:
            return _too_long()
        if not self.lines.take(1) or not self.bytes.take(len(line)):
            return (
                f"the box floods its status stream (more than {LINES_PER_SECOND:g} lines "
                f"or {BYTES_PER_SECOND / 1024:g} KB a second); tried again later"
            )
        box, host = self.view.name, self.view.host
        try:
            sessions = parse_listing(box, host, line.encode())
        except AgentError as exc:
            self.garbage += 1
            if self.good or self.garbage > GARBAGE_FIRST:
                row = BoxAgents(box, host, error=f"status stream: {exc.message}")
                self.put(self.key, AgentsChanged(row, "stream"))
            return ""
        self.good = True
        self.put(self.key, AgentsChanged(BoxAgents(box, host, sessions), "stream"))
        return ""


def _too_long() -> str:
    return f"the box sent a status line of more than {LINE_MAX // 1024} KB; tried again later"
