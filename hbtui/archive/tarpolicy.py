"""The extraction policy for tar streams out of archives, and the walk that applies it.

The policy is specified in docs/archive-format.md, "Extraction policy".
Every entry is checked before anything is written for it:

* names: no absolute path, no `..` component, no NUL, no empty name (other
  than a directory entry naming the root itself, like `./`);
* types: regular files, directories, symlinks and hardlinks only (devices,
  fifos, sparse and unknown types are refused);
* nothing is ever written through a symlink: an entry whose parent path is
  a symlink (or a file) is refused, files are opened with O_NOFOLLOW;
* symlinks: absolute targets, and targets that resolve outside the root
  (resolved against every symlink of the archive, at entry time and again
  once the whole stream is known) are refused, or left out (`hbtui extract`);
* hardlinks: the target must be an earlier regular file inside the root;
* modes: files keep their permission bits only (setuid, setgid and sticky
  dropped); directories keep permission bits and sticky (setuid, setgid
  dropped); ownership, xattrs, ACLs and capabilities are never applied;
* times: one outside the years 1 to 9999, or not a number, becomes the nearest
  of those ends (not a number: 1970), and the summary counts them;
* the root: a directory entry that names the destination itself (`./`)
  changes nothing: the destination keeps the mode 0700, owner and times
  it was created with;
* the stream: it must end with tar's end-of-archive marker (a zero block),
  and only zero bytes may follow it; a damaged header is an error, never a
  silent end.
"""

from __future__ import annotations

import math
import os
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO, Protocol, Self

from hbtui.archive.errors import ArchiveCorrupt, UnsafeArchive

__all__ = [
    "COPY",
    "DIR_MODE_BITS",
    "FILE_MODE_BITS",
    "LEFT_OUT",
    "ROOT_MODE",
    "Policy",
    "TarStream",
    "TarSummary",
    "norm_name",
    "validate_tar",
    "walk",
]


COPY = 1 << 20
_MAX_LINK_HOPS = 40
# The steps (path components) all of an archive's link checks may take together: each
# check is bounded (40 hops of targets), but an archive can hold a million links, each
# leading through the same costly chain; this bounds the whole (a few seconds), well above
# any real tree (a node_modules of 100,000 links takes about 2 million).
_MAX_LINK_STEPS = 16_000_000
# The longest target a symlink can have on disk (PATH_MAX less its NUL).
_MAX_TARGET = 4095
# The mode bits an extracted entry keeps. Files: permissions only (no setuid,
# setgid or sticky). Directories: permissions and sticky, which only restricts
# (dropping it from a 1777 folder would let anyone delete anyone's files there).
FILE_MODE_BITS = 0o777
DIR_MODE_BITS = 0o1777
#: The destination folder's mode; the archive's `./` entry does not change it.
ROOT_MODE = 0o700
#: The kind of a symlink left out for leading outside the destination.
LEFT_OUT = "left-out"
#: The modification times an entry may have: from the year 1 to the end of 9999, what a
#: date can say (a file system keeps less, and clamps to its own range by itself).
EARLIEST, LATEST = -62_135_596_800, 253_402_300_799


@dataclass
class TarSummary:
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    hardlinks: int = 0
    bytes: int = 0
    # (path, target) of each symlink left out for leading outside the destination
    left_out: list[tuple[str, str]] = field(default_factory=list)
    # entries whose time was out of range or not a number, and the first of them
    odd_times: int = 0
    first_odd_time: str = ""


# --- the policy (shared by the validator and the extractor) ---------------


def norm_name(name: str, what: str = "entry") -> str:
    if "\x00" in name:
        raise UnsafeArchive(f"refusing {what} with a NUL byte in its name")
    if name.startswith("/"):
        raise UnsafeArchive(f"refusing {what} with an absolute path: {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"refusing {what} with a '..' component: {name!r}")
    return "/".join(parts)


class Policy:
    """Tracks the entries seen so far in a virtual tree and judges each new one.

    A symlink that leads outside the destination is refused, or with
    `allow_external_symlinks` let through (load's check: it resolves inside the box), or
    with `leave_out_external` left out: its kind is LEFT_OUT, nothing is written for it
    (and nothing may be written through it), and the summary names it."""

    def __init__(self, allow_external_symlinks: bool, *, leave_out_external: bool = False) -> None:
        self.allow_external = allow_external_symlinks
        self.leave_out = leave_out_external
        self.left: set[str] = set()  # the paths whose last entry is a link left out
        self.late: list[str] = []  # links written, then found to lead outside (final_check)
        self.kinds: dict[str, str] = {}  # path -> "dir" | "file" | "symlink"
        self.links: dict[str, str] = {}  # symlink path -> target
        self.summary = TarSummary()
        self.steps = 0  # spent following links, against _MAX_LINK_STEPS

    def _resolve(self, parts: list[str], target: str) -> bool:
        """Follow `target` from the folder `parts` through the archive's own
        symlinks; False if it leaves the root (or loops, or is absolute)."""
        if target.startswith("/"):
            return False
        # The folders walked so far, each as its whole path ("a", "a/b"): a step costs
        # one string, not a join of every part.
        at: list[str] = []
        for p in parts:
            at.append(f"{at[-1]}/{p}" if at else p)
        rest = target.split("/")[::-1]  # reversed: pop() from the end, linear in its length
        hops = 0
        while rest:
            self.steps += 1
            if self.steps > _MAX_LINK_STEPS:
                raise UnsafeArchive(
                    "refusing the archive: its symlinks lead through one another too many "
                    f"times to follow (over {_MAX_LINK_STEPS:,} steps)"
                )
            c = rest.pop()
            if c in ("", "."):
                continue
            if c == "..":
                if not at:
                    return False
                at.pop()
                continue
            cand = f"{at[-1]}/{c}" if at else c
            link = self.links.get(cand)
            if link is not None:
                hops += 1
                if hops > _MAX_LINK_HOPS or link.startswith("/"):
                    return False
                rest.extend(reversed(link.split("/")))
                continue
            at.append(cand)
        return True

    def _link_stays(self, path: str, target: str) -> bool:
        """Whether the link may be written: True, or False to leave it out; an archive
        whose link leads outside is refused unless links are let through or left out."""
        if self.allow_external:
            return True
        if not target or len(os.fsencode(target)) > _MAX_TARGET:  # os.symlink would fail
            why = f"refusing symlink {path!r}: its target is empty or over {_MAX_TARGET} bytes"
        elif target.startswith("/"):
            why = f"refusing symlink {path!r} with an absolute target {target!r}"
        elif not self._resolve(path.split("/")[:-1], target):
            why = f"refusing symlink {path!r} -> {target!r}: it points outside the destination"
        else:
            return True
        if self.leave_out:
            return False
        raise UnsafeArchive(why)

    def _time(self, m: tarfile.TarInfo, path: str) -> None:
        """An entry's time, within EARLIEST..LATEST (2**70, a pax `nan` or `1e400` made
        the extract a traceback)."""
        when = m.mtime
        if math.isfinite(when) and EARLIEST <= when <= LATEST:
            return
        m.mtime = 0 if math.isnan(when) else min(max(when, EARLIEST), LATEST)
        self.summary.odd_times += 1
        self.summary.first_odd_time = self.summary.first_odd_time or path or "./"

    def check(self, m: tarfile.TarInfo) -> tuple[str, str]:  # noqa: C901 (named in pyproject.toml)
        """Return (normalised path, kind) or raise UnsafeArchive."""
        path = norm_name(m.name)
        self._time(m, path)
        if m.isdir():
            kind = "dir"
        elif m.issym():
            kind = "symlink"
        elif m.islnk():
            kind = "hardlink"
        elif m.isreg():
            if m.issparse():
                raise UnsafeArchive(f"refusing sparse file {m.name!r} (not supported)")
            kind = "file"
        elif m.ischr() or m.isblk():
            raise UnsafeArchive(f"refusing device file {m.name!r}")
        elif m.isfifo():
            raise UnsafeArchive(f"refusing fifo {m.name!r}")
        else:
            raise UnsafeArchive(f"refusing entry {m.name!r} of unsupported type {m.type!r}")
        if not path:
            if kind == "dir":
                return path, kind  # the root itself ("./")
            raise UnsafeArchive(f"refusing {kind} entry with an empty name")
        parts = path.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            k = self.kinds.get(prefix)
            if k == "symlink":
                raise UnsafeArchive(
                    f"refusing {m.name!r}: it would be written through the symlink {prefix!r}"
                )
            if k == "file":
                raise UnsafeArchive(f"refusing {m.name!r}: its parent {prefix!r} is a file")
        old = self.kinds.get(path)
        if old == "dir" and kind != "dir":
            raise UnsafeArchive(f"refusing {m.name!r}: it would replace a directory")
        if old is not None and old != "dir" and kind == "dir":
            raise UnsafeArchive(f"refusing directory {m.name!r}: it would replace a file or link")
        if kind == "symlink" and not self._link_stays(path, m.linkname):
            kind = LEFT_OUT
            self.summary.left_out.append((path, m.linkname))
        if kind == "hardlink":
            target = norm_name(m.linkname, "hardlink target")
            if self.kinds.get(target) != "file":
                raise UnsafeArchive(
                    f"refusing hardlink {m.name!r} -> {m.linkname!r}: the target is not an earlier regular file"
                )
            if target == path:
                raise UnsafeArchive(f"refusing hardlink {m.name!r} to itself")
        # Record.
        for i in range(1, len(parts)):
            self.kinds.setdefault("/".join(parts[:i]), "dir")
        self.links.pop(path, None)
        self.left.discard(path)
        if kind == LEFT_OUT:  # followed as if it were there: nothing goes through it
            self.links[path] = m.linkname
            self.kinds[path] = "symlink"
            self.left.add(path)
        elif kind == "symlink":
            self.links[path] = m.linkname
            self.kinds[path] = "symlink"
            self.summary.symlinks += 1
        elif kind == "dir":
            self.kinds[path] = "dir"
            self.summary.dirs += 1
        else:
            self.kinds[path] = "file"
            if kind == "hardlink":
                self.summary.hardlinks += 1
            else:
                self.summary.files += 1
                self.summary.bytes += m.size
        return path, kind

    def final_check(self) -> None:
        """Later symlinks can change where earlier ones lead: check them all again. A
        written link that now leads outside is refused, or (leaving them out) named in
        `late` for the extractor to take away, and in the summary."""
        if self.allow_external:
            return
        for path, target in self.links.items():
            if path not in self.left and not self._link_stays(path, target):
                self.late.append(path)
                self.summary.left_out.append((path, target))
                self.summary.symlinks -= 1


# --- streaming through tarfile --------------------------------------------


class TarStream(Protocol):
    """What the tar walk reads from: tarfile's stream mode ("r|") only calls read()."""

    def read(self, size: int, /) -> bytes: ...


# tarfile's header errors (stable since Python 3.2, absent from typeshed).
_EOFHeaderError: type[tarfile.HeaderError] = tarfile.EOFHeaderError  # type: ignore[attr-defined]
_TruncatedHeaderError: type[tarfile.HeaderError] = tarfile.TruncatedHeaderError  # type: ignore[attr-defined]
_InvalidHeaderError: type[tarfile.HeaderError] = tarfile.InvalidHeaderError  # type: ignore[attr-defined]


class _TarInfo(tarfile.TarInfo):
    @classmethod
    def fromtarfile(cls, tarfile_: tarfile.TarFile) -> Self:
        try:
            return super().fromtarfile(tarfile_)
        except _EOFHeaderError:  # an all-zero block: the end-of-archive marker
            if isinstance(tarfile_, _TarReader):
                tarfile_.ended_with_marker = True
            raise
        except _TruncatedHeaderError:
            raise ArchiveCorrupt("the tar stream is cut short inside a header") from None
        except _InvalidHeaderError as e:
            raise ArchiveCorrupt(f"the tar stream holds a damaged header ({e})") from None


class _TarReader(tarfile.TarFile):
    """tarfile's stream reader, noting whether the stream ended with tar's
    end-of-archive marker (tarfile alone stops silently at a zero block, at
    the end of the data, at a cut header and at a damaged header alike)."""

    tarinfo = _TarInfo
    ended_with_marker = False


def _members(reader: TarStream) -> tuple[_TarReader, Iterator[tarfile.TarInfo]]:
    try:
        # typeshed types `fileobj` as a full seekable, writable file for every
        # mode; the read-only stream mode "r|" only ever calls read().
        tf = _TarReader.open(fileobj=reader, mode="r|", bufsize=COPY)  # type: ignore[call-overload]
    except tarfile.TarError as e:
        raise ArchiveCorrupt(f"the payload is not a valid tar stream ({e})") from None
    assert isinstance(tf, _TarReader)
    return tf, iter(tf)


def _finish_stream(tf: _TarReader) -> None:
    """After the last entry: the end-of-archive marker must have been there, and
    the rest of the stream (tar pads its last record with zeros) must be zeros.
    Reads to the end, so the producer (zstd, the final chunk, gpg) is checked."""
    if not tf.ended_with_marker:
        raise ArchiveCorrupt(
            "the tar stream ends without its end-of-archive marker (it was cut short)"
        )
    while True:
        data = tf.fileobj.read(COPY)
        if not data:
            return
        if data.count(0) != len(data):
            raise ArchiveCorrupt("the tar stream has data after its end-of-archive marker")


def walk(
    reader: TarStream,
    policy: Policy,
    on_entry: Callable[[tarfile.TarFile, tarfile.TarInfo, str, str], None],
) -> None:
    tf, it = _members(reader)
    try:
        while True:
            try:
                m = next(it)
            except StopIteration:
                break
            except tarfile.TarError as e:
                raise ArchiveCorrupt(f"the tar stream is invalid ({e})") from None
            path, kind = policy.check(m)
            on_entry(tf, m, path, kind)
    except (EOFError, tarfile.TarError) as e:
        raise ArchiveCorrupt(f"the tar stream is invalid or cut short ({e})") from None
    policy.final_check()
    _finish_stream(tf)


def validate_tar(reader: BinaryIO, *, allow_external_symlinks: bool = False) -> TarSummary:
    """Check a plain (uncompressed) tar stream against the extraction policy,
    reading it to the end, writing nothing."""
    policy = Policy(allow_external_symlinks)
    walk(reader, policy, lambda tf, m, path, kind: None)
    return policy.summary
