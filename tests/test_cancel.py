"""A cancellation is never lost: on Python 3.11, `asyncio.wait_for` returned the inner
result when it completed in the same loop pass as the cancel, and the cancelled
operation ran on (a cancelled base build finished and kept its base). The core uses
`asyncio.timeout`, which hands the cancel on."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import hbtui
from hbtui.engine.runner import Deadline, RunTimeout


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_cancel_arriving_with_a_line_still_cancels_the_read(timeout):
    reader = asyncio.StreamReader()
    reading = asyncio.ensure_future(Deadline(["engine"], timeout).readline(reader))
    await asyncio.sleep(0)  # the read now waits for data
    reader.feed_data(b"a line\n")  # its wake-up is queued first…
    reading.cancel()  # …and the cancel in the same pass
    with pytest.raises(asyncio.CancelledError):
        await reading


async def test_a_line_that_does_not_come_in_time_is_a_timeout():
    with pytest.raises(RunTimeout):
        await Deadline(["engine"], 0.05).readline(asyncio.StreamReader())


def test_no_module_of_hbtui_uses_wait_for():
    """Python 3.11 is supported: a new `wait_for` would bring the lost cancel back."""
    users = [
        str(path.relative_to(Path(hbtui.__file__).parent))
        for path in Path(hbtui.__file__).parent.rglob("*.py")
        if "wait_for(" in path.read_text()
    ]
    assert users == [], f"use `async with asyncio.timeout(...)` instead, in {users}"
