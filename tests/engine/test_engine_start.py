"""What the engine is asked at start-up: its version once per binary (remembered beside the
state), and the dashboard's first listing started before its screens import, taken by the
first `list()` (hbtui/core/foundation/version.py, hbtui/engine/early.py)."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from hbtui.engine import Engine

from support import HBTUI_BIN

FAKE = """#!/bin/sh
echo "$*" >> {log}
case "$*" in
  *--version*) echo "smolvm {version}" ;;
  *"machine ls"*) {ls} ;;
esac
"""


def fake_engine(folder: Path, *, version: str = "1.32.2", ls: str = "echo '[]'") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "smolvm"
    script.write_text(FAKE.format(log=folder / "calls", version=version, ls=ls))
    script.chmod(0o755)
    return script


def calls(engine: Path) -> list[str]:
    log = engine.parent / "calls"
    return log.read_text().splitlines() if log.exists() else []


def ls(engine: Path, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HBTUI_HOME": str(home), "HBTUI_SMOLVM": str(engine)}
    return subprocess.run(
        [HBTUI_BIN, "ls", "--json"], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_version_is_asked_once_per_binary(tmp_path):
    home = tmp_path / "home"
    engine = fake_engine(tmp_path / "engine")
    for _ in range(3):
        done = ls(engine, home)
        assert done.returncode == 0, done.stderr
    assert sum("--version" in c for c in calls(engine)) == 1
    assert sum("machine ls" in c for c in calls(engine)) == 3

    replaced = fake_engine(tmp_path / "engine", version="1.32.3")  # an upgrade: a new file
    assert ls(replaced, home).returncode == 0
    assert sum("--version" in c for c in calls(engine)) == 2


def test_a_remembered_version_still_refuses_an_old_engine(tmp_path):
    home = tmp_path / "home"
    engine = fake_engine(tmp_path / "engine", version="0.9.0")
    for _ in range(2):
        done = ls(engine, home)
        assert done.returncode != 0 and "too old" in done.stderr, done.stderr
        assert done.stderr.count("\n") <= 2 and "Traceback" not in done.stderr


@pytest.mark.parametrize("memo", ["garbage{", '{"binary": 1, "version": "x"}', "fifo"])
def test_a_damaged_memo_is_asked_again_not_an_error(tmp_path, memo):
    home = tmp_path / "home"
    home.mkdir()
    target = home / "engine-version.json"
    if memo == "fifo":
        os.mkfifo(target)
    else:
        target.write_text(memo)
    engine = fake_engine(tmp_path / "engine")
    done = ls(engine, home)
    assert done.returncode == 0, done.stderr
    assert sum("--version" in c for c in calls(engine)) == 1


async def test_the_first_list_takes_the_early_listing(tmp_path):
    script = fake_engine(
        tmp_path / "engine", ls="""echo '[{"name": "early", "state": "running"}]'"""
    )
    engine = Engine(str(script))
    engine.start_listing()
    first = await engine.list()
    second = await engine.list()
    assert [m.name for m in first] == ["early"] == [m.name for m in second]
    assert sum("machine ls" in c for c in calls(script)) == 2  # early, then one more


async def test_a_failed_early_listing_is_asked_again_and_its_error_told(tmp_path):
    script = fake_engine(
        tmp_path / "engine",
        ls="""echo '{"code": "STATE_DIR", "message": "state dir is locked"}' >&2; exit 3""",
    )
    engine = Engine(str(script))
    engine.start_listing()
    with pytest.raises(Exception, match="state dir is locked"):
        await engine.list()
    assert sum("machine ls" in c for c in calls(script)) == 2


async def test_an_early_listing_nobody_took_is_ended(tmp_path):
    script = fake_engine(tmp_path / "engine", ls="exec sleep 600")
    listing = Engine(str(script)).start_listing()
    pid = listing._proc.pid
    await asyncio.to_thread(listing.close)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_an_early_listing_given_up_while_awaited_is_ended(tmp_path):
    """The dashboard ending while its first listing is out: the listing's process ends, and
    with it the wait of the thread that read it (the interpreter's exit joins that thread; a
    killed terminal left hbtui waiting as long as the engine took)."""
    import time

    script = fake_engine(tmp_path / "engine", ls="exec sleep 600")
    listing = Engine(str(script)).start_listing()
    proc = listing._proc
    task = asyncio.create_task(listing.output(timeout=600))
    while listing._proc is not None:  # taken: a thread reads it now
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 10
    while proc.returncode is None:  # the thread's communicate() returned
        assert time.monotonic() < deadline, "the listing's reader still waits"
        await asyncio.sleep(0.01)
    with pytest.raises(ProcessLookupError):
        os.kill(proc.pid, 0)
