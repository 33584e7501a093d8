"""Local port forwards to a remote box's executor, over the host's connection.

`web_forwarder(conn)` is a remote Host's `web`: given a port on the host, it
listens on 127.0.0.1:<free port> here and carries every connection to
127.0.0.1:<port> there through a direct-tcpip channel of the host's shared
SSH connection. Each accepted connection asks for the connection anew, so a
forward outlives a dropped-and-remade SSH connection.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from hbtui.core.foundation.hosts import Forwarder, WebAccess
from hbtui.errors import HbtuiError
from hbtui.remote.connection import HostConnection

CHUNK = 64 * 1024


class _Reader(Protocol):
    async def read(self, n: int) -> bytes: ...


class _Writer(Protocol):
    def write(self, data: bytes) -> None: ...
    async def drain(self) -> None: ...
    def can_write_eof(self) -> bool: ...
    def write_eof(self) -> None: ...


async def _pipe(reader: _Reader, writer: _Writer) -> None:
    """Copy until EOF; asyncio streams here, SSH channel streams there."""
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
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

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
            async with asyncio.timeout(5):
                await server.wait_closed()


def web_forwarder(conn: HostConnection) -> Forwarder:
    async def web(port: int) -> WebAccess:
        forward = await Forward(conn, port).start()
        return WebAccess(forward.url, forward.close, forwarded=True)

    return web
