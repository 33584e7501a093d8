"""The per-box operation lock as a listing reports it: another process's operation makes
a box busy; this process's own does not (its front end shows it as an activity)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hbtui.config import load_config
from hbtui.core.boxes import Lifecycle
from hbtui.core.hosts import HostPool
from hbtui.core.oplock import BoxBusy
from hbtui.paths import resolve_paths

HOLDER = """
import asyncio, sys
from hbtui.core.oplock import BoxLocks

async def main():
    async with BoxLocks(__import__("pathlib").Path(sys.argv[1])).hold("local", "b", "save"):
        print("held", flush=True)
        sys.stdin.read()

asyncio.run(main())
"""


@pytest.fixture
def boxes(hbtui_home) -> Lifecycle:
    paths = resolve_paths()
    config = load_config(paths)
    return Lifecycle(paths, config, HostPool(paths, config))


async def test_a_box_this_process_holds_is_not_busy_to_its_own_listing(boxes):
    async with boxes.locks.hold("local", "b", "start"):
        assert boxes.busy("b", "local") == ""
    assert boxes.busy("b", "local") == ""


async def test_a_box_another_process_holds_is_busy_with_its_operation_and_pid(boxes):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(boxes.locks.folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert boxes.busy("b", "local") == f"save (pid {holder.pid})"
        with pytest.raises(BoxBusy, match=rf"busy with save \(pid {holder.pid}\)"):
            async with boxes.locks.hold("local", "b", "stop"):
                pass
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0
    assert boxes.busy("b", "local") == ""  # a clean end empties the record
