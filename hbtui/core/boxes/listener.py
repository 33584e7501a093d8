"""One forwarded port: a listener on 127.0.0.1 here and the relays in the box behind it.

Starting a relay is an engine exec (a quarter of a second on the simulator), so AHEAD are
always started ahead of the next connections: each waits in the box for a go byte before
it connects to the dev server, and a connection takes one at once. A burst of
connections starts as many at a time; past MAX_CONNECTIONS, connections wait their turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
from typing import NamedTuple

from hbtui.core.boxes import relay
from hbtui.engine import Engine, Pipe
from hbtui.errors import HbtuiError

AGENT = "agent"  # the relays run as the box's agent: reaching its loopback needs no more
MAX_CONNECTIONS = 32  # at once, a port (a browser opens six a host)
AHEAD = 2  # relays started ahead of the connections waiting
RETRY_PAUSE = 1.0  # a relay that ended before its connection came is started again after this


class ForwardError(HbtuiError):
    """A forward that could not start, or that ended on its own."""


class HostPortTaken(ForwardError):
    """The host port asked for is in use on this machine."""


class Client(NamedTuple):
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter


class Listener:
    """127.0.0.1:local here, each connection to 127.0.0.1:port in box `name`."""

    def __init__(self, engine: Engine, name: str, port: int) -> None:
        self.engine = engine
        self.name = name
        self.port = port
        self.local_port = 0
        self._server: asyncio.Server | None = None
        self._waiting: asyncio.Queue[Client] = asyncio.Queue()
        self._relays: set[asyncio.Task[None]] = set()
        self._idle = 0  # relays started and not yet given a connection

    async def listen(self, local_port: int | None) -> None:
        """On `local_port`, else the box's own port number when free here, else any."""
        wanted = self.port if local_port is None else local_port
        try:
            self._server = await asyncio.start_server(self._accept, "127.0.0.1", wanted)
        except OSError as exc:
            if local_port is None and exc.errno in (errno.EADDRINUSE, errno.EACCES):
                self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
            elif exc.errno == errno.EADDRINUSE:
                raise HostPortTaken(
                    f"port {wanted} on 127.0.0.1 is taken on this machine: choose another "
                    "with --port, or leave --port out for a free one"
                ) from None
            else:
                raise ForwardError(f"cannot listen on 127.0.0.1:{wanted}: {exc.strerror}") from None
        self.local_port = self._server.sockets[0].getsockname()[1]
        self._more_relays()

    async def close(self) -> None:
        """No new connection, then every relay and connection ended (each relay given
        its grace to end in the box)."""
        if self._server is not None:
            self._server.close()
        for task in list(self._relays):
            task.cancel()
        if self._relays:
            await asyncio.wait(list(self._relays))
        while not self._waiting.empty():
            self._waiting.get_nowait().writer.close()
        if self._server is not None:
            await self._server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._waiting.put_nowait(Client(reader, writer))
        self._more_relays()

    def _more_relays(self) -> None:
        """AHEAD relays ahead of the connections waiting, within MAX_CONNECTIONS."""
        while (
            self._idle < self._waiting.qsize() + AHEAD
            and len(self._relays) < MAX_CONNECTIONS
            and self._server is not None
            and self._server.is_serving()
        ):
            self._idle += 1
            task = asyncio.create_task(self._relay())
            self._relays.add(task)
            task.add_done_callback(self._relay_ended)

    def _relay_ended(self, task: asyncio.Task[None]) -> None:
        self._relays.discard(task)
        if not task.cancelled():
            self._more_relays()

    async def _relay(self) -> None:
        """A relay in the box, started ahead; then the connection it is given."""
        client: Client | None = None
        try:
            while client is None:
                with contextlib.suppress(OSError, HbtuiError):
                    async with self.engine.exec_pipe(
                        self.name, relay.ahead_argv(self.port), user=AGENT
                    ) as pipe:
                        client = await self._first_client(pipe)
                        if client is not None:
                            self._idle -= 1
                            self._more_relays()
                            pipe.write(relay.GO)
                            await relay.carry(client.reader, client.writer, pipe)
                if client is None:
                    await asyncio.sleep(RETRY_PAUSE)
        finally:
            if client is None:
                self._idle -= 1
            else:
                client.writer.close()

    async def _first_client(self, pipe: Pipe) -> Client | None:
        """The next connection; None if the relay ended first (it says nothing before
        its go byte, so any answer is its end)."""
        taking = asyncio.ensure_future(self._waiting.get())
        ended = asyncio.ensure_future(pipe.read(1))
        try:
            await asyncio.wait({taking, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ended.cancel()
            taking.cancel()
        # A cancelled get is not done until the loop runs it: only a finished one holds
        # a client (reading a pending one's result raised, and skipped the retry's pause).
        client = taking.result() if taking.done() and not taking.cancelled() else None
        if ended.done() and not ended.cancelled():
            if client is not None:
                self._waiting.put_nowait(client)  # back in line for the next relay
            return None
        return client
