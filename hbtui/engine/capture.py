"""A call's output, read as it comes and bounded.

What an engine call prints may come from a box (an exec's output, its workload's log),
and a box can print without end. So no call's output is read whole and then measured:
each stream is read a chunk at a time, and once past its bound the call is refused
(OutputTooLong: the caller ends the child) or, where the end is what matters (a log, a
check's output), only its last bytes are kept.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from hbtui.present import human_bytes

OUTPUT_MAX = 16 << 20  # an engine call's stdout, unless its caller says (the engine's own
# cap on an exec's output is 11 MiB)
ERR_MAX = 1 << 20  # its stderr: an error says what it has to in far less
CHUNK = 1 << 16

A = TypeVar("A")
B = TypeVar("B")


class Reader(Protocol):
    """A stream's read end: asyncio's StreamReader, asyncssh's SSHReader."""

    async def read(self, n: int = -1, /) -> bytes: ...


class OutputTooLong(ValueError):
    def __init__(self, which: str, limit: int) -> None:
        super().__init__(f"its {which} went past {human_bytes(limit)}")
        self.which = which
        self.limit = limit


@dataclass(frozen=True)
class Bound:
    """How much of a call's output is kept: `limit` bytes of stdout and ERR_MAX of
    stderr. Past either, OutputTooLong; with `tail`, only the last bytes are kept."""

    limit: int = OUTPUT_MAX
    tail: bool = False


USUAL = Bound()  # a call that names no bound of its own


@dataclass(frozen=True)
class Captured:
    stdout: bytes
    stderr: bytes
    dropped: int = 0  # bytes of stdout left out before what was kept (`tail` only)


async def read_bounded(reader: Reader, limit: int, *, tail: bool, which: str) -> tuple[bytes, int]:
    """All `reader` gives up to `limit` bytes, and how many were left out before them
    (`tail`); without `tail`, a byte past `limit` raises OutputTooLong at once."""
    kept: deque[bytes] = deque()
    held = dropped = 0
    while chunk := await reader.read(CHUNK):
        kept.append(chunk)
        held += len(chunk)
        if held <= limit:
            continue
        if not tail:
            raise OutputTooLong(which, limit)
        while held - len(kept[0]) >= limit:  # whole chunks first: linear in the output
            dropped += len(kept[0])
            held -= len(kept.popleft())
    data = b"".join(kept)
    if len(data) > limit:
        dropped += len(data) - limit
        data = data[-limit:]
    return data, dropped


async def capture(stdout: Reader, stderr: Reader | None, bound: Bound) -> Captured:
    """Both outputs of a call, read together (a child blocked on a full stderr pipe
    would never end its stdout), each within its bound."""
    out = read_bounded(stdout, bound.limit, tail=bound.tail, which="output")
    if stderr is None:
        data, dropped = await out
        return Captured(data, b"", dropped)
    err = read_bounded(stderr, ERR_MAX, tail=bound.tail, which="error output")
    (data, dropped), (errors, _) = await together(out, err)
    return Captured(data, errors, dropped)


async def together(first: Awaitable[A], second: Awaitable[B]) -> tuple[A, B]:
    """Both results; the first failure cancels the other (gather leaves it running,
    reading a child that is about to be killed)."""
    tasks = (asyncio.ensure_future(first), asyncio.ensure_future(second))
    try:
        await asyncio.gather(*tasks)
        return tasks[0].result(), tasks[1].result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        for task in tasks:
            if not task.cancelled():
                task.exception()  # retrieved: the first failure is the one raised
