"""Safe extraction (and validation) of tar streams from archives.

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
  once the whole stream is known) are refused;
* hardlinks: the target must be an earlier regular file inside the root;
* modes: files keep their permission bits only (setuid, setgid and sticky
  dropped); directories keep permission bits and sticky (setuid, setgid
  dropped); ownership, xattrs, ACLs and capabilities are never applied;
* the root: a directory entry that names the destination itself (`./`)
  changes nothing: the destination keeps the mode 0700, owner and times
  it was created with;
* the stream: it must end with tar's end-of-archive marker (a zero block),
  and only zero bytes may follow it; a damaged header is an error, never a
  silent end.

Extraction goes to a private temporary folder beside the destination, which
is renamed into place only after the whole tar stream was read, the
decompressor exited cleanly and (for an HBX archive) the final chunk
verified. On any failure the temporary folder is removed and the
destination never appears.

`zstd` (the host binary) decompresses HBX archive payloads: the guest makes
them with `tar --zstd`.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import stat
import subprocess
import tarfile
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, BinaryIO, Protocol, Self

from hbtui.archive._proc import last_line, need
from hbtui.archive.errors import ArchiveCorrupt, ArchiveError, UnsafeArchive
from hbtui.archive.header import DEFAULT_CHUNK_SIZE
from hbtui.archive.kdf import DEFAULT_KDF, KdfParams
from hbtui.archive.stream import Decryptor, Encryptor, Progress
from hbtui.environment import child_env
from hbtui.statefile import atomic_output

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = [
    "DecryptedReader",
    "TarSummary",
    "extract_hbx",
    "extract_tar",
    "pack_dir",
    "validate_hbx",
    "validate_tar",
]

_COPY = 1 << 20
_MAX_LINK_HOPS = 40
# The mode bits an extracted entry keeps. Files: permissions only (no setuid,
# setgid or sticky). Directories: permissions and sticky, which only restricts
# (dropping it from a 1777 folder would let anyone delete anyone's files there).
FILE_MODE_BITS = 0o777
DIR_MODE_BITS = 0o1777
#: The destination folder's mode; the archive's `./` entry does not change it.
ROOT_MODE = 0o700


@dataclass
class TarSummary:
    files: int = 0
    dirs: int = 0
    symlinks: int = 0
    hardlinks: int = 0
    bytes: int = 0


# --- the policy (shared by the validator and the extractor) ---------------


def _norm(name: str, what: str = "entry") -> str:
    if "\x00" in name:
        raise UnsafeArchive(f"refusing {what} with a NUL byte in its name")
    if name.startswith("/"):
        raise UnsafeArchive(f"refusing {what} with an absolute path: {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"refusing {what} with a '..' component: {name!r}")
    return "/".join(parts)


class _Policy:
    """Tracks the entries seen so far in a virtual tree and judges each new one."""

    def __init__(self, allow_external_symlinks: bool) -> None:
        self.allow_external = allow_external_symlinks
        self.kinds: dict[str, str] = {}  # path -> "dir" | "file" | "symlink"
        self.links: dict[str, str] = {}  # symlink path -> target
        self.summary = TarSummary()

    def _resolve(self, parts: list[str], target: str) -> bool:
        """Follow `target` from the folder `parts` through the archive's own
        symlinks; False if it leaves the root (or loops, or is absolute)."""
        if target.startswith("/"):
            return False
        parts = list(parts)
        rest = target.split("/")
        hops = 0
        while rest:
            c = rest.pop(0)
            if c in ("", "."):
                continue
            if c == "..":
                if not parts:
                    return False
                parts.pop()
                continue
            cand = "/".join([*parts, c])
            link = self.links.get(cand)
            if link is not None:
                hops += 1
                if hops > _MAX_LINK_HOPS or link.startswith("/"):
                    return False
                rest = link.split("/") + rest
                continue
            parts.append(c)
        return True

    def _check_link(self, path: str, target: str) -> None:
        if self.allow_external:
            return
        if target.startswith("/"):
            raise UnsafeArchive(f"refusing symlink {path!r} with an absolute target {target!r}")
        parent = path.split("/")[:-1]
        if not self._resolve(parent, target):
            raise UnsafeArchive(
                f"refusing symlink {path!r} -> {target!r}: it points outside the destination"
            )

    def check(self, m: tarfile.TarInfo) -> tuple[str, str]:  # noqa: C901 (named in pyproject.toml)
        """Return (normalised path, kind) or raise UnsafeArchive."""
        path = _norm(m.name)
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
        if kind == "symlink":
            self._check_link(path, m.linkname)
        if kind == "hardlink":
            target = _norm(m.linkname, "hardlink target")
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
        if kind == "symlink":
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
        """Later symlinks can change where earlier ones lead: check them all again."""
        if self.allow_external:
            return
        for path, target in self.links.items():
            self._check_link(path, target)


# --- streaming through tarfile --------------------------------------------


class _TarStream(Protocol):
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


def _members(reader: _TarStream) -> tuple[_TarReader, Iterator[tarfile.TarInfo]]:
    try:
        # typeshed types `fileobj` as a full seekable, writable file for every
        # mode; the read-only stream mode "r|" only ever calls read().
        tf = _TarReader.open(fileobj=reader, mode="r|", bufsize=_COPY)  # type: ignore[call-overload]
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
        data = tf.fileobj.read(_COPY)
        if not data:
            return
        if data.count(0) != len(data):
            raise ArchiveCorrupt("the tar stream has data after its end-of-archive marker")


def _walk(
    reader: _TarStream,
    policy: _Policy,
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
    policy = _Policy(allow_external_symlinks)
    _walk(reader, policy, lambda tf, m, path, kind: None)
    return policy.summary


class _Extractor:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dirs: list[tuple[Path, int, float]] = []
        self.buf = bytearray(_COPY)

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
                    n = src.readinto(mv[: min(left, _COPY)])
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
        elif kind == "symlink":
            self._clear(target)
            os.symlink(m.linkname, target)
            with contextlib.suppress(NotImplementedError, OSError):
                os.utime(target, (m.mtime, m.mtime), follow_symlinks=False)
        elif kind == "hardlink":
            src_path = self.root / _norm(m.linkname, "hardlink target")
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


class _Source:
    """A plaintext tar stream and whatever produces it."""

    stdout: _TarStream

    def finish(self) -> None:
        """The tar stream was read to EOF: check every producer succeeded."""

    def abort(self) -> BaseException | None:
        """Stop every producer; return the producer's own failure, if any."""
        return None


class _PlainSource(_Source):
    def __init__(self, reader: BinaryIO) -> None:
        self.stdout = reader


def _run_extract(source: _Source, dest: Path, allow_external_symlinks: bool) -> TarSummary:
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
        policy = _Policy(allow_external_symlinks)
        ex = _Extractor(tmp)
        _walk(source.stdout, policy, ex.entry)
        source.finish()
        ex.finish_dirs()
        if os.path.lexists(dest):
            raise ArchiveError(f"the destination {str(dest)!r} appeared during extraction")
        os.rename(tmp, dest)
        return policy.summary
    except BaseException as e:
        root = source.abort()
        _rmtree(tmp)
        if (
            root is not None
            and not isinstance(e, (UnsafeArchive, KeyboardInterrupt))
            and root is not e
        ):
            raise root from None
        raise


def _run_validate(source: _Source, allow_external_symlinks: bool) -> TarSummary:
    try:
        policy = _Policy(allow_external_symlinks)
        _walk(source.stdout, policy, lambda tf, m, path, kind: None)
        source.finish()
        return policy.summary
    except BaseException as e:
        root = source.abort()
        if (
            root is not None
            and not isinstance(e, (UnsafeArchive, KeyboardInterrupt))
            and root is not e
        ):
            raise root from None
        raise


def extract_tar(
    reader: BinaryIO, dest: str | os.PathLike[str], *, allow_external_symlinks: bool = False
) -> TarSummary:
    """Extract a plain (uncompressed) tar stream into the new folder `dest`."""
    return _run_extract(_PlainSource(reader), Path(dest), allow_external_symlinks)


# --- HBX archives: decrypt -> zstd -d -> tar ------------------------------


class DecryptedReader(io.RawIOBase):
    """A readable view of an archive's verified plaintext. EOF is returned only
    after the final chunk verified; a damaged archive raises from read."""

    def __init__(self, dec: Decryptor) -> None:
        super().__init__()
        self._dec = dec
        self._it = dec.chunks()
        self._cur = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
        while not self._cur:
            try:
                self._cur = next(self._it)
            except StopIteration:
                return 0
        mv = memoryview(b).cast("B")
        n = min(len(mv), len(self._cur))
        mv[:n] = self._cur[:n]
        self._cur = self._cur[n:]
        return n

    def pump_to(self, dst: IO[bytes]) -> None:
        """Write every verified chunk to `dst` without an extra copy."""
        if self._cur:
            dst.write(self._cur)
            self._cur = memoryview(b"")
        for chunk in self._it:
            dst.write(chunk)


class _ZstdSource(_Source):
    stdout: IO[bytes]  # zstd's own pipe, which this source closes

    def __init__(self, upstream: DecryptedReader) -> None:
        zstd = need("zstd", "it decompresses box archives")
        self._err = tempfile.TemporaryFile()
        self._proc = subprocess.Popen(
            [zstd, "-d", "-c", "-q"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            env=child_env(),
            close_fds=True,
        )
        assert self._proc.stdout is not None
        self.stdout = self._proc.stdout
        self._upstream = upstream
        self._error: BaseException | None = None
        self._aborting = False
        self._thread = threading.Thread(target=self._feed, name="hbx-feed", daemon=True)
        self._thread.start()

    def _feed(self) -> None:
        stdin = self._proc.stdin
        assert stdin is not None
        try:
            self._upstream.pump_to(stdin)
        except BrokenPipeError:
            if not self._aborting:
                self._error = ArchiveCorrupt("zstd stopped reading the archive payload")
        except BaseException as e:  # handed to the main thread
            self._error = e
        finally:
            with contextlib.suppress(OSError):
                stdin.close()

    def _stderr(self) -> str:
        self._err.seek(0)
        return last_line(self._err.read())

    def finish(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        rc = self._proc.wait()
        if rc != 0:
            raise ArchiveCorrupt(f"the archive payload is not valid zstd data ({self._stderr()})")
        if not self._upstream._dec.complete:
            raise ArchiveCorrupt("the archive payload was not read to its final chunk")
        self.stdout.close()
        self._err.close()

    def abort(self) -> BaseException | None:
        self._aborting = True
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        with contextlib.suppress(OSError):
            self.stdout.close()
        self._thread.join(timeout=30)
        self._err.close()
        return self._error if isinstance(self._error, ArchiveError) else None


def _open_hbx(
    src: BinaryIO | str | os.PathLike[str], passphrase: bytes, progress: Progress | None
) -> tuple[BinaryIO | None, Decryptor]:
    if isinstance(src, (str, os.PathLike)):
        f = open(src, "rb")
        try:
            return f, Decryptor(f, passphrase, progress=progress)
        except BaseException:
            f.close()
            raise
    return None, Decryptor(src, passphrase, progress=progress)


def extract_hbx(
    src: BinaryIO | str | os.PathLike[str],
    dest: str | os.PathLike[str],
    passphrase: bytes,
    *,
    progress: Progress | None = None,
    allow_external_symlinks: bool = False,
) -> TarSummary:
    """Decrypt an HBX archive whose payload is a zstd-compressed tar and
    extract it into the new folder `dest` (all or nothing). `progress` gets
    the cumulative archive bytes read."""
    if os.path.lexists(dest):
        raise ArchiveError(f"the destination {str(dest)!r} already exists")
    owned, dec = _open_hbx(src, passphrase, progress)
    try:
        return _run_extract(_ZstdSource(DecryptedReader(dec)), Path(dest), allow_external_symlinks)
    finally:
        if owned is not None:
            owned.close()


def validate_hbx(
    src: BinaryIO | str | os.PathLike[str],
    passphrase: bytes,
    *,
    progress: Progress | None = None,
    allow_external_symlinks: bool = False,
) -> TarSummary:
    """Authenticate an HBX archive and check its tar payload against the
    extraction policy, writing nothing."""
    owned, dec = _open_hbx(src, passphrase, progress)
    try:
        return _run_validate(_ZstdSource(DecryptedReader(dec)), allow_external_symlinks)
    finally:
        if owned is not None:
            owned.close()


def pack_dir(
    src_dir: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    passphrase: bytes,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    kdf: KdfParams = DEFAULT_KDF,
    progress: Progress | None = None,
    zstd_level: int = 3,
    allow_weak_kdf: bool = False,
) -> int:
    """Make an HBX archive of a host folder: `tar -C DIR -cf - .` piped
    through `zstd -T0`, encrypted into `dest` (0600, atomic). Returns the
    archive size. The same payload shape the guest's `tar --zstd` makes."""
    tar = need("tar", "it packs folders")
    zstd = need("zstd", "it compresses box archives")
    env = child_env()
    terr = tempfile.TemporaryFile()
    zerr = tempfile.TemporaryFile()
    tproc = subprocess.Popen(
        [tar, "-C", str(src_dir), "-cf", "-", "."], stdout=subprocess.PIPE, stderr=terr, env=env
    )
    zproc = subprocess.Popen(
        [zstd, "-T0", f"-{zstd_level}", "-q", "-c"],
        stdin=tproc.stdout,
        stdout=subprocess.PIPE,
        stderr=zerr,
        env=env,
    )
    assert tproc.stdout is not None and zproc.stdout is not None
    tproc.stdout.close()
    try:
        with atomic_output(dest) as f:
            enc = Encryptor(
                f,
                passphrase,
                chunk_size=chunk_size,
                kdf=kdf,
                progress=progress,
                allow_weak_kdf=allow_weak_kdf,
            )
            enc.feed_from(zproc.stdout)
            trc, zrc = tproc.wait(), zproc.wait()
            if trc != 0:
                terr.seek(0)
                raise ArchiveError(f"tar failed: {last_line(terr.read())}")
            if zrc != 0:
                zerr.seek(0)
                raise ArchiveError(f"zstd failed: {last_line(zerr.read())}")
            return enc.finish()
    finally:
        for p in (tproc, zproc):
            if p.poll() is None:
                p.kill()
                p.wait()
        zproc.stdout.close()
        terr.close()
        zerr.close()
