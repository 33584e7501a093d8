"""Steps that must not be cut off half-way by a cancel (Ctrl-C, a dialog's Cancel, the
dashboard quitting): what removes, restores or restarts runs to its end."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def to_the_end(work: Awaitable[T]) -> T:
    """Await `work` to its end even when the caller is cancelled meanwhile, then let the
    cancellation go on: what removes, restores or restarts is never cut off half-way (a
    bare shield leaves it to be cancelled when the process's loop closes)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


async def done_despite_cancel(work: Awaitable[T]) -> T:
    """Await the last step of an operation whose work is done to its end; a cancellation
    meanwhile is absorbed, so the caller hears that it succeeded, not "interrupted"."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        result = await task
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        return result
