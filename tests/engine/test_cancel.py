"""A cancellation is never lost: on Python 3.11, `asyncio.wait_for` returned the inner
result when it completed in the same loop pass as the cancel, and the cancelled
operation ran on (a cancelled base build finished and kept its base). The core uses
`asyncio.timeout`, which hands the cancel on."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from pathlib import Path

import pytest

import hbtui
from hbtui.engine import child
from hbtui.engine.runner import Command, Deadline, LocalRunner, RunTimeout


@pytest.mark.parametrize("timeout", [None, 30.0])
async def test_a_cancel_arriving_with_output_still_cancels_the_read(timeout):
    reader = asyncio.StreamReader()
    reading = asyncio.ensure_future(Deadline(["engine"], timeout).read(reader))
    await asyncio.sleep(0)  # the read now waits for data
    reader.feed_data(b"a line\n")  # its wake-up is queued first…
    reading.cancel()  # …and the cancel in the same pass
    with pytest.raises(asyncio.CancelledError):
        await reading


async def test_output_that_does_not_come_in_time_is_a_timeout():
    with pytest.raises(RunTimeout):
        await Deadline(["engine"], 0.05).read(asyncio.StreamReader())


def test_no_module_of_hbtui_uses_wait_for():
    """Python 3.11 is supported: a new `wait_for` would bring the lost cancel back."""
    users = [
        str(path.relative_to(Path(hbtui.__file__).parent))
        for path in Path(hbtui.__file__).parent.rglob("*.py")
        if "wait_for(" in path.read_text()
    ]
    assert users == [], f"use `async with asyncio.timeout(...)` instead, in {users}"


def test_a_cancelled_command_is_reaped_before_its_loop_ends(monkeypatch):
    """A killed child left to the garbage collector outlives the loop that ran it and
    says "Event loop is closed" when it is collected."""
    leftovers: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", leftovers.append)
    children: list[child.Child] = []
    spawn = child.spawn

    async def spy(*argv, **kwargs):
        children.append(await spawn(*argv, **kwargs))
        return children[-1]

    monkeypatch.setattr(child, "spawn", spy)
    ended_with: list[int | None] = []

    async def cancel_a_command() -> None:
        running = asyncio.ensure_future(LocalRunner().run(Command(["sleep", "30"])))
        running.add_done_callback(lambda _: ended_with.append(children[0].returncode))
        await asyncio.sleep(0.3)
        running.cancel()
        await asyncio.wait([running])
        assert running.cancelled()

    loop = asyncio.new_event_loop()
    loop.run_until_complete(cancel_a_command())
    loop.close()  # at once, as a test's loop is, before the child's exit is noticed
    for watcher in threading.enumerate():  # a waiter thread (no pidfd) lets go of the child
        if watcher.name.startswith("wait-"):
            watcher.join(timeout=10)
    gc.collect()
    assert ended_with == [-9], "the run ended before its child was reaped"
    assert [str(u.exc_value) for u in leftovers] == []
