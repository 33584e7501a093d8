"""A forward's listener against an engine whose relays end at once (a box that kills them,
or a box stopping): each relay is started again only after the retry's pause, never in a
loop of engine execs, and nothing is left unretrieved."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from hbtui.core.boxes import listener as listener_mod
from hbtui.core.boxes.listener import AHEAD, Listener


class EndedPipe:
    async def read(self, n: int, /) -> bytes:
        await asyncio.sleep(0.01)
        return b""  # the relay ended before any connection came

    def write(self, data: bytes) -> None:
        raise AssertionError("no connection was given to an ended relay")

    async def drain(self) -> None: ...

    def write_eof(self) -> None: ...


class KilledRelays:
    """An engine whose every relay ends at once; it counts the execs."""

    def __init__(self) -> None:
        self.execs = 0
        self.third = asyncio.Event()

    @contextlib.asynccontextmanager
    async def exec_pipe(self, name: str, argv: list[str], *, user: str) -> AsyncIterator[EndedPipe]:
        self.execs += 1
        if self.execs > AHEAD:
            self.third.set()
        yield EndedPipe()


async def test_a_relay_that_ends_at_once_is_started_again_only_after_the_pause(monkeypatch):
    pauses: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        if seconds == listener_mod.RETRY_PAUSE:
            pauses.append(seconds)
        await real_sleep(0 if seconds == listener_mod.RETRY_PAUSE else seconds)

    monkeypatch.setattr(listener_mod.asyncio, "sleep", sleep)
    unretrieved: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unretrieved.append(ctx))
    engine = KilledRelays()
    forward = Listener(engine, "b1", 3000)  # type: ignore[arg-type]
    await forward.listen(0)
    try:
        await asyncio.wait_for(engine.third.wait(), 10)
    finally:
        await forward.close()
    # Every relay after the first AHEAD came after a pause: one pause per ended relay.
    assert len(pauses) >= engine.execs - AHEAD > 0, (pauses, engine.execs)
    assert unretrieved == []
