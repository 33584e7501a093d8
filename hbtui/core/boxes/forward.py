"""`hbtui forward`: a port on this machine reaching a port on a box's own loopback.

Dev servers in a box listen on its 127.0.0.1, which the engine's published ports never
reach (they go to the guest's interface, and are added only to a stopped machine). So
each connection accepted here gets its own relay in the box over the engine's exec
(hbtui.core.boxes.relay), on this machine or over a remote host's SSH connection alike:
the running box is left as it is. One more exec, a `cat` that waits, ends when the box
stops; the forward then ends with BoxStopped. A record per forward (ForwardBook) lets
`hbtui open BOX:PORT` and the dashboard find its URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Sequence
from typing import NoReturn

from hbtui.core.boxes import relay
from hbtui.core.boxes.core import BoxCore
from hbtui.core.boxes.listener import AGENT, ForwardError, Listener
from hbtui.core.foundation.forwardbook import ForwardBook, Forwarded, check_port
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.shield import to_the_end
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import MachineState
from hbtui.names import host_flag

REARM_PAUSE = 1.0  # a watch that ended while the box runs is made again after this


class BoxNotRunning(ForwardError):
    """Forwards reach a running box only: it is not started for them."""


class BoxStopped(ForwardError):
    """The box stopped while forwarded: every connection has ended."""


class Forwarding:
    """The forwards one `BoxForwards.open` made, while its block lasts."""

    def __init__(self, forwards: tuple[Forwarded, ...], stopped: asyncio.Future[None]) -> None:
        self.forwards = forwards
        self._stopped = stopped

    async def wait(self) -> NoReturn:
        """Until the box stops: BoxStopped (a cancel ends the wait, not the forwards)."""
        await asyncio.shield(self._stopped)
        raise AssertionError("a box's watch ends only by raising")


class BoxForwards:
    """One box's forwards: open new ones, list the running ones (of every process)."""

    def __init__(self, boxes: BoxCore, book: ForwardBook, name: str, host: str) -> None:
        self.boxes = boxes
        self.book = book
        self.name = name
        self.host = host

    def running(self) -> list[Forwarded]:
        return self.book.running(self.name, self.host)

    @contextlib.asynccontextmanager
    async def open(
        self, ports: Sequence[int], *, local_port: int | None = None
    ) -> AsyncIterator[Forwarding]:
        """Forward each of `ports` (in the box) from a port on 127.0.0.1 here: `local_port`
        for a single one, else the same number when it is free, else any free one. Every
        listener, connection and relay ends with the block."""
        if not ports:
            raise UsageError("forward needs a port in the box, like: hbtui forward BOX 3000")
        for port in ports:
            check_port(port)
        if len(set(ports)) != len(ports):
            raise UsageError("a port in the box is named twice")
        if local_port is not None:
            check_port(local_port, "host port")
            if len(ports) > 1:
                raise UsageError("--port names the host port of a single forward")
        host = await self._running_box()
        listeners = [Listener(host.engine, self.name, port) for port in ports]
        stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watch: asyncio.Task[None] | None = None
        made: list[Forwarded] = []
        try:
            for listener in listeners:
                await listener.listen(local_port)
                made.append(
                    Forwarded(self.name, self.host, listener.port, listener.local_port, os.getpid())
                )
            watch = asyncio.create_task(self._watch(host, stopped))
            for f in made:
                self.book.add(f)
            yield Forwarding(tuple(made), stopped)
        finally:
            await to_the_end(_shut(listeners, watch, stopped))
            for f in made:
                self.book.remove(f)

    async def _running_box(self) -> Host:
        host, view = await self.boxes.require(self.name, self.host)
        self.boxes.refuse_unprovisioned(view)
        if view.state != MachineState.RUNNING:
            raise BoxNotRunning(
                f"box {self.name} is not running ({view.state}): start it first "
                f"(hbtui start {self.name}{host_flag(self.host)})"
            )
        return host

    async def _watch(self, host: Host, stopped: asyncio.Future[None]) -> None:
        try:
            stopped.set_exception(await self._until_stopped(host))
        except Exception as exc:  # the forward ends, and says why
            stopped.set_exception(exc)

    async def _until_stopped(self, host: Host) -> BoxStopped:
        """A `cat` in the box that never hears a byte ends when the box stops; then the
        engine says whether it did (a watch that ended otherwise is made again)."""
        while True:
            with contextlib.suppress(OSError, HbtuiError):
                async with host.engine.exec_pipe(self.name, ["cat"], user=AGENT) as pipe:
                    while await pipe.read(relay.CHUNK):
                        pass  # nothing is ever written to it: what it says is the box's
            try:
                view = await self.boxes.get(self.name, self.host)
            except HbtuiError as exc:  # gone, or its host unreachable
                return BoxStopped(f"the forward to box {self.name} ended: {exc}")
            if view.state != MachineState.RUNNING:
                return BoxStopped(
                    f"box {self.name} is no longer running ({view.state}): its forward ended"
                )
            await asyncio.sleep(REARM_PAUSE)


async def _shut(
    listeners: list[Listener], watch: asyncio.Task[None] | None, stopped: asyncio.Future[None]
) -> None:
    """Every listener, connection and relay, then the watch."""
    await asyncio.gather(*(listener.close() for listener in listeners))
    if watch is not None:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    if stopped.done() and not stopped.cancelled():
        stopped.exception()  # heard, whether or not anyone waited for it
