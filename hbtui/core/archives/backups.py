"""The backups folder as a list to pick from, and what hbtui remembers about archives.

A front end that asks for an archive lists the backups folder (box, date,
size, format, verified or not, newest first) rather than make the user type
a path. Two small facts live in `archives.toml` in the state home: the last
archive picked (offered first next time, across runs) and which archives
were verified (by `save` with verify, or `verify`), each with the size and
modification time it had then, so a file changed since is no longer
verified. The file is a convenience, not a record of boxes: one that cannot
be read is taken as empty, and the next write replaces it.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import tomli_w

from hbtui.errors import HbtuiError
from hbtui.paths import Paths
from hbtui.schema import Invalid, from_table, read_toml, rule, to_table
from hbtui.statefile import locked, write_atomic

STATE_FILE = "archives.toml"
ARCHIVE_SUFFIXES = (".hbx", ".tar.gz.gpg")
# `save` names an archive NAME-YYYYMMDDTHHMMSSZ.hbx; the old tool NAME-....tar.gz.gpg.
_BOX_RE = re.compile(r"^(?P<box>[a-z0-9][a-z0-9-]*?)-\d{8}T?\d{4,6}Z?(?:\.|-)")
MAX_MARKS = 1000  # verified marks kept; the oldest go first


@dataclass(frozen=True)
class ArchiveEntry:
    """One archive of the backups folder, as a picker shows it."""

    path: Path
    box: str  # from the file name; "" when the name does not say
    modified: str  # UTC, YYYY-MM-DDTHH:MM:SSZ
    size: int
    kind: str  # "hbx" or "legacy"
    verified: bool


@dataclass
class VerifiedMark:
    size: int = field(metadata=rule(low=0))
    mtime_ns: int = field(metadata=rule(low=0))
    at: str = ""


@dataclass
class ArchiveMemory:
    last: str = ""  # the archive picked last
    verified: dict[str, VerifiedMark] = field(default_factory=dict)  # absolute path -> mark


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def box_of(file_name: str) -> str:
    """The box an archive was saved from, as its default name says; "" otherwise."""
    match = _BOX_RE.match(file_name)
    return match["box"] if match else ""


def _state_path(paths: Paths) -> Path:
    return paths.data_dir / STATE_FILE


def read_memory(paths: Paths) -> ArchiveMemory:
    try:
        raw = read_toml(_state_path(paths))
        return ArchiveMemory() if raw is None else from_table(ArchiveMemory, raw)
    except Invalid:
        return ArchiveMemory()  # a damaged memory forgets; it decides nothing


@contextlib.contextmanager
def _changing(paths: Paths) -> Iterator[ArchiveMemory]:
    """The memory to change in place, written back atomically under a lock, so two
    processes marking archives at once keep both marks."""
    paths.ensure()
    target = _state_path(paths)
    with locked(paths.locks_dir / f"{STATE_FILE}.lock"):
        memory = read_memory(paths)
        yield memory
        try:
            write_atomic(target, tomli_w.dumps(to_table(memory)).encode())
        except OSError as exc:
            raise HbtuiError(f"cannot write {target}: {exc.strerror or exc}") from None


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def mark_verified(paths: Paths, archive: Path) -> None:
    """Remember that `archive`, as it is now, decrypted and checked in full. Best effort:
    the archive is verified whether or not the mark can be written."""
    archive = archive.expanduser().absolute()
    key = _stat_key(archive)
    if key is None:
        return
    with contextlib.suppress(HbtuiError), _changing(paths) as memory:
        memory.verified.pop(str(archive), None)
        memory.verified[str(archive)] = VerifiedMark(
            key[0], key[1], _iso(datetime.now(UTC).timestamp())
        )
        for old in list(memory.verified)[: max(0, len(memory.verified) - MAX_MARKS)]:
            del memory.verified[old]


def is_verified(memory: ArchiveMemory, archive: Path) -> bool:
    mark = memory.verified.get(str(archive.expanduser().absolute()))
    return mark is not None and _stat_key(archive) == (mark.size, mark.mtime_ns)


def remember_choice(paths: Paths, archive: Path) -> None:
    with _changing(paths) as memory:
        memory.last = str(archive.expanduser().absolute())


def last_choice(paths: Paths) -> Path | None:
    """The archive picked last, if it is still there."""
    last = read_memory(paths).last
    return Path(last) if last and os.path.isfile(last) else None


def list_archives(paths: Paths, folder: Path) -> list[ArchiveEntry]:
    """The archives in `folder` (not below it), newest first; files that are not
    archives, or vanish while listed, are left out."""
    from hbtui.core.archives.files import archive_kind

    memory = read_memory(paths)
    found: list[tuple[int, ArchiveEntry]] = []
    try:
        candidates = [p for p in folder.iterdir() if p.name.endswith(ARCHIVE_SUFFIXES)]
    except OSError:
        return []  # no backups folder yet: nothing to pick
    for path in candidates:
        try:
            kind = archive_kind(path)
            st = path.stat()
        except (HbtuiError, OSError):
            continue
        found.append(
            (
                st.st_mtime_ns,
                ArchiveEntry(
                    path=path.absolute(),
                    box=box_of(path.name),
                    modified=_iso(st.st_mtime),
                    size=st.st_size,
                    kind=kind,
                    verified=is_verified(memory, path),
                ),
            )
        )
    found.sort(key=lambda item: (item[0], item[1].path.name), reverse=True)
    return [entry for _, entry in found]


def resolve_archive(text: str, folder: Path) -> Path:
    """A typed archive path: `~` expanded; a relative one names a file in the backups
    folder when there is one of that name, else a file relative to the current folder."""
    path = Path(text.strip()).expanduser()
    if not path.is_absolute() and (folder / path).exists():
        return (folder / path).absolute()
    return path.absolute()
