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
import errno
import os
from collections.abc import AsyncIterator, Sequence
from typing import NoReturn

from hbtui.core.boxes import relay
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation.forwardbook import ForwardBook, Forwarded
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.shield import to_the_end
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import MachineState
from hbtui.names import host_flag

AGENT = "agent"  # the relays run as the box's agent: reaching its loopback needs no more
MAX_CONNECTIONS = 32  # at once, a forward; a browser opens six a host. More wait their turn.
REARM_PAUSE = 1.0  # a watch that ended while the box runs is made again after this


class ForwardError(HbtuiError):
    """A forward that could not start, or that ended on its own."""


class HostPortTaken(ForwardError):
    """The host port asked for is in use on this machine."""


class BoxNotRunning(ForwardError):
    """Forwards reach a running box only: it is not started for them."""


class BoxStopped(ForwardError):
    """The box stopped while forwarded: every connection has ended."""


def check_port(port: int, what: str = "port") -> int:
    if not 1 <= port <= 65535:
        raise UsageError(f"{what} {port} is out of range: 1 to 65535")
    return port


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

    def __init__(self, boxes: BoxOperations, book: ForwardBook, name: str, host: str) -> None:
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
        servers: list[asyncio.Server] = []
        tasks: set[asyncio.Task[None]] = set()
        stopped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        watch: asyncio.Task[None] | None = None
        made: list[Forwarded] = []
        try:
            slots = asyncio.Semaphore(MAX_CONNECTIONS)
            for port in ports:
                server = await self._listen(host, port, local_port, slots, tasks)
                servers.append(server)
                bound = server.sockets[0].getsockname()[1]
                made.append(Forwarded(self.name, self.host, port, bound, os.getpid()))
            watch = asyncio.create_task(self._watch(host, stopped))
            for f in made:
                self.book.add(f)
            yield Forwarding(tuple(made), stopped)
        finally:
            await to_the_end(_shut(servers, tasks, watch, stopped))
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

    async def _listen(
        self,
        host: Host,
        port: int,
        local_port: int | None,
        slots: asyncio.Semaphore,
        tasks: set[asyncio.Task[None]],
    ) -> asyncio.Server:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                async with (
                    slots,
                    host.engine.exec_pipe(self.name, relay.relay_argv(port), user=AGENT) as pipe,
                ):
                    await relay.carry(reader, writer, pipe)
            except (OSError, HbtuiError):
                pass  # this connection ends; the forward goes on
            finally:
                writer.close()
                tasks.discard(task)

        wanted = port if local_port is None else local_port
        try:
            return await asyncio.start_server(serve, "127.0.0.1", wanted)
        except OSError as exc:
            if local_port is None and exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return await asyncio.start_server(serve, "127.0.0.1", 0)
            if exc.errno == errno.EADDRINUSE:
                raise HostPortTaken(
                    f"port {wanted} on 127.0.0.1 is taken on this machine: choose another "
                    "with --port, or leave --port out for a free one"
                ) from None
            raise ForwardError(f"cannot listen on 127.0.0.1:{wanted}: {exc.strerror}") from None

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
    servers: list[asyncio.Server],
    tasks: set[asyncio.Task[None]],
    watch: asyncio.Task[None] | None,
    stopped: asyncio.Future[None],
) -> None:
    """No new connection, then every connection ended (each relay given its grace to end
    in the box), then the watch."""
    for server in servers:
        server.close()
    for task in list(tasks):
        task.cancel()
    if tasks:
        await asyncio.wait(list(tasks))
    for server in servers:
        await server.wait_closed()
    if watch is not None:
        watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watch
    if stopped.done() and not stopped.cancelled():
        stopped.exception()  # heard, whether or not anyone waited for it
