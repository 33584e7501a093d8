"""Writing hbtui's state files: atomically, durably, and one writer at a time.

Every file hbtui keeps (config, registry, secrets, bases, archive memory,
journals) and every archive it writes goes through `atomic_output`: a private
temporary file beside the target, fsynced, renamed over it, then the folder
fsynced, so a crash or a power cut leaves the old version or the new one,
never half of one. `locked` holds an exclusive `flock` on a side file across a
whole read-modify-write cycle, so two processes changing one file at once keep
both changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from hbtui.errors import HbtuiError


def temp_prefix(target: Path, pid: int | None = None) -> str:
    """How `atomic_output`'s temporary files for `target` begin: with the writer's pid,
    so what a killed writer left can be told from a live one's (hbtui.core.foundation.scratch)."""
    return f".{target.name}.{os.getpid() if pid is None else pid}."


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], *, replace: bool = True) -> Iterator[BinaryIO]:
    """Open a 0600 temporary file beside `path`; on normal exit flush, fsync
    and rename it over `path` (then fsync the folder); on error remove it.
    With `replace=False` an existing `path` is never replaced, even one that
    appeared while writing: FileExistsError, and the temporary file goes."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target), suffix=".part")
    try:
        os.fchmod(fd, 0o600)
        with open(fd, "wb", closefd=True) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, target)
        else:
            _publish_new(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            # A write or fsync on the open file names none: a full disk says which file.
            raise type(exc)(exc.errno, exc.strerror, str(target)) from None
        raise
    fsync_dir(target.parent)


def write_atomic(path: str | os.PathLike[str], data: bytes) -> None:
    """`data` as the whole new content of `path` (0600), or the old content on any failure."""
    with atomic_output(path) as f:
        f.write(data)


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Make a rename or a new name in `folder` survive a power cut (best effort: some
    file systems cannot sync a folder)."""
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


def _publish_new(tmp: str, target: Path) -> None:
    """Give `tmp` the name `target` only if no file has it: a hard link cannot take
    a name that exists, so two writers racing for one name cannot both win."""
    try:
        os.link(tmp, target)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS):
            raise
        # No hard links on this file system: claim the name exclusively, then fill it.
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.replace(tmp, target)
        return
    os.unlink(tmp)


async def lock_fd(fd: int) -> None:
    """An exclusive flock on `fd`, waited for in a thread. Cancelled meanwhile, it waits
    for that thread to be done with `fd` before the cancel goes on: the caller closes
    `fd`, and its number, taken by the next open, must not be locked by the thread."""
    locking = asyncio.ensure_future(asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX))
    try:
        await asyncio.shield(locking)
    except asyncio.CancelledError:
        await asyncio.wait([locking])
        raise


def open_lock(lock_path: Path) -> int:
    """An fd of the lock file (made 0600 with its folder); one line naming it if not."""
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        return os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o600)
    except OSError as exc:
        raise HbtuiError(f"cannot open the lock {lock_path}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `lock_path` for the block: the read, the change and
    the write of a state file happen with no other process in between. Blocks until
    the holder lets go; the kernel drops a dead holder's lock."""
    fd = open_lock(lock_path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the flock
