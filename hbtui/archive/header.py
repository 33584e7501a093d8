"""The HBX1 header: 144 bytes that name the format, the cipher, the KDF and the chunk size,
and carry the file key wrapped under the passphrase. Built and checked here, as bytes;
reading archives is hbtui.archive.stream.

    header   magic "HBX1" | version | aead id | kdf id | chunk exponent
             | KDF params (3 x u32 BE) | KDF salt (16) | payload salt (16)
             | wrap nonce (12) | wrapped file key (32 + 16 tag) | HMAC-SHA256 (32)

A random 32-byte file key is wrapped (AES-256-GCM) under a key derived from the
passphrase (hbtui.archive.kdf), the header's first 64 bytes as associated data. The
payload key and the header MAC key are derived from the file key with HKDF-SHA256; the
header MAC commits the archive to one file key (GCM alone is not key-committing). The
full specification, with every byte offset and rejection rule: docs/archive-format.md.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass, field
from hashlib import sha256

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from hbtui.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveTruncated,
    NotAnArchive,
    UnsupportedArchive,
    WrongPassphrase,
)
from hbtui.archive.kdf import KEY_SIZE, KdfParams, decode_kdf

# --- constants (docs/archive-format.md, "Constants") -----------------------

MAGIC = b"HBX1"
VERSION = 1
AEAD_AES256GCM_STREAM = 1

HEADER_SIZE = 144
TAG_SIZE = 16
KDF_SALT_SIZE = 16
PAYLOAD_SALT_SIZE = 16
WRAP_NONCE_SIZE = 12

MIN_CHUNK_EXP = 10  # 1 KiB
MAX_CHUNK_EXP = 24  # 16 MiB
DEFAULT_CHUNK_EXP = 20  # 1 MiB: the fastest size measured on our hosts
DEFAULT_CHUNK_SIZE = 1 << DEFAULT_CHUNK_EXP

# Labels: domain separation for every derived key (ASCII, no terminator).
KEK_SALT_LABEL = b"hbtui-archive v1 kek"
HEADER_MAC_INFO = b"hbtui-archive v1 header"
PAYLOAD_KEY_INFO = b"hbtui-archive v1 payload"

# Offsets of the header fields.
OFF_PARAMS = 8
OFF_KDF_SALT = 20
OFF_PAYLOAD_SALT = 36
OFF_WRAP_NONCE = 52
OFF_WRAPPED_KEY = 64
OFF_MAC = 112


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
class Kek:
    """The key the passphrase gave through the KDF, with the parameters and salt it was
    derived with: a file rewritten by the process that opened it wraps its new file key
    under it, the KDF not run again (a fresh file key, payload salt and wrap nonce)."""

    kdf: KdfParams
    salt: bytes
    key: bytes = field(repr=False)


@dataclass(frozen=True)
class Parsed:
    raw: bytes
    kdf: KdfParams
    chunk_exp: int

    @property
    def chunk_size(self) -> int:
        return 1 << self.chunk_exp


def _hkdf(key: bytes, salt: bytes | None, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_SIZE, salt=salt, info=info).derive(key)


def mac_key(file_key: bytes) -> bytes:
    return _hkdf(file_key, None, HEADER_MAC_INFO)


def payload_key(file_key: bytes, payload_salt: bytes) -> bytes:
    return _hkdf(file_key, payload_salt, PAYLOAD_KEY_INFO)


def check_chunk_size(chunk_size: int) -> int:
    if chunk_size <= 0 or chunk_size & (chunk_size - 1):
        raise ValueError(f"chunk size {chunk_size} is not a power of two")
    exp = chunk_size.bit_length() - 1
    if not MIN_CHUNK_EXP <= exp <= MAX_CHUNK_EXP:
        raise ValueError(
            f"chunk size {chunk_size} is outside {1 << MIN_CHUNK_EXP}..{1 << MAX_CHUNK_EXP} bytes"
        )
    return exp


def check_passphrase(passphrase: bytes) -> None:
    if not isinstance(passphrase, (bytes, bytearray)):
        raise TypeError("passphrase must be bytes")
    if not passphrase:
        raise ArchiveError("the passphrase is empty")


def derive_kek(passphrase: bytes, kdf: KdfParams, salt: bytes) -> Kek:
    return Kek(kdf, salt, kdf.derive(bytes(passphrase), KEK_SALT_LABEL + salt))


def build_header(
    passphrase: bytes, kdf: KdfParams, chunk_exp: int, rnd: Randomness
) -> tuple[bytes, bytes]:
    """Return (header bytes, payload key)."""
    return seal_header(derive_kek(passphrase, kdf, rnd.kdf_salt), chunk_exp, rnd)


def seal_header(kek: Kek, chunk_exp: int, rnd: Randomness) -> tuple[bytes, bytes]:
    """The header of `rnd.file_key` wrapped under `kek`, whose salt `rnd.kdf_salt` is;
    return (header bytes, payload key)."""
    kdf = kek.kdf
    if rnd.kdf_salt != kek.salt:
        raise ValueError("the KDF salt is not the one the key was derived with")
    prefix = (
        MAGIC
        + bytes((VERSION, AEAD_AES256GCM_STREAM, kdf.kdf_id, chunk_exp))
        + kdf.encode()
        + rnd.kdf_salt
        + rnd.payload_salt
        + rnd.wrap_nonce
    )
    assert len(prefix) == OFF_WRAPPED_KEY
    wrapped = AESGCM(kek.key).encrypt(rnd.wrap_nonce, rnd.file_key, prefix)
    body = prefix + wrapped
    mac = hmac.new(mac_key(rnd.file_key), body, sha256).digest()
    header = body + mac
    assert len(header) == HEADER_SIZE
    return header, payload_key(rnd.file_key, rnd.payload_salt)


def parse_header(raw: bytes) -> Parsed:
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
    kdf = decode_kdf(kdf_id, raw[OFF_PARAMS:OFF_KDF_SALT])
    if not MIN_CHUNK_EXP <= chunk_exp <= MAX_CHUNK_EXP:
        raise ArchiveCorrupt(
            f"chunk size exponent {chunk_exp} in archive header is outside "
            f"{MIN_CHUNK_EXP}..{MAX_CHUNK_EXP}"
        )
    kdf.check()
    return Parsed(raw=bytes(raw), kdf=kdf, chunk_exp=chunk_exp)


def open_header(parsed: Parsed, passphrase: bytes) -> tuple[bytes, Kek]:
    """Run the KDF, unwrap the file key, check the header MAC; return the payload key and
    the key the KDF gave."""
    raw = parsed.raw
    wrap_nonce = raw[OFF_WRAP_NONCE:OFF_WRAPPED_KEY]
    kek = derive_kek(passphrase, parsed.kdf, raw[OFF_KDF_SALT:OFF_PAYLOAD_SALT])
    try:
        file_key = AESGCM(kek.key).decrypt(
            wrap_nonce, raw[OFF_WRAPPED_KEY:OFF_MAC], raw[:OFF_WRAPPED_KEY]
        )
    except InvalidTag:
        raise WrongPassphrase("wrong passphrase (or the archive's key block is damaged)") from None
    mac = hmac.new(mac_key(file_key), raw[:OFF_MAC], sha256).digest()
    if not hmac.compare_digest(mac, raw[OFF_MAC:HEADER_SIZE]):
        raise ArchiveCorrupt("archive header failed authentication (the header was altered)")
    return payload_key(file_key, raw[OFF_PAYLOAD_SALT:OFF_WRAP_NONCE]), kek


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
