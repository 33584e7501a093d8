"""One forwarded connection: a client here and a relay in the box, bytes both ways.

The relay is `socat` (the recipe installs it; executor's bridge is one too), started by the
engine's exec as the box's agent, joined to this process by its stdin and stdout. What it
sends is the box's: passed to the client as it comes, never parsed, printed or held
beyond one chunk a direction. Each copy waits for its writer to drain before it reads
again, so a slow client slows the box, not this process's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Protocol

from hbtui.engine import Pipe

CHUNK = 64 * 1024
# In the box: `-t`: once one side has ended, how long the other may still send (an answer
# to a client that closed its sending half, or the last bytes of a closing forward).
RELAY_LINGER = 2


GO = b"g"  # what a relay started ahead waits for before it connects


def ahead_argv(port: int) -> list[str]:
    """A relay started before its connection comes: it connects to the box's port once
    it reads GO, and not at all if its stdin ends first."""
    script = f'[ "$(dd bs=1 count=1 2>/dev/null)" = {GO.decode()} ] && exec "$@"'
    relay = ["socat", "-b", str(CHUNK), "-t", str(RELAY_LINGER), "STDIO", f"TCP:127.0.0.1:{port}"]
    return ["sh", "-c", script, "relay", *relay]


class _Source(Protocol):
    async def read(self, n: int, /) -> bytes: ...


class _Sink(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def write_eof(self) -> None: ...


async def _copy(source: _Source, sink: _Sink) -> None:
    """Until the source ends, then the sink's sending half is closed."""
    while data := await source.read(CHUNK):
        sink.write(data)
        await sink.drain()
    sink.write_eof()


async def carry(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pipe: Pipe) -> None:
    """Both ways until the box's side ends or the client is gone. A client that only
    closed its sending half still gets the rest of its answer."""
    up = asyncio.create_task(_copy(reader, pipe))
    down = asyncio.create_task(_copy(pipe, writer))
    try:
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        if up.done() and up.exception() is None and not down.done():
            await asyncio.wait({down})
    finally:
        for task in (up, down):
            task.cancel()
        for task in (up, down):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task  # a failed side only ends this connection
