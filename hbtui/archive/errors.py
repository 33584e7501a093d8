"""Typed failures of the archive layer, each explained in one line."""

from __future__ import annotations

from hbtui.errors import HbtuiError, PassphraseRefused


class ArchiveError(HbtuiError):
    """Something is wrong with an archive, its passphrase or its contents."""


class NotAnArchive(ArchiveError):
    """The file does not start with the hbtui archive magic."""


class UnsupportedArchive(ArchiveError):
    """A version, cipher or KDF this hbtui does not know."""


class KdfLimitExceeded(ArchiveError):
    """The header asks for a key derivation costlier than the reader allows."""


class WrongPassphrase(ArchiveError, PassphraseRefused):
    """The passphrase does not open the archive (or its key block is damaged)."""


class ArchiveCorrupt(ArchiveError):
    """Authentication failed or the layout is invalid: the archive was altered."""


class ArchiveTruncated(ArchiveCorrupt):
    """The archive ends before its final chunk."""


class UnsafeArchive(ArchiveError):
    """The tar stream holds an entry that would escape or harm the destination."""


class ToolMissing(ArchiveError):
    """A host program the archive layer needs (zstd, gpg) is not installed."""
