"""HBX1 archives as files: private (0600) and atomic, a new archive appears whole or not at
all, and a file's chunks are verified by threads at their offsets."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from hbtui.archive.errors import ArchiveError, ArchiveTruncated
from hbtui.archive.header import HEADER_SIZE, TAG_SIZE
from hbtui.archive.stream import (
    SEALED,
    Decryptor,
    Encryptor,
    Progress,
    Sealing,
    decrypt_stream,
    source_size,
    verify_stream,
)
from hbtui.statefile import atomic_output


@contextmanager
def create_archive(
    path: str | os.PathLike[str],
    passphrase: bytes,
    *,
    sealing: Sealing = SEALED,
    progress: Progress | None = None,
) -> Iterator[Encryptor]:
    """Yield an Encryptor writing to a private temporary file; on normal exit
    finish it and move it to `path`, which it never replaces: if a file took
    that name meanwhile, FileExistsError. On error nothing is left behind."""
    with atomic_output(path, replace=False) as f:
        enc = Encryptor(f, passphrase, sealing=sealing, progress=progress)
        yield enc
        if not enc.finished:
            enc.finish()


def encrypt_file(
    src_path: str | os.PathLike[str],
    dst_path: str | os.PathLike[str],
    passphrase: bytes,
    *,
    sealing: Sealing = SEALED,
    progress: Progress | None = None,
) -> int:
    """Encrypt a file into a new archive at `dst_path` (0600, atomic)."""
    with (
        open(src_path, "rb", buffering=0) as src,
        create_archive(dst_path, passphrase, sealing=sealing, progress=progress) as enc,
    ):
        return enc.feed_from(src)


def decrypt_file(
    src_path: str | os.PathLike[str],
    dst_path: str | os.PathLike[str],
    passphrase: bytes,
    progress: Progress | None = None,
) -> int:
    """Decrypt an archive to `dst_path` (0600); `dst_path` appears only if
    the whole archive verified."""
    with open(src_path, "rb", buffering=0) as src, atomic_output(dst_path) as dst:
        return decrypt_stream(src, dst, passphrase, progress)


VERIFY_THREADS = 2  # the AEAD and pread release the GIL; more threads gain little on 2 cores


def verify_file(
    src_path: str | os.PathLike[str], passphrase: bytes, progress: Progress | None = None
) -> int:
    """Authenticate a whole archive file; return its plaintext size.

    A regular file's chunks sit at known offsets, so they are authenticated
    by VERIFY_THREADS threads at once, each reading and opening its own
    chunks; the result and the error (for the lowest failing chunk) are
    those of `verify_stream`, which reads anything else front to back.
    """
    with open(src_path, "rb", buffering=0) as src:
        size = source_size(src)
        if size is None or not stat.S_ISREG(os.fstat(src.fileno()).st_mode):
            return verify_stream(src, passphrase, progress)
        dec = Decryptor(src, passphrase)  # reads the header and runs the KDF
        return _verify_at_offsets(dec, src.fileno(), size, progress)


def _verify_at_offsets(dec: Decryptor, fd: int, size: int, progress: Progress | None) -> int:  # noqa: C901 (named in pyproject.toml)
    full = dec.chunk_size + TAG_SIZE
    body = size - HEADER_SIZE
    if body <= 0:
        raise ArchiveTruncated("the archive ends right after its header (no payload)")
    count = -(-body // full)
    last = count - 1
    last_len = body - last * full
    failures: dict[int, ArchiveError] = {}
    lock = threading.Lock()
    done = [HEADER_SIZE]

    def check(index: int) -> ArchiveError | None:
        n = full if index < last else last_len
        if n < TAG_SIZE:
            return ArchiveTruncated(f"the archive is cut short inside chunk {index}")
        data = memoryview(os.pread(fd, n, HEADER_SIZE + index * full))
        if len(data) != n:
            return ArchiveTruncated(f"the archive is cut short inside chunk {index}")
        return dec._check_chunk(
            index, data, memoryview(bytearray(n - TAG_SIZE)), last=index == last
        )

    def worker(first: int) -> None:
        for index in range(first, count, VERIFY_THREADS):
            with lock:
                if failures and min(failures) < index:
                    return  # a lower chunk failed already: that is the error
            error = check(index)
            with lock:
                if error is not None:
                    failures[index] = error
                    return
                done[0] += full if index < last else last_len
                if progress is not None:
                    progress(done[0])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(VERIFY_THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[min(failures)]
    return body - count * TAG_SIZE
