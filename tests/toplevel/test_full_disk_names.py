"""A state file written on a full disk names itself: `secrets set` there said only
"error: No space left on device". Every state file goes through `atomic_output`, which
now puts the file's name on the OSError a write or fsync raises without one."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hbtui.statefile import write_atomic

from support import HBTUI_BIN, tiny_fs


@pytest.fixture
def full_home(tmp_path: Path):
    """An HBTUI_HOME on a 64 KiB tmpfs of its own (root only), to be filled."""
    with tiny_fs(tmp_path / "home") as home:
        yield home


def fill(folder: Path) -> None:
    with open(folder / "filler", "ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 1024)


def test_a_state_file_on_a_full_disk_names_itself(full_home):
    fill(full_home)
    target = full_home / "state.json"
    with pytest.raises(OSError) as caught:
        write_atomic(target, b"x" * 100_000)
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(target))
    assert [p.name for p in full_home.iterdir()] == ["filler"]  # no temporary file left


def test_secrets_set_on_a_full_disk_is_one_line_naming_the_file(full_home, hbtui_home):
    shutil.rmtree(hbtui_home)
    env = {**os.environ, "HBTUI_HOME": str(full_home), "HBTUI_SECRETS_PASSPHRASE": "pass"}
    env.pop("HBTUI_SMOLVM", None)
    assert (
        subprocess.run([HBTUI_BIN, "secrets", "ls"], env=env, capture_output=True).returncode == 0
    )
    fill(full_home)
    done = subprocess.run(
        [HBTUI_BIN, "secrets", "set", "github"],
        env=env,
        input="ghp_" + "x" * 30_000,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "No space left on device" in done.stderr
    assert str(full_home / "secrets.hbx") in done.stderr, done.stderr


async def test_a_box_operation_on_a_full_disk_names_the_box_lock(full_home):
    """`stop`, `start`, `save`, `rm`, `credentials`, `pull`, `branch`, `new` on a full state
    home said only "error: No space left on device": the record a box's lock holds is
    written as the operation begins, and its error now names the lock file."""
    from hbtui.core.foundation.oplock import BoxLocks

    locks = BoxLocks(full_home / "locks")
    (full_home / "locks").mkdir()
    fill(full_home)
    with pytest.raises(OSError) as caught:
        async with locks.hold("local", "b1", "stop"):
            pass
    assert (caught.value.errno, caught.value.filename) == (
        errno.ENOSPC,
        str(locks.path("local", "b1")),
    )
