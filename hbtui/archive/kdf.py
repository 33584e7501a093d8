"""Key derivation for HBX1 archives: the passphrase to the key that wraps the file key.

Two KDFs, each with its parameters as three u32 in the header, the caps a reader checks
before running one (a hostile header must not make it spend a gigabyte or an hour), and
the minimums a writer must use. docs/archive-format.md, "KDF parameters and caps".
"""

from __future__ import annotations

import struct
import threading
from dataclasses import dataclass

from cryptography.hazmat.primitives.kdf.argon2 import Argon2id as _Argon2id
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt as _Scrypt

from hbtui.archive.errors import KdfLimitExceeded, UnsupportedArchive

KDF_SCRYPT = 1
KDF_ARGON2ID = 2
KEY_SIZE = 32  # every key derived or wrapped: AES-256

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

# One key derivation at a time in this process: two Argon2id derivations in threads at
# once hang (or fail with MemoryError) with this cryptography/OpenSSL build, and two
# saves or loads run theirs in threads. Each takes a fraction of a second.
_KDF_LOCK = threading.Lock()


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


def decode_kdf(kdf_id: int, raw: bytes) -> KdfParams:
    a, b, c = struct.unpack(">III", raw)
    if kdf_id == KDF_SCRYPT:
        return ScryptParams(log_n=a, r=b, p=c)
    if kdf_id == KDF_ARGON2ID:
        return Argon2idParams(iterations=a, memory_kib=b, lanes=c)
    raise UnsupportedArchive(f"unknown key derivation id {kdf_id} in archive header")
