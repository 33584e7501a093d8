"""Where hbtui keeps its own state.

`HBTUI_HOME` moves everything (config, registry, logs, backups, locks) under
one folder, which is also what every test does. Without it the platform's
user directories are used.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from hbtui.errors import HbtuiError, UsageError

APP = "hbtui"
STATE_FILE_MAX = 16 * 2**20  # a state file is a few KiB; anything this big is damage


class UnreadableFile(HbtuiError):
    """A state file that is not a regular file hbtui can read (a FIFO, a device, a socket,
    a folder, far too big): one line naming it."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


@dataclass(frozen=True)
class Paths:
    config_dir: Path
    data_dir: Path
    log_dir: Path

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.toml"

    @property
    def registry_file(self) -> Path:
        return self.data_dir / "registry.toml"

    @property
    def locks_dir(self) -> Path:
        return self.data_dir / "locks"

    @property
    def default_backups_dir(self) -> Path:
        return self.data_dir / "backups"

    @property
    def provision_logs_dir(self) -> Path:
        return self.log_dir / "provision"

    def ensure(self) -> None:
        """Make the state folders; a file in the way is a one-line error, not a crash."""
        for d in (self.config_dir, self.data_dir, self.log_dir, self.locks_dir):
            make_folder(d)


def make_folder(folder: Path, mode: int = 0o700) -> Path:
    """`mkdir -p` for a folder hbtui keeps: a file in the way, or a disk that refuses, is
    a one-line error naming the folder."""
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=mode)
    except (FileExistsError, NotADirectoryError):
        raise UsageError(
            f"{folder} (or a folder above it) is a file; hbtui keeps its state in folders "
            "there (HBTUI_HOME moves them)"
        ) from None
    except OSError as exc:
        raise HbtuiError(f"cannot make {folder}: {exc.strerror or exc}") from None
    return folder


def read_state(path: Path | str, limit: int = STATE_FILE_MAX) -> bytes | None:
    """The bytes of a file hbtui keeps, or None when there is none. Opened without
    blocking and checked before a byte is read: a FIFO, device or socket in its place
    (or a link to one) is an UnreadableFile at once, never a hang or an endless read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UnreadableFile(path, f"cannot read it: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise UnreadableFile(path, "it is a folder, not a file")
        if not stat.S_ISREG(mode):
            raise UnreadableFile(path, f"it is {kind_of(mode)}, not a regular file; move it away")
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise UnreadableFile(path, f"cannot read it: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise UnreadableFile(path, f"it is over {limit} bytes, far more than such a file can be")
    return data


def kind_of(mode: int) -> str:
    """What a path's file is, in words ("a FIFO", "a folder", "a file", ...)."""
    for test, name in (
        (stat.S_ISREG, "a file"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a file"


@contextlib.contextmanager
def naming(path: Path | str) -> Iterator[None]:
    """A write's OSError names the file it was writing: a full disk says which (the
    kernel's error for a write on an open file names none)."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None


def resolve_paths(env: Mapping[str, str] | None = None) -> Paths:
    home = (os.environ if env is None else env).get("HBTUI_HOME")
    if home:
        root = Path(home).expanduser().absolute()
        return Paths(config_dir=root, data_dir=root, log_dir=root / "logs")
    return Paths(
        config_dir=Path(platformdirs.user_config_dir(APP)),
        data_dir=Path(platformdirs.user_data_dir(APP)),
        log_dir=Path(platformdirs.user_log_dir(APP)),
    )
