"""Backups of the old bash `box` tool: `NAME.tar.gz.gpg`.

They were made with `tar czf - ... | gpg --batch --pinentry-mode loopback
--passphrase-fd 3 --symmetric --cipher-algo AES256`. We stream them through
`gpg -d` (the passphrase goes over a pipe file descriptor: never argv, never
the environment), gunzip in-process and hand the tar stream to the same
safe extractor as HBX archives. gpg checks the MDC only at the end, so the
destination is committed only after gpg exited successfully.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import subprocess
import tempfile
import zlib
from pathlib import Path
from typing import IO, TYPE_CHECKING, BinaryIO

from hbtui.archive._proc import last_line, need
from hbtui.archive.errors import ArchiveCorrupt, ArchiveError, NotAnArchive, WrongPassphrase
from hbtui.archive.safetar import Source, run_extract, run_validate
from hbtui.archive.tarpolicy import TarSummary
from hbtui.environment import child_env

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["LEGACY_SUFFIX", "decrypt_legacy", "extract_legacy", "is_legacy", "validate_legacy"]

LEGACY_SUFFIX = ".tar.gz.gpg"

# OpenPGP packet tags that can open a symmetrically encrypted message:
# old-format SKESK (0x8c..0x8f) and new-format SKESK (0xc3).
_SKESK_FIRST_BYTES = {0x8C, 0x8D, 0x8E, 0x8F, 0xC3}


def is_legacy(path: str | os.PathLike[str]) -> bool:
    """True for a file that looks like an old-tool backup (name and first packet)."""
    if not str(path).endswith(LEGACY_SUFFIX):
        return False
    try:
        with open(path, "rb") as f:
            first = f.read(1)
    except OSError:
        return False
    return bool(first) and first[0] in _SKESK_FIRST_BYTES


def _gpg_error(rc: int, stderr: bytes) -> ArchiveError:
    text = stderr.decode("utf-8", "replace").lower()
    if "bad session key" in text or "bad passphrase" in text:
        return WrongPassphrase("wrong passphrase for this gpg backup")
    if "no valid openpgp data" in text or "unknown packet" in text:
        return NotAnArchive("not a gpg-encrypted backup")
    return ArchiveCorrupt(f"gpg could not decrypt the backup (exit {rc}: {last_line(stderr)})")


class _GpgProcess:
    """`gpg -d FILE` with the passphrase on a pipe fd; stdout is the plaintext."""

    def __init__(self, path: str | os.PathLike[str], passphrase: bytes) -> None:
        if not passphrase:
            raise ArchiveError("the passphrase is empty")
        if b"\n" in passphrase or b"\r" in passphrase:
            raise ArchiveError(
                "the passphrase contains a line break, which gpg cannot read from a pipe"
            )
        if not os.path.isfile(path):
            raise ArchiveError(f"no such backup: {str(path)!r}")
        gpg = need("gpg", "it decrypts backups of the old box tool")
        self._err = tempfile.TemporaryFile()
        rfd, wfd = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [
                    gpg,
                    "--batch",
                    "--quiet",
                    "--no-tty",
                    "--pinentry-mode",
                    "loopback",
                    "--no-symkey-cache",
                    "--passphrase-fd",
                    str(rfd),
                    "--decrypt",
                    "--output",
                    "-",
                    "--",
                    str(path),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=self._err,
                pass_fds=(rfd,),
                env=child_env(),
            )
        except BaseException:
            os.close(wfd)
            raise
        finally:
            os.close(rfd)
        try:
            os.write(wfd, bytes(passphrase) + b"\n")  # far below a pipe's capacity: never blocks
        except BrokenPipeError:
            pass
        finally:
            os.close(wfd)
        assert self.proc.stdout is not None
        self.stdout: IO[bytes] = self.proc.stdout

    def stderr(self) -> bytes:
        self._err.seek(0)
        return self._err.read()

    def wait_ok(self) -> None:
        rc = self.proc.wait()
        if rc != 0:
            raise _gpg_error(rc, self.stderr())

    def stop(self) -> ArchiveError | None:
        """Stop gpg; if it had already failed on its own, say why."""
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        with contextlib.suppress(OSError):
            self.stdout.close()
        err = None
        if rc is not None and rc != 0:
            err = _gpg_error(rc, self.stderr())
            if isinstance(err, ArchiveCorrupt) and "write error" in err.message.lower():
                err = None  # we stopped reading; not gpg's own failure
        self._err.close()
        return err


class _GunzipReader:
    """gunzip a stream; errors become ArchiveCorrupt."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._gz = gzip.GzipFile(fileobj=raw, mode="rb")

    def read(self, n: int = -1) -> bytes:
        try:
            return self._gz.read(n)
        except (OSError, EOFError, zlib.error) as e:
            raise ArchiveCorrupt(f"the backup's gzip stream is invalid ({e})") from None

    def readinto(self, b: WriteableBuffer) -> int:
        try:
            return self._gz.readinto(b)
        except (OSError, EOFError, zlib.error) as e:
            raise ArchiveCorrupt(f"the backup's gzip stream is invalid ({e})") from None


class _LegacySource(Source):
    def __init__(self, path: str | os.PathLike[str], passphrase: bytes) -> None:
        self._gpg = _GpgProcess(path, passphrase)
        self.stdout = _GunzipReader(self._gpg.stdout)
        self._done = False

    def finish(self) -> None:
        self._gpg.wait_ok()
        self._gpg.stdout.close()
        self._done = True

    def abort(self) -> BaseException | None:
        if self._done:
            return None
        return self._gpg.stop()


def extract_legacy(
    path: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    passphrase: bytes,
    *,
    allow_external_symlinks: bool = False,
    leave_out_external: bool = False,
) -> TarSummary:
    """Decrypt and safely extract an old-tool backup into the new folder `dest`."""
    if os.path.lexists(dest):
        raise ArchiveError(f"the destination {str(dest)!r} already exists")
    return run_extract(
        _LegacySource(path, passphrase), Path(dest), allow_external_symlinks,
        leave_out_external=leave_out_external,
    )  # fmt: skip


def validate_legacy(
    path: str | os.PathLike[str], passphrase: bytes, *, allow_external_symlinks: bool = False
) -> TarSummary:
    """Decrypt an old-tool backup and check its tar against the extraction policy, writing nothing."""
    return run_validate(_LegacySource(path, passphrase), allow_external_symlinks)


def decrypt_legacy(path: str | os.PathLike[str], dst: BinaryIO, passphrase: bytes) -> int:
    """Stream the decrypted (still gzip-compressed) tar of an old backup into `dst`.
    gpg authenticates at the end: a failure raises after data was written, so
    `dst` must be a staging place. Returns the byte count."""
    gpg = _GpgProcess(path, passphrase)
    n = 0
    try:
        while True:
            chunk = gpg.stdout.read(1 << 20)
            if not chunk:
                break
            dst.write(chunk)
            n += len(chunk)
        gpg.wait_ok()
        return n
    except BaseException as e:
        err = gpg.stop()
        if err is not None and err is not e:
            raise err from None
        raise
    finally:
        with contextlib.suppress(OSError):
            gpg.stdout.close()
