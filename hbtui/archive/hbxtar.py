"""An HBX archive's tar: decrypted, decompressed by the host's `zstd` (the guest makes
them with `tar --zstd`), then validated or extracted (hbtui.archive.safetar); and a
folder packed into a new archive (tar | zstd | encrypt). The final chunk is verified
before an extraction is renamed into place."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import tarfile
import tempfile
import threading
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO

from hbtui.archive import note
from hbtui.archive._proc import last_line, need
from hbtui.archive.errors import ArchiveCorrupt, ArchiveError
from hbtui.archive.header import DEFAULT_CHUNK_SIZE
from hbtui.archive.kdf import DEFAULT_KDF, KdfParams
from hbtui.archive.safetar import Source, run_extract, run_validate
from hbtui.archive.stream import Decryptor, Encryptor, Progress
from hbtui.archive.tarpolicy import TarSummary
from hbtui.environment import child_env
from hbtui.statefile import atomic_output

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = [
    "DecryptedReader",
    "extract_hbx",
    "pack_dir",
    "payload_start_problem",
    "validate_hbx",
]


class DecryptedReader(io.RawIOBase):
    """A readable view of an archive's verified plaintext. EOF is returned only
    after the final chunk verified; a damaged archive raises from read."""

    def __init__(self, dec: Decryptor, head: bytearray | None = None) -> None:
        """`head`, when given, gets the payload's first bytes as they pass (up to
        note.HEAD_BYTES): where the host's note is."""
        super().__init__()
        self._dec = dec
        self._it = dec.chunks()
        self._cur = memoryview(b"")
        self._head = head

    def _next(self) -> memoryview:
        chunk = next(self._it)
        if self._head is not None and len(self._head) < note.HEAD_BYTES:
            self._head += chunk[: note.HEAD_BYTES - len(self._head)]
        return chunk

    def readable(self) -> bool:
        return True

    def readinto(self, b: WriteableBuffer) -> int:
        while not self._cur:
            try:
                self._cur = self._next()
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
        while True:
            try:
                chunk = self._next()
            except StopIteration:
                return
            dst.write(chunk)


class _ZstdSource(Source):
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
    leave_out_external: bool = False,
) -> TarSummary:
    """Decrypt an HBX archive whose payload is a zstd-compressed tar and
    extract it into the new folder `dest` (all or nothing). `progress` gets
    the cumulative archive bytes read."""
    if os.path.lexists(dest):
        raise ArchiveError(f"the destination {str(dest)!r} already exists")
    owned, dec = _open_hbx(src, passphrase, progress)
    try:
        return run_extract(
            _ZstdSource(DecryptedReader(dec)), Path(dest), allow_external_symlinks,
            leave_out_external=leave_out_external,
        )  # fmt: skip
    finally:
        if owned is not None:
            owned.close()


def validate_hbx(
    src: BinaryIO | str | os.PathLike[str],
    passphrase: bytes,
    *,
    progress: Progress | None = None,
    allow_external_symlinks: bool = False,
    head: bytearray | None = None,
) -> TarSummary:
    """Authenticate an HBX archive and check its tar payload against the
    extraction policy, writing nothing; `head` gets the payload's first bytes (its note)."""
    owned, dec = _open_hbx(src, passphrase, progress)
    try:
        return run_validate(_ZstdSource(DecryptedReader(dec, head)), allow_external_symlinks)
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


HEAD = 1 << 20  # of a payload decompressed to find its first tar entry


def payload_start_problem(first_part: str | os.PathLike[str]) -> str | None:
    """Why the start of a box's payload (its first zstd-compressed part, maybe cut
    mid-frame) is not a tar of a folder: empty, not zstd (or opening with a skippable
    frame, where the host's note goes), not a tar, or not opening with the folder itself
    (`./`); None when it is. A save checks this before it keeps a
    byte: a box whose tar wrote nothing was saved, and verified, as a good archive."""
    zstd = need("zstd", "it checks what a box's save sends")
    with open(first_part, "rb") as src:
        if note.skippable(src.read(4)):  # where the host's note goes: the box may not
            return "opens with a skippable frame, where only the host's note goes"
    with open(first_part, "rb") as src, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [zstd, "-d", "-c", "-q"], stdin=src, stdout=subprocess.PIPE, stderr=err,
            env=child_env(),
        )  # fmt: skip
        assert proc.stdout is not None
        try:
            head = proc.stdout.read(HEAD)
        finally:
            proc.stdout.close()  # zstd, had it more to say, ends on the broken pipe
            code = proc.wait()
        err.seek(0)
        why = last_line(err.read())
    if not head:
        return f"is not zstd data ({why})" if code else "is empty"
    try:
        with tarfile.open(fileobj=io.BytesIO(head), mode="r|") as tar:
            first = tar.next()
    except (tarfile.TarError, EOFError) as exc:
        return f"is not a tar ({exc})"
    if first is None or not first.isdir() or first.name.rstrip("/") not in (".", ""):
        named = "none" if first is None else repr(first.name)
        return f"does not open with the folder itself (its first entry: {named})"
    return None
