"""HBX1 archives as streams: the payload in chunks, each sealed with AES-256-GCM under the
payload key, its nonce the chunk's counter (11 bytes, big-endian) and a final flag.

    chunk i  AES-256-GCM(payload key, nonce = i as 11-byte BE || final flag)

Memory is O(chunk size) whatever the payload size: every buffer is allocated once and
filled with `readinto`. Files (private, atomic) are hbtui.archive.files.
"""

from __future__ import annotations

import io
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import IO, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from hbtui.archive.errors import ArchiveCorrupt, ArchiveError, ArchiveTruncated
from hbtui.archive.header import (
    DEFAULT_CHUNK_SIZE,
    HEADER_SIZE,
    MAGIC,
    TAG_SIZE,
    VERSION,
    HeaderInfo,
    Kek,
    Randomness,
    check_chunk_size,
    check_passphrase,
    derive_kek,
    open_header,
    parse_header,
    plaintext_size_for,
    seal_header,
)
from hbtui.archive.kdf import DEFAULT_KDF, KdfParams

# Chunk counters run 0 .. 2^88 - 1 (11 bytes): at most 2^88 chunks in one archive.
_MAX_COUNTER = (1 << 88) - 1

Progress = Callable[[int], None]


@dataclass(frozen=True)
class Sealing:
    """How a writer seals an archive: its chunk size and its KDF's cost. KDF parameters
    below the writer's minimum (`KdfParams.weakness()`) are refused with ValueError
    unless `allow_weak_kdf` (tests, test vectors)."""

    chunk_size: int = DEFAULT_CHUNK_SIZE
    kdf: KdfParams = DEFAULT_KDF
    allow_weak_kdf: bool = False


SEALED = Sealing()  # what every archive hbtui writes is sealed with


def _nonce(counter: int, final: bool) -> bytes:
    if counter > _MAX_COUNTER:
        raise ArchiveError("too many chunks for one archive")
    return counter.to_bytes(11, "big") + (b"\x01" if final else b"\x00")


# --- I/O helpers -----------------------------------------------------------


def _readfull(src: IO[bytes], buf: memoryview) -> int:
    """Fill `buf` from `src` until it is full or src is at EOF; return the count."""
    want = len(buf)
    got = 0
    readinto = getattr(src, "readinto", None)
    while got < want:
        if readinto is not None:
            n = readinto(buf[got:])
        else:
            data = src.read(want - got)
            n = len(data) if data is not None else None
            if n:
                buf[got : got + n] = data
        if n is None:
            raise ArchiveError("the source is non-blocking; archives need a blocking stream")
        if n == 0:
            break
        got += n
    return got


def _write_all(dst: BinaryIO, data: memoryview) -> None:
    total = len(data)
    done = 0
    while done < total:
        n = dst.write(data[done:])
        if n is None:
            raise ArchiveError("the destination is non-blocking; archives need a blocking stream")
        if n == 0:
            raise ArchiveError("the destination accepted no bytes")
        done += n


# --- encryption ------------------------------------------------------------


class Encryptor:
    """Write one archive to `dst` incrementally.

    The header is written by the constructor (after the KDF runs). Then
    `feed()` plaintext in pieces of any size, or `feed_from()` a readable
    stream, any number of times and in any mix; `finish()` writes the final
    chunk. A full chunk is held back until more data arrives, so the final
    chunk is never empty unless the whole payload is. `progress`, if given,
    is called with the cumulative number of plaintext bytes taken so far.
    `sealing`: the chunk size and KDF (see `Sealing`). `passphrase` may be the `Kek` an
    archive sealed with the same KDF was opened (or written) with: the KDF does not run
    again, and the new archive shares that one's KDF salt and nothing else.
    """

    def __init__(
        self,
        dst: BinaryIO,
        passphrase: bytes | Kek,
        *,
        sealing: Sealing = SEALED,
        progress: Progress | None = None,
        _randomness: Randomness | None = None,
    ) -> None:
        if not isinstance(passphrase, Kek):
            check_passphrase(passphrase)
        chunk_size, kdf = sealing.chunk_size, sealing.kdf
        exp = check_chunk_size(chunk_size)
        kdf.check()
        weak = kdf.weakness()
        if weak is not None and not sealing.allow_weak_kdf:
            raise ValueError(f"{weak}; pass allow_weak_kdf=True only for tests")
        rnd = _randomness if _randomness is not None else Randomness.fresh()
        if isinstance(passphrase, Kek):
            if passphrase.kdf != kdf:
                raise ValueError("the key was derived with other KDF parameters")
            rnd = replace(rnd, kdf_salt=passphrase.salt)
        rnd.check()
        self.kek = (
            passphrase if isinstance(passphrase, Kek) else derive_kek(passphrase, kdf, rnd.kdf_salt)
        )
        header, payload_key = seal_header(self.kek, exp, rnd)
        self._dst = dst
        self._aead = AESGCM(payload_key)
        self._cs = chunk_size
        self._buf = bytearray(chunk_size)
        self._spare: bytearray | None = None  # allocated by feed_from only
        self._out = bytearray(chunk_size + TAG_SIZE)
        self._fill = 0
        self._counter = 0
        self._taken = 0
        self._progress = progress
        self._finished = False
        self.bytes_written = 0
        _write_all(dst, memoryview(header))
        self.bytes_written = HEADER_SIZE

    @property
    def plaintext_bytes(self) -> int:
        return self._taken

    @property
    def finished(self) -> bool:
        return self._finished

    def _seal(self, data: memoryview, final: bool) -> None:
        n = len(data)
        out = memoryview(self._out)[: n + TAG_SIZE]
        self._aead.encrypt_into(_nonce(self._counter, final), data, None, out)
        _write_all(self._dst, out)
        self._counter += 1
        self.bytes_written += n + TAG_SIZE

    def _check_open(self) -> None:
        if self._finished:
            raise ArchiveError("the archive is already finished")

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add plaintext."""
        self._check_open()
        mv = memoryview(data).cast("B")
        total = len(mv)
        if not total:
            return
        cs = self._cs
        pos = 0
        buf = memoryview(self._buf)
        while pos < total:
            if self._fill == cs:  # more data follows, so the held chunk is not final
                self._seal(buf, False)
                self._fill = 0
            if self._fill == 0 and total - pos > cs:
                # Whole chunks straight from the caller's buffer, no copy; the
                # last whole piece is copied in case nothing follows it.
                self._seal(mv[pos : pos + cs], False)
                pos += cs
                continue
            take = min(cs - self._fill, total - pos)
            buf[self._fill : self._fill + take] = mv[pos : pos + take]
            self._fill += take
            pos += take
        self._taken += total
        if self._progress is not None:
            self._progress(self._taken)

    def write(self, data: bytes | bytearray | memoryview) -> int:
        """File-like alias of feed() (returns the byte count)."""
        self.feed(data)
        return memoryview(data).nbytes

    def feed_from(self, src: IO[bytes]) -> int:
        """Read `src` to EOF with readinto into preallocated buffers; return the count."""
        self._check_open()
        cs = self._cs
        if self._spare is None:
            self._spare = bytearray(cs)
        count = 0
        while True:
            if self._fill == cs:
                n = _readfull(src, memoryview(self._spare))  # one chunk of lookahead
                if n == 0:
                    break
                self._seal(memoryview(self._buf), False)
                self._buf, self._spare = self._spare, self._buf
                self._fill = n
            else:
                n = _readfull(src, memoryview(self._buf)[self._fill :])
                self._fill += n
            count += n
            self._taken += n
            if n and self._progress is not None:
                self._progress(self._taken)
            if self._fill < cs:
                break  # short fill means EOF
        return count

    def finish(self) -> int:
        """Write the final chunk; return the archive's total size in bytes."""
        self._check_open()
        self._seal(memoryview(self._buf)[: self._fill], True)
        self._fill = 0
        self._finished = True
        flush = getattr(self._dst, "flush", None)
        if flush is not None:
            flush()
        return self.bytes_written


def encrypt_stream(
    src: BinaryIO,
    dst: BinaryIO,
    passphrase: bytes | Kek,
    *,
    sealing: Sealing = SEALED,
    progress: Progress | None = None,
    _randomness: Randomness | None = None,
) -> int:
    """Encrypt all of `src` into `dst`; return the plaintext byte count."""
    enc = Encryptor(dst, passphrase, sealing=sealing, progress=progress, _randomness=_randomness)
    n = enc.feed_from(src)
    enc.finish()
    return n


# --- decryption ------------------------------------------------------------


class Decryptor:
    """Read one archive from `src`, yielding verified plaintext chunk by chunk.

    The constructor reads and authenticates the header (caps the KDF, runs
    it, unwraps the file key, checks the header MAC). `chunks()` then yields
    each chunk's plaintext once its tag verified, as a memoryview that is
    only valid until the next chunk is requested (copy it or write it out).
    The payload is complete and authentic only when `chunks()` returns
    normally (then `complete` is True): a truncated archive raises at the
    end, after earlier chunks were yielded, so stage what you write and
    commit only after the loop ends. `progress`, if given, is called with
    the cumulative number of archive bytes consumed.
    """

    def __init__(
        self, src: BinaryIO, passphrase: bytes, *, progress: Progress | None = None
    ) -> None:
        check_passphrase(passphrase)
        raw = bytearray(HEADER_SIZE)
        n = _readfull(src, memoryview(raw))
        parsed = parse_header(bytes(raw[:n]))
        payload_key, self.kek = open_header(parsed, passphrase)
        self._aead = AESGCM(payload_key)
        self._src = src
        self._progress = progress
        self.chunk_size = parsed.chunk_size
        self.kdf = parsed.kdf
        self.complete = False
        self.plaintext_bytes = 0
        self.archive_bytes = HEADER_SIZE
        self._started = False

    def _open_chunk(self, counter: int, data: memoryview, out: memoryview, final: bool) -> bool:
        try:
            self._aead.decrypt_into(_nonce(counter, final), data, None, out)
            return True
        except InvalidTag:
            return False

    def _check_chunk(
        self, counter: int, data: memoryview, out: memoryview, *, last: bool
    ) -> ArchiveError | None:
        """Open one chunk into `out`; what is wrong with it, if anything. `last`: no
        data follows it, so it must be the final chunk (and only then may it be)."""
        full = self.chunk_size + TAG_SIZE
        if last:
            if not self._open_chunk(counter, data, out, True):
                if len(data) == full and self._open_chunk(counter, data, out, False):
                    return ArchiveTruncated(
                        f"the archive ends after chunk {counter}, before its final chunk"
                    )
                return ArchiveCorrupt(
                    f"chunk {counter} failed authentication (the archive is damaged or truncated)"
                )
            if len(data) == TAG_SIZE and counter > 0:
                return ArchiveCorrupt(
                    f"chunk {counter} is an empty final chunk, which is not allowed"
                )
        elif not self._open_chunk(counter, data, out, False):
            if self._open_chunk(counter, data, out, True):
                return ArchiveCorrupt(f"unexpected data after the final chunk {counter}")
            return ArchiveCorrupt(
                f"chunk {counter} failed authentication (the archive is damaged or reordered)"
            )
        return None

    def chunks(self) -> Iterator[memoryview]:
        if self._started:
            raise ArchiveError("an archive can only be read once")
        self._started = True
        cs = self.chunk_size
        full = cs + TAG_SIZE
        cur = bytearray(full)
        nxt = bytearray(full)
        plain = bytearray(cs)
        pmv = memoryview(plain)
        n = _readfull(self._src, memoryview(cur))
        counter = 0
        while True:
            if n < TAG_SIZE:
                if counter == 0 and n == 0:
                    raise ArchiveTruncated("the archive ends right after its header (no payload)")
                raise ArchiveTruncated(f"the archive is cut short inside chunk {counter}")
            m = _readfull(self._src, memoryview(nxt)) if n == full else 0  # one chunk of lookahead
            data = memoryview(cur)[:n]
            out = pmv[: n - TAG_SIZE]
            error = self._check_chunk(counter, data, out, last=m == 0)
            if error is not None:
                raise error
            self.archive_bytes += n
            self.plaintext_bytes += n - TAG_SIZE
            if self._progress is not None:
                self._progress(self.archive_bytes)
            if m == 0:
                self.complete = True
                yield out
                return
            yield out
            counter += 1
            cur, nxt = nxt, cur
            n = m


def decrypt_stream(
    src: BinaryIO, dst: BinaryIO, passphrase: bytes, progress: Progress | None = None
) -> int:
    """Decrypt `src` into `dst`; return the plaintext byte count.

    Header problems raise before anything is written. A damaged or truncated
    payload raises after the chunks before it were written to `dst`: use
    decrypt_file() (or the safe extractor) when the output must be all or
    nothing."""
    dec = Decryptor(src, passphrase, progress=progress)
    for chunk in dec.chunks():
        _write_all(dst, chunk)
    return dec.plaintext_bytes


def verify_stream(src: BinaryIO, passphrase: bytes, progress: Progress | None = None) -> int:
    """Authenticate the header and every chunk, write nothing; return the plaintext size."""
    dec = Decryptor(src, passphrase, progress=progress)
    for _ in dec.chunks():
        pass
    return dec.plaintext_bytes


def source_size(src: BinaryIO) -> int | None:
    try:
        st = os.fstat(src.fileno())
        if stat.S_ISREG(st.st_mode):
            return st.st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    try:
        if src.seekable():
            pos = src.tell()
            end = src.seek(0, io.SEEK_END)
            src.seek(pos)
            return end
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    return None


def read_header(src: BinaryIO | str | os.PathLike[str]) -> HeaderInfo:
    """Parse and range-check a header without the passphrase (nothing is
    authenticated yet). A stream is left positioned after the header."""
    if isinstance(src, (str, os.PathLike)):
        with open(src, "rb") as f:
            return read_header(f)
    start = None
    try:
        if src.seekable():
            start = src.tell()
    except (AttributeError, OSError):
        start = None
    total = source_size(src)
    raw = bytearray(HEADER_SIZE)
    n = _readfull(src, memoryview(raw))
    parsed = parse_header(bytes(raw[:n]))
    archive_size = None if total is None else total - (start or 0)
    plain = None if archive_size is None else plaintext_size_for(archive_size, parsed.chunk_size)
    return HeaderInfo(
        version=VERSION,
        aead="AES-256-GCM",
        kdf=parsed.kdf,
        chunk_size=parsed.chunk_size,
        header_size=HEADER_SIZE,
        archive_size=archive_size,
        plaintext_size=plain,
        kdf_warning=parsed.kdf.weakness(),
    )


def is_hbx(path: str | os.PathLike[str]) -> bool:
    """True when the file starts with the hbtui archive magic."""
    try:
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC
    except OSError:
        return False
