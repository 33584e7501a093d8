"""Safe extraction (and validation) of tar streams from archives, each entry checked by
the policy (hbtui.archive.tarpolicy) before anything is written for it.

Extraction goes to a private temporary folder beside the destination, which
is renamed into place only after the whole tar stream was read, the
decompressor exited cleanly and (for an HBX archive) the final chunk
verified. On any failure the temporary folder is removed and the
destination never appears.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from hbtui.archive.errors import ArchiveCorrupt, ArchiveError, UnsafeArchive
from hbtui.archive.tarpolicy import (
    COPY,
    DIR_MODE_BITS,
    FILE_MODE_BITS,
    LEFT_OUT,
    ROOT_MODE,
    Policy,
    TarStream,
    TarSummary,
    norm_name,
    walk,
)

__all__ = [
    "Source",
    "extract_tar",
    "run_extract",
    "run_validate",
]


class _Extractor:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dirs: list[tuple[Path, int, float]] = []
        self.buf = bytearray(COPY)

    def _parent(self, path: str) -> Path:
        parts = path.split("/")
        cur = self.root
        for p in parts[:-1]:
            cur = cur / p
            try:
                st = os.lstat(cur)
            except FileNotFoundError:
                os.mkdir(cur, 0o700)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise UnsafeArchive(f"refusing {path!r}: {p!r} on its path is not a directory")
        return cur

    def _clear(self, target: Path) -> None:
        try:
            st = os.lstat(target)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            raise UnsafeArchive(f"refusing to replace the directory {target.name!r}")
        os.unlink(target)

    def entry(self, tf: tarfile.TarFile, m: tarfile.TarInfo, path: str, kind: str) -> None:  # noqa: C901 (named in pyproject.toml)
        if not path:
            # The destination itself (`./`): the user named it and hbtui made it
            # (ROOT_MODE); the archive sets neither its mode nor its times.
            return
        parent = self._parent(path)
        target = parent / path.split("/")[-1]
        if kind == "dir":
            try:
                st = os.lstat(target)
                if not stat.S_ISDIR(st.st_mode):
                    raise UnsafeArchive(
                        f"refusing directory {m.name!r}: it would replace a file or link"
                    )
            except FileNotFoundError:
                os.mkdir(target, 0o700)
            self.dirs.append((target, m.mode, m.mtime))
        elif kind == "file":
            self._clear(target)
            fd = os.open(
                target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
            )
            try:
                src = tf.extractfile(m)
                if src is None:
                    raise ArchiveCorrupt(f"cannot read tar entry {m.name!r}")
                # typeshed says IO[bytes]; tarfile hands out an ExFileObject (a BufferedReader)
                assert isinstance(src, io.BufferedReader)
                mv = memoryview(self.buf)
                left = m.size
                while left > 0:
                    n = src.readinto(mv[: min(left, COPY)])
                    if not n:
                        raise ArchiveCorrupt(f"the tar stream is cut short inside {m.name!r}")
                    view = mv[:n]
                    while view:
                        w = os.write(fd, view)
                        view = view[w:]
                    left -= n
                os.fchmod(fd, m.mode & FILE_MODE_BITS)
                os.utime(fd, (m.mtime, m.mtime))
            finally:
                os.close(fd)
        elif kind == LEFT_OUT:
            self._clear(target)  # what the archive put there before is replaced by nothing
        elif kind == "symlink":
            self._clear(target)
            os.symlink(m.linkname, target)
            with contextlib.suppress(NotImplementedError, OSError):
                os.utime(target, (m.mtime, m.mtime), follow_symlinks=False)
        elif kind == "hardlink":
            src_path = self.root / norm_name(m.linkname, "hardlink target")
            st = os.lstat(src_path)
            if not stat.S_ISREG(st.st_mode):
                raise UnsafeArchive(
                    f"refusing hardlink {m.name!r}: its target is not a regular file"
                )
            self._clear(target)
            os.link(src_path, target, follow_symlinks=False)

    def finish_dirs(self) -> None:
        # Deepest first, so a read-only folder is closed after what is in it; for a
        # directory named twice, the later entry's mode and time win (stable sort).
        for d, mode, mtime in sorted(self.dirs, key=lambda t: len(t[0].parts), reverse=True):
            os.chmod(d, mode & DIR_MODE_BITS)
            os.utime(d, (mtime, mtime))


def _rmtree(path: Path) -> None:
    def onerror(
        func: Callable[[str], object],
        p: str,
        exc: tuple[type[BaseException], BaseException, TracebackType],
    ) -> None:
        # a folder we made read-only: open it up and retry
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700) if os.path.isdir(p) and not os.path.islink(p) else None
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)


class Source:
    """A plaintext tar stream and whatever produces it."""

    stdout: TarStream

    def finish(self) -> None:
        """The tar stream was read to EOF: check every producer succeeded."""

    def abort(self) -> BaseException | None:
        """Stop every producer; return the producer's own failure, if any."""
        return None


class _PlainSource(Source):
    def __init__(self, reader: BinaryIO) -> None:
        self.stdout = reader


def run_extract(
    source: Source, dest: Path, allow_external_symlinks: bool, *, leave_out_external: bool = False
) -> TarSummary:
    dest = Path(dest)
    if os.path.lexists(dest):
        source.abort()
        raise ArchiveError(f"the destination {str(dest)!r} already exists")
    if not dest.parent.is_dir():
        source.abort()
        raise ArchiveError(f"the folder {str(dest.parent)!r} does not exist")
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.extract-"))
    try:
        os.chmod(tmp, ROOT_MODE)  # mkdtemp's mode; stated, whatever the umask
        policy = Policy(allow_external_symlinks, leave_out_external=leave_out_external)
        ex = _Extractor(tmp)
        walk(source.stdout, policy, ex.entry)
        source.finish()
        for path in policy.late:  # written, then led outside by a later link
            os.unlink(tmp / path)
        ex.finish_dirs()
        if os.path.lexists(dest):
            raise ArchiveError(f"the destination {str(dest)!r} appeared during extraction")
        os.rename(tmp, dest)
        return policy.summary
    except BaseException as e:
        root = source.abort()
        _rmtree(tmp)
        _raise_root(e, root)
        raise


def run_validate(source: Source, allow_external_symlinks: bool) -> TarSummary:
    try:
        policy = Policy(allow_external_symlinks)
        walk(source.stdout, policy, lambda tf, m, path, kind: None)
        source.finish()
        return policy.summary
    except BaseException as e:
        _raise_root(e, source.abort())
        raise


def _raise_root(e: BaseException, root: BaseException | None) -> None:
    """The source's own failure (a wrong passphrase, a truncated file) is the one to tell,
    over what it caused in the tar reader; an unsafe member or Ctrl-C stays as it is."""
    if root is not None and not isinstance(e, (UnsafeArchive, KeyboardInterrupt)) and root is not e:
        raise root from None


def extract_tar(
    reader: BinaryIO,
    dest: str | os.PathLike[str],
    *,
    allow_external_symlinks: bool = False,
    leave_out_external: bool = False,
) -> TarSummary:
    """Extract a plain (uncompressed) tar stream into the new folder `dest`."""
    return run_extract(
        _PlainSource(reader), Path(dest), allow_external_symlinks,
        leave_out_external=leave_out_external,
    )  # fmt: skip


# --- HBX archives: decrypt -> zstd -d -> tar ------------------------------
