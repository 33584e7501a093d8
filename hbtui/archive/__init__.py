"""Encrypted box archives: the HBX1 format, safe tar extraction, legacy gpg backups.

Pure library: no VM code, no Textual. See docs/archive-format.md.
"""

from hbtui.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveTruncated,
    KdfLimitExceeded,
    NotAnArchive,
    ToolMissing,
    UnsafeArchive,
    UnsupportedArchive,
    WrongPassphrase,
)
from hbtui.archive.files import create_archive, decrypt_file, encrypt_file, verify_file
from hbtui.archive.header import DEFAULT_CHUNK_SIZE, HeaderInfo, Kek
from hbtui.archive.kdf import DEFAULT_KDF, Argon2idParams, ScryptParams
from hbtui.archive.stream import (
    Decryptor,
    Encryptor,
    Sealing,
    decrypt_stream,
    encrypt_stream,
    is_hbx,
    read_header,
    verify_stream,
)

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "DEFAULT_KDF",
    "ArchiveCorrupt",
    "ArchiveError",
    "ArchiveTruncated",
    "Argon2idParams",
    "Decryptor",
    "Encryptor",
    "HeaderInfo",
    "KdfLimitExceeded",
    "Kek",
    "NotAnArchive",
    "ScryptParams",
    "Sealing",
    "ToolMissing",
    "UnsafeArchive",
    "UnsupportedArchive",
    "WrongPassphrase",
    "create_archive",
    "decrypt_file",
    "decrypt_stream",
    "encrypt_file",
    "encrypt_stream",
    "is_hbx",
    "read_header",
    "verify_file",
    "verify_stream",
]
