"""Local port forwards to a remote box's executor, over the host's connection.

`open_forward(service, name, host_name)` listens on 127.0.0.1:<free port>
here and carries every connection to 127.0.0.1:<box port> on the host
through a direct-tcpip channel of the host's shared SSH connection. Each
accepted connection asks for the connection anew, so a forward outlives a
dropped-and-remade SSH connection. For a local box it returns the box's own
URL and a closer that does nothing, so callers need not care.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable

from hbtui.core.boxes import BoxService
from hbtui.core.registry import LOCAL
from hbtui.errors import HbtuiError
from hbtui.remote.connection import HostConnection
from hbtui.remote.hosts import connection_of

Closer = Callable[[], Awaitable[None]]
CHUNK = 64 * 1024


async def _pipe(reader, writer) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()
    except Exception:
        pass


class Forward:
    """A local listener whose connections reach 127.0.0.1:port on a remote host."""

    def __init__(self, conn: HostConnection, remote_port: int) -> None:
        self.conn = conn
        self.remote_port = remote_port
        self.local_port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

    async def start(self) -> Forward:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.local_port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            try:
                r_reader, r_writer = await self.conn.open_tcp(self.remote_port)
            except HbtuiError:
                return
            try:
                await asyncio.gather(_pipe(reader, r_writer), _pipe(r_reader, writer))
            finally:
                r_writer.close()
        finally:
            writer.close()
            if task is not None:
                self._tasks.discard(task)

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)


async def _nothing() -> None:
    return None


async def open_forward(
    service: BoxService, name: str, host_name: str = LOCAL
) -> tuple[str, Closer]:
    """(a URL on this machine reaching box `name`'s executor, an async closer).

    The forward lives until the closer is awaited (or the event loop ends).
    """
    view = await service.get(name, host_name)
    if view.port is None or view.url is None:
        raise HbtuiError(f"box {name!r} has no forwarded port")
    if host_name == LOCAL:
        return view.url, _nothing
    host = await service.host(host_name)
    forward = await Forward(connection_of(host), view.port).start()
    return forward.url, forward.close
