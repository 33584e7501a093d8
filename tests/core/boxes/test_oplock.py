"""The per-box operation lock as a listing reports it: another process's operation makes
a box busy; this process's own does not (its front end shows it as an activity)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from hbtui.config import load_config
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation.hosts import HostPool
from hbtui.core.foundation.oplock import BoxBusy
from hbtui.core.foundation.views import Busy
from hbtui.paths import resolve_paths

HOLDER = """
import asyncio, sys
from hbtui.core.foundation.oplock import BoxLocks

async def main():
    async with BoxLocks(__import__("pathlib").Path(sys.argv[1])).hold("local", "b", "save"):
        print("held", flush=True)
        sys.stdin.read()

asyncio.run(main())
"""


@pytest.fixture
def boxes(hbtui_home) -> BoxCore:
    paths = resolve_paths()
    config = load_config(paths)
    return BoxCore(paths, config, HostPool(paths, config))


async def test_a_box_this_process_holds_is_not_busy_to_its_own_listing(boxes):
    async with boxes.locks.hold("local", "b", "start"):
        assert boxes.busy("b", "local") is None
    assert boxes.busy("b", "local") is None


async def test_a_box_another_process_holds_is_busy_with_its_operation_and_pid(boxes):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(boxes.locks.folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        busy = boxes.busy("b", "local")
        assert busy == Busy("save", holder.pid) and busy.held
        assert str(busy) == f"save (pid {holder.pid})"
        with pytest.raises(BoxBusy, match=rf"busy with save \(pid {holder.pid}\)"):
            async with boxes.locks.hold("local", "b", "stop"):
                pass
    finally:
        holder.communicate("", timeout=30)
    assert holder.returncode == 0
    assert boxes.busy("b", "local") is None  # a clean end empties the record


def test_a_killed_holders_quiesce_lease_is_busy_but_held_by_nobody(boxes):
    """What a front end keys on is data: the lease's end, and that no process holds it."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    until = time.time() + 60
    boxes.locks.folder.mkdir(parents=True, exist_ok=True)
    boxes.locks.path("local", "b").write_text(
        json.dumps({"operation": "save", "pid": dead.pid, "since": 0, "quiesced_until": until})
    )
    busy = boxes.busy("b", "local")
    assert busy == Busy("save", 0, until) and not busy.held
    assert str(busy).startswith("quiesced: save was interrupted; services return by ")


@pytest.mark.sim
def test_commands_on_a_missing_box_leave_no_lock_file(sim_env):
    """`hbtui stop nosuchbox` left locks/boxes/local--nosuchbox.lock, one per typo."""
    from pathlib import Path

    from support.cli import hbtui, one_line_error

    locks = Path(sim_env["HBTUI_HOME"]) / "locks"

    def files() -> list[str]:
        return sorted(str(p.relative_to(locks)) for p in locks.rglob("*") if p.is_file())

    one_line_error(hbtui("stop", "first", env=sim_env), "no box named 'first'")
    before = files()
    for command in (
        ("stop", "nosuchbox"),
        ("start", "nosuchbox"),
        ("rm", "nosuchbox"),
        ("repair", "nosuchbox"),
        ("credentials", "nosuchbox", "add", "github"),
        ("pull", "nosuchbox"),
        ("branch", "nosuchbox", "nb2"),
    ):
        one_line_error(hbtui(*command, env=sim_env), "no box named 'nosuchbox'")
    assert files() == before
    assert not any("nosuchbox" in name or "nb2" in name for name in files()), files()
