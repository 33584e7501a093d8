"""The hbtui archive format, version 1 ("HBX1").

A passphrase-encrypted, chunked, streaming AES-256-GCM container. The full
specification, with every byte offset and every rejection rule, is
docs/archive-format.md; this module is its reference implementation.

Layout: a fixed 144-byte header, then the payload as a sequence of chunks.

    header   magic "HBX1" | version | aead id | kdf id | chunk exponent
             | KDF params (3 x u32 BE) | KDF salt (16) | payload salt (16)
             | wrap nonce (12) | wrapped file key (32 + 16 tag) | HMAC-SHA256 (32)
    chunk i  AES-256-GCM(payload key, nonce = i as 11-byte BE || final flag)

A random 32-byte file key is wrapped (AES-256-GCM) under a key derived
from the passphrase (Argon2id or scrypt, parameters in the header and
capped by the reader before it runs the KDF). The payload key and the
header MAC key are derived from the file key with HKDF-SHA256; the header
MAC commits the archive to one file key (GCM alone is not key-committing).

Memory is O(chunk size) whatever the payload size: every buffer is
allocated once and filled with `readinto`.
"""

from __future__ import annotations

import hmac
import io
import os
import stat
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from hashlib import sha256
from typing import IO, BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id as _Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt as _Scrypt

from hbtui.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveTruncated,
    KdfLimitExceeded,
    NotAnArchive,
    UnsupportedArchive,
    WrongPassphrase,
)
from hbtui.statefile import atomic_output

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_KDF",
    "HEADER_SIZE",
    "MAGIC",
    "MAX_CHUNK_EXP",
    "MIN_CHUNK_EXP",
    "TAG_SIZE",
    "VERSION",
    "Argon2idParams",
    "Decryptor",
    "Encryptor",
    "HeaderInfo",
    "KdfParams",
    "Randomness",
    "ScryptParams",
    "atomic_output",
    "create_archive",
    "decrypt_file",
    "decrypt_stream",
    "encrypt_file",
    "encrypt_stream",
    "is_hbx",
    "plaintext_size_for",
    "read_header",
    "verify_file",
    "verify_stream",
]

# --- constants (docs/archive-format.md, "Constants") -----------------------

MAGIC = b"HBX1"
VERSION = 1
AEAD_AES256GCM_STREAM = 1
KDF_SCRYPT = 1
KDF_ARGON2ID = 2

HEADER_SIZE = 144
TAG_SIZE = 16
KEY_SIZE = 32
KDF_SALT_SIZE = 16
PAYLOAD_SALT_SIZE = 16
WRAP_NONCE_SIZE = 12
MAC_SIZE = 32

MIN_CHUNK_EXP = 10  # 1 KiB
MAX_CHUNK_EXP = 24  # 16 MiB
DEFAULT_CHUNK_EXP = 20  # 1 MiB: the fastest size measured on our hosts
DEFAULT_CHUNK_SIZE = 1 << DEFAULT_CHUNK_EXP

# Labels: domain separation for every derived key (ASCII, no terminator).
KEK_SALT_LABEL = b"hbtui-archive v1 kek"
HEADER_MAC_INFO = b"hbtui-archive v1 header"
PAYLOAD_KEY_INFO = b"hbtui-archive v1 payload"

# Reader caps, checked before any KDF runs (docs: "KDF parameters and caps").
MAX_KDF_MEMORY = 1 << 30  # bytes
SCRYPT_MAX_LOG_N = 20
SCRYPT_MAX_R = 32
SCRYPT_MAX_P = 16
SCRYPT_MAX_WORK = 4 << 30  # 128 * r * N * p, bytes processed
ARGON2_MAX_ITERATIONS = 10
ARGON2_MAX_LANES = 16
ARGON2_MAX_MEMORY_KIB = MAX_KDF_MEMORY // 1024
ARGON2_MAX_WORK_KIB = 4 * ARGON2_MAX_MEMORY_KIB  # iterations * memory

# The weakest parameters a writer may use (docs: "Minimum strength", the OWASP
# minimums). A reader accepts weaker ones within the caps (the test vectors use
# tiny ones) but read_header() reports them in HeaderInfo.kdf_warning.
SCRYPT_MIN_LOG_N = 17  # N = 2^17
SCRYPT_MIN_R = 8  # with log2(N) = 17: 128 MiB
ARGON2_MIN_ITERATIONS = 2
ARGON2_MIN_MEMORY_KIB = 19 * 1024  # 19 MiB

# Offsets of the header fields.
_OFF_PARAMS = 8
_OFF_KDF_SALT = 20
_OFF_PAYLOAD_SALT = 36
_OFF_WRAP_NONCE = 52
_OFF_WRAPPED_KEY = 64
_OFF_MAC = 112

# Chunk counters run 0 .. 2^88 - 1 (11 bytes): at most 2^88 chunks in one archive.
_MAX_COUNTER = (1 << 88) - 1

Progress = Callable[[int], None]

# One key derivation at a time in this process: two Argon2id derivations in threads at
# once hang (or fail with MemoryError) with this cryptography/OpenSSL build, and two
# saves or loads run theirs in threads. Each takes a fraction of a second.
_KDF_LOCK = threading.Lock()


# --- KDF parameters --------------------------------------------------------


@dataclass(frozen=True)
class ScryptParams:
    """scrypt with N = 2**log_n; memory is 128 * r * N bytes."""

    log_n: int = 18
    r: int = 8
    p: int = 1

    kdf_id = KDF_SCRYPT
    name = "scrypt"

    def encode(self) -> bytes:
        return struct.pack(">III", self.log_n, self.r, self.p)

    def memory_bytes(self) -> int:
        return 128 * self.r * (1 << self.log_n)

    def check(self) -> None:
        if not 1 <= self.log_n <= SCRYPT_MAX_LOG_N:
            raise KdfLimitExceeded(f"scrypt log2(N) {self.log_n} is outside 1..{SCRYPT_MAX_LOG_N}")
        if not 1 <= self.r <= SCRYPT_MAX_R:
            raise KdfLimitExceeded(f"scrypt r {self.r} is outside 1..{SCRYPT_MAX_R}")
        if not 1 <= self.p <= SCRYPT_MAX_P:
            raise KdfLimitExceeded(f"scrypt p {self.p} is outside 1..{SCRYPT_MAX_P}")
        if self.memory_bytes() > MAX_KDF_MEMORY:
            raise KdfLimitExceeded(
                f"scrypt needs {self.memory_bytes() >> 20} MiB, more than the "
                f"{MAX_KDF_MEMORY >> 20} MiB limit"
            )
        if self.memory_bytes() * self.p > SCRYPT_MAX_WORK:
            raise KdfLimitExceeded("scrypt cost (128 * r * N * p) is above the reader's limit")

    def derive(self, passphrase: bytes, salt: bytes) -> bytes:
        kdf = _Scrypt(salt=salt, length=KEY_SIZE, n=1 << self.log_n, r=self.r, p=self.p)
        with _KDF_LOCK:
            return kdf.derive(passphrase)

    def weakness(self) -> str | None:
        """Why these parameters are below the minimum a writer must use, or None."""
        if self.log_n < SCRYPT_MIN_LOG_N or self.r < SCRYPT_MIN_R:
            return (
                f"scrypt logN={self.log_n} r={self.r} is below the minimum a writer must "
                f"use (logN >= {SCRYPT_MIN_LOG_N}, r >= {SCRYPT_MIN_R})"
            )
        return None

    def describe(self) -> str:
        return f"scrypt logN={self.log_n} r={self.r} p={self.p}"


@dataclass(frozen=True)
class Argon2idParams:
    """Argon2id (RFC 9106), version 0x13; memory in KiB."""

    iterations: int = 3
    memory_kib: int = 64 * 1024
    lanes: int = 4

    kdf_id = KDF_ARGON2ID
    name = "argon2id"

    def encode(self) -> bytes:
        return struct.pack(">III", self.iterations, self.memory_kib, self.lanes)

    def memory_bytes(self) -> int:
        return self.memory_kib * 1024

    def check(self) -> None:
        if not 1 <= self.iterations <= ARGON2_MAX_ITERATIONS:
            raise KdfLimitExceeded(
                f"argon2id iterations {self.iterations} is outside 1..{ARGON2_MAX_ITERATIONS}"
            )
        if not 1 <= self.lanes <= ARGON2_MAX_LANES:
            raise KdfLimitExceeded(f"argon2id lanes {self.lanes} is outside 1..{ARGON2_MAX_LANES}")
        if not 8 * self.lanes <= self.memory_kib <= ARGON2_MAX_MEMORY_KIB:
            raise KdfLimitExceeded(
                f"argon2id memory {self.memory_kib} KiB is outside "
                f"{8 * self.lanes}..{ARGON2_MAX_MEMORY_KIB} KiB"
            )
        if self.iterations * self.memory_kib > ARGON2_MAX_WORK_KIB:
            raise KdfLimitExceeded(
                "argon2id cost (iterations * memory) is above the reader's limit"
            )

    def derive(self, passphrase: bytes, salt: bytes) -> bytes:
        kdf = _Argon2id(
            salt=salt,
            length=KEY_SIZE,
            iterations=self.iterations,
            lanes=self.lanes,
            memory_cost=self.memory_kib,
        )
        with _KDF_LOCK:
            return kdf.derive(passphrase)

    def weakness(self) -> str | None:
        """Why these parameters are below the minimum a writer must use, or None."""
        if self.iterations < ARGON2_MIN_ITERATIONS or self.memory_kib < ARGON2_MIN_MEMORY_KIB:
            return (
                f"argon2id t={self.iterations} m={self.memory_kib}KiB is below the minimum a "
                f"writer must use (t >= {ARGON2_MIN_ITERATIONS}, m >= {ARGON2_MIN_MEMORY_KIB} KiB)"
            )
        return None

    def describe(self) -> str:
        return f"argon2id t={self.iterations} m={self.memory_kib}KiB p={self.lanes}"


KdfParams = ScryptParams | Argon2idParams

#: RFC 9106's second recommended setting: about 0.12 s and 64 MiB on a 2-vCPU Xeon.
DEFAULT_KDF: KdfParams = Argon2idParams()


def _decode_kdf(kdf_id: int, raw: bytes) -> KdfParams:
    a, b, c = struct.unpack(">III", raw)
    if kdf_id == KDF_SCRYPT:
        return ScryptParams(log_n=a, r=b, p=c)
    if kdf_id == KDF_ARGON2ID:
        return Argon2idParams(iterations=a, memory_kib=b, lanes=c)
    raise UnsupportedArchive(f"unknown key derivation id {kdf_id} in archive header")


# --- header ----------------------------------------------------------------


@dataclass(frozen=True)
class HeaderInfo:
    """What an archive's header says, readable without the passphrase."""

    version: int
    aead: str
    kdf: KdfParams
    chunk_size: int
    header_size: int
    archive_size: int | None  # None when the source size cannot be known
    plaintext_size: int | None  # None when unknown or the size is impossible
    # Set when the KDF parameters are within the caps (else the header is refused)
    # but below the minimum a writer must use: the archive opens, weakly protected.
    kdf_warning: str | None = None

    @property
    def kdf_name(self) -> str:
        return self.kdf.name


@dataclass(frozen=True)
class Randomness:
    """Every random value of one archive. Tests and test vectors pass a fixed
    one; real archives always draw a fresh one from os.urandom."""

    file_key: bytes
    kdf_salt: bytes
    payload_salt: bytes
    wrap_nonce: bytes

    @classmethod
    def fresh(cls) -> Randomness:
        return cls(
            file_key=os.urandom(KEY_SIZE),
            kdf_salt=os.urandom(KDF_SALT_SIZE),
            payload_salt=os.urandom(PAYLOAD_SALT_SIZE),
            wrap_nonce=os.urandom(WRAP_NONCE_SIZE),
        )

    def check(self) -> None:
        if (
            len(self.file_key) != KEY_SIZE
            or len(self.kdf_salt) != KDF_SALT_SIZE
            or len(self.payload_salt) != PAYLOAD_SALT_SIZE
            or len(self.wrap_nonce) != WRAP_NONCE_SIZE
        ):
            raise ValueError("Randomness fields have the wrong sizes")


@dataclass(frozen=True)
class _Parsed:
    raw: bytes
    kdf: KdfParams
    chunk_exp: int

    @property
    def chunk_size(self) -> int:
        return 1 << self.chunk_exp


def _hkdf(key: bytes, salt: bytes | None, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_SIZE, salt=salt, info=info).derive(key)


def _mac_key(file_key: bytes) -> bytes:
    return _hkdf(file_key, None, HEADER_MAC_INFO)


def _payload_key(file_key: bytes, payload_salt: bytes) -> bytes:
    return _hkdf(file_key, payload_salt, PAYLOAD_KEY_INFO)


def _check_chunk_size(chunk_size: int) -> int:
    if chunk_size <= 0 or chunk_size & (chunk_size - 1):
        raise ValueError(f"chunk size {chunk_size} is not a power of two")
    exp = chunk_size.bit_length() - 1
    if not MIN_CHUNK_EXP <= exp <= MAX_CHUNK_EXP:
        raise ValueError(
            f"chunk size {chunk_size} is outside {1 << MIN_CHUNK_EXP}..{1 << MAX_CHUNK_EXP} bytes"
        )
    return exp


def _check_passphrase(passphrase: bytes) -> None:
    if not isinstance(passphrase, (bytes, bytearray)):
        raise TypeError("passphrase must be bytes")
    if not passphrase:
        raise ArchiveError("the passphrase is empty")


def _build_header(
    passphrase: bytes, kdf: KdfParams, chunk_exp: int, rnd: Randomness
) -> tuple[bytes, bytes]:
    """Return (header bytes, payload key)."""
    prefix = (
        MAGIC
        + bytes((VERSION, AEAD_AES256GCM_STREAM, kdf.kdf_id, chunk_exp))
        + kdf.encode()
        + rnd.kdf_salt
        + rnd.payload_salt
        + rnd.wrap_nonce
    )
    assert len(prefix) == _OFF_WRAPPED_KEY
    kek = kdf.derive(bytes(passphrase), KEK_SALT_LABEL + rnd.kdf_salt)
    wrapped = AESGCM(kek).encrypt(rnd.wrap_nonce, rnd.file_key, prefix)
    body = prefix + wrapped
    mac = hmac.new(_mac_key(rnd.file_key), body, sha256).digest()
    header = body + mac
    assert len(header) == HEADER_SIZE
    return header, _payload_key(rnd.file_key, rnd.payload_salt)


def _parse_header(raw: bytes) -> _Parsed:
    """Check everything that can be checked without the passphrase."""
    n = len(raw)
    if n == 0:
        raise ArchiveTruncated("the archive is empty")
    if raw[: min(n, 4)] != MAGIC[: min(n, 4)]:
        raise NotAnArchive("not an hbtui archive (bad magic)")
    if n < HEADER_SIZE:
        raise ArchiveTruncated(
            f"the archive is cut short inside its header ({n} of {HEADER_SIZE} bytes)"
        )
    version, aead, kdf_id, chunk_exp = raw[4], raw[5], raw[6], raw[7]
    if version != VERSION:
        raise UnsupportedArchive(
            f"archive format version {version} is not supported (this hbtui reads version {VERSION})"
        )
    if aead != AEAD_AES256GCM_STREAM:
        raise UnsupportedArchive(f"unknown cipher id {aead} in archive header")
    kdf = _decode_kdf(kdf_id, raw[_OFF_PARAMS:_OFF_KDF_SALT])
    if not MIN_CHUNK_EXP <= chunk_exp <= MAX_CHUNK_EXP:
        raise ArchiveCorrupt(
            f"chunk size exponent {chunk_exp} in archive header is outside "
            f"{MIN_CHUNK_EXP}..{MAX_CHUNK_EXP}"
        )
    kdf.check()
    return _Parsed(raw=bytes(raw), kdf=kdf, chunk_exp=chunk_exp)


def _open_header(parsed: _Parsed, passphrase: bytes) -> bytes:
    """Run the KDF, unwrap the file key, check the header MAC; return the payload key."""
    raw = parsed.raw
    kdf_salt = raw[_OFF_KDF_SALT:_OFF_PAYLOAD_SALT]
    wrap_nonce = raw[_OFF_WRAP_NONCE:_OFF_WRAPPED_KEY]
    kek = parsed.kdf.derive(bytes(passphrase), KEK_SALT_LABEL + kdf_salt)
    try:
        file_key = AESGCM(kek).decrypt(
            wrap_nonce, raw[_OFF_WRAPPED_KEY:_OFF_MAC], raw[:_OFF_WRAPPED_KEY]
        )
    except InvalidTag:
        raise WrongPassphrase("wrong passphrase (or the archive's key block is damaged)") from None
    mac = hmac.new(_mac_key(file_key), raw[:_OFF_MAC], sha256).digest()
    if not hmac.compare_digest(mac, raw[_OFF_MAC:HEADER_SIZE]):
        raise ArchiveCorrupt("archive header failed authentication (the header was altered)")
    return _payload_key(file_key, raw[_OFF_PAYLOAD_SALT:_OFF_WRAP_NONCE])


def _nonce(counter: int, final: bool) -> bytes:
    if counter > _MAX_COUNTER:
        raise ArchiveError("too many chunks for one archive")
    return counter.to_bytes(11, "big") + (b"\x01" if final else b"\x00")


def plaintext_size_for(archive_size: int, chunk_size: int) -> int | None:
    """Plaintext size implied by an archive's total size, or None if no valid
    archive with this chunk size has that size."""
    body = archive_size - HEADER_SIZE
    if body < TAG_SIZE:
        return None
    if body == TAG_SIZE:
        return 0
    full = chunk_size + TAG_SIZE
    n_full, rest = divmod(body, full)
    if rest == 0:
        return n_full * chunk_size
    if rest <= TAG_SIZE:
        return None
    return n_full * chunk_size + rest - TAG_SIZE


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
    KDF parameters below the writer's minimum (`KdfParams.weakness()`) are
    refused with ValueError unless `allow_weak_kdf` (tests, test vectors).
    """

    def __init__(
        self,
        dst: BinaryIO,
        passphrase: bytes,
        *,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        kdf: KdfParams = DEFAULT_KDF,
        progress: Progress | None = None,
        allow_weak_kdf: bool = False,
        _randomness: Randomness | None = None,
    ) -> None:
        _check_passphrase(passphrase)
        exp = _check_chunk_size(chunk_size)
        kdf.check()
        weak = kdf.weakness()
        if weak is not None and not allow_weak_kdf:
            raise ValueError(f"{weak}; pass allow_weak_kdf=True only for tests")
        rnd = _randomness if _randomness is not None else Randomness.fresh()
        rnd.check()
        header, payload_key = _build_header(passphrase, kdf, exp, rnd)
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
    passphrase: bytes,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    kdf: KdfParams = DEFAULT_KDF,
    progress: Progress | None = None,
    allow_weak_kdf: bool = False,
    _randomness: Randomness | None = None,
) -> int:
    """Encrypt all of `src` into `dst`; return the plaintext byte count."""
    enc = Encryptor(
        dst,
        passphrase,
        chunk_size=chunk_size,
        kdf=kdf,
        progress=progress,
        allow_weak_kdf=allow_weak_kdf,
        _randomness=_randomness,
    )
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
        _check_passphrase(passphrase)
        raw = bytearray(HEADER_SIZE)
        n = _readfull(src, memoryview(raw))
        parsed = _parse_header(bytes(raw[:n]))
        self._aead = AESGCM(_open_header(parsed, passphrase))
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


def _source_size(src: BinaryIO) -> int | None:
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
    total = _source_size(src)
    raw = bytearray(HEADER_SIZE)
    n = _readfull(src, memoryview(raw))
    parsed = _parse_header(bytes(raw[:n]))
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


# --- files: private, atomic -------------------------------------------------


@contextmanager
def create_archive(
    path: str | os.PathLike[str],
    passphrase: bytes,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    kdf: KdfParams = DEFAULT_KDF,
    progress: Progress | None = None,
    allow_weak_kdf: bool = False,
) -> Iterator[Encryptor]:
    """Yield an Encryptor writing to a private temporary file; on normal exit
    finish it and move it to `path`, which it never replaces: if a file took
    that name meanwhile, FileExistsError. On error nothing is left behind."""
    with atomic_output(path, replace=False) as f:
        enc = Encryptor(
            f,
            passphrase,
            chunk_size=chunk_size,
            kdf=kdf,
            progress=progress,
            allow_weak_kdf=allow_weak_kdf,
        )
        yield enc
        if not enc.finished:
            enc.finish()


def encrypt_file(
    src_path: str | os.PathLike[str],
    dst_path: str | os.PathLike[str],
    passphrase: bytes,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    kdf: KdfParams = DEFAULT_KDF,
    progress: Progress | None = None,
    allow_weak_kdf: bool = False,
) -> int:
    """Encrypt a file into a new archive at `dst_path` (0600, atomic)."""
    with (
        open(src_path, "rb", buffering=0) as src,
        create_archive(
            dst_path,
            passphrase,
            chunk_size=chunk_size,
            kdf=kdf,
            progress=progress,
            allow_weak_kdf=allow_weak_kdf,
        ) as enc,
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
        size = _source_size(src)
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
