"""One operation per box at a time, across processes.

Each box has a lock file under the state home's locks folder. An operation
that changes a box (new, start, stop, rm, adopt, repair, save, load) holds
an exclusive `flock` on it for as long as it runs and writes a record of
itself into the file (operation, pid, and until when it keeps the box
quiesced), so a second one is refused at once with "box X is busy with save
(pid N)" instead of interleaving. The kernel drops the lock when the holder
dies, whatever killed it; the record it leaves says honestly what state the
box may still be in (quiesced until its lease runs out).
"""

from __future__ import annotations

import contextlib
import contextvars
import fcntl
import json
import os
import stat
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hbtui.environment import pid_alive
from hbtui.errors import HbtuiError
from hbtui.paths import UnreadableFile, make_folder, naming


class BoxBusy(HbtuiError):
    """Another operation holds the box."""


@dataclass(frozen=True)
class Record:
    operation: str
    pid: int
    since: float  # time.time() when it began
    quiesced_until: float = 0.0  # the box's services are down until then (0: they are not)

    @property
    def alive(self) -> bool:
        return pid_alive(self.pid)


def _read(fd: int) -> Record | None:
    try:
        raw = os.pread(fd, 4096, 0)
        data = json.loads(raw.decode()) if raw.strip() else None
        if not isinstance(data, dict):
            return None
        return Record(
            str(data["operation"]),
            int(data["pid"]),
            float(data["since"]),
            float(data.get("quiesced_until", 0.0)),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


class Held:
    """The holder's handle: it keeps the record up to date while the operation runs."""

    def __init__(self, fd: int, record: Record, path: Path) -> None:
        self._fd = fd
        self._path = path
        self.record = record
        self._write()

    def _write(self) -> None:
        data = json.dumps(asdict(self.record)).encode()
        with naming(self._path):  # a full disk says which file
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)

    def quiesced_until(self, until: float) -> None:
        self.record = replace(self.record, quiesced_until=until)
        self._write()

    def release(self) -> None:
        """A clean end: the record is emptied (a killed holder's record stays)."""
        os.ftruncate(self._fd, 0)


_current: contextvars.ContextVar[Held | None] = contextvars.ContextVar(
    "hbtui_held_box", default=None
)


def current() -> Held | None:
    """The box the running task holds, if any (guest steps note their quiesce lease here)."""
    return _current.get()


def _open_record(path: Path, flags: int) -> int:
    """The lock file, opened without blocking and checked to be a regular file: a FIFO
    in its place must not hang every operation on the box."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnreadableFile(path, "a box's lock file is not a regular file; move it away")
    return fd


class BoxLocks:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, host: str, name: str) -> Path:
        # Box and host names are checked words (no '/', no '..'), so this stays inside.
        return self.folder / f"{host}--{name}.lock"

    @contextlib.asynccontextmanager
    async def hold(self, host: str, name: str, operation: str) -> AsyncIterator[Held]:
        """Hold the box for `operation`, or raise BoxBusy naming who holds it. A lock file
        this made for an operation that failed goes again: a box that does not exist (a
        typo, a `new` rolled back) leaves no file behind."""
        make_folder(self.folder)
        path = self.path(host, name)
        fd, made = self._lock(path, name)
        try:
            held = Held(fd, Record(operation, os.getpid(), time.time()), path)
            token = _current.set(held)
            try:
                yield held
            except BaseException:
                if made:
                    self.forget(host, name)
                raise
            finally:
                _current.reset(token)
                held.release()
        finally:
            os.close(fd)  # closing drops the flock

    @staticmethod
    def _lock(path: Path, name: str) -> tuple[int, bool]:
        """An fd holding the flock of the file now at `path` (an `rm` may have unlinked
        the one this opened: then lock the new one), and whether this made the file."""
        while True:
            try:
                fd, made = _open_record(path, os.O_RDWR | os.O_CREAT | os.O_EXCL), True
            except FileExistsError:
                try:
                    fd, made = _open_record(path, os.O_RDWR), False
                except FileNotFoundError:  # unlinked in between
                    continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                other = _read(fd)
                os.close(fd)
                who = f"{other.operation} (pid {other.pid})" if other else "another operation"
                raise BoxBusy(
                    f"box {name!r} is busy with {who}; try again when it is done"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd, made
            os.close(fd)

    def record(self, host: str, name: str) -> Record | None:
        """The box's last record, read without locking: a reader must never make an
        operation see the box busy. Empty after a clean end; a killed holder's stays."""
        try:
            fd = _open_record(self.path(host, name), os.O_RDONLY)
        except (OSError, UnreadableFile):
            return None
        try:
            return _read(fd)
        finally:
            os.close(fd)

    def forget(self, host: str, name: str) -> None:
        """The box is gone: its lock file goes too."""
        with contextlib.suppress(FileNotFoundError):
            self.path(host, name).unlink()
