"""The host's note in a box archive: one zstd skippable frame that opens the payload,
before the box's compressed tar. `zstd -d` passes over it (in the box when it loads, on
the host when it extracts), so an archive with a note reads as one without; an archive
without one (made before notes, or by `pack_dir`) loads as it always did.

The save writes it before the box's first byte, and a box's own stream must open with a
zstd frame (`hbxtar.payload_start_problem`), so a note at the start is the host's. Its
text is still an archive's, untrusted: whoever reads it checks every word.
"""

from __future__ import annotations

import struct

from hbtui.archive.errors import ArchiveCorrupt, ArchiveError

NOTE_MAGIC = 0x184D2A5E  # one of zstd's sixteen skippable-frame magics
TAG = b"hbtui-note\n"  # another tool's skippable frame with this magic is not a note
NOTE_MAX = 1 << 20  # bytes of the note's text: a box's work record, its task (64 KiB) too
HEAD_BYTES = 8 + len(TAG) + NOTE_MAX  # of a payload's start that holds any note whole


class NoteTooLong(ArchiveError):
    """What the host would write ahead of a box's /data is more than a note holds."""


def frame(text: bytes) -> bytes:
    """The skippable frame that carries `text` (at most NOTE_MAX bytes)."""
    if len(text) > NOTE_MAX:
        raise NoteTooLong(
            f"the archive's note would be {len(text):,} bytes; a note holds at most {NOTE_MAX:,}"
        )
    body = TAG + text
    return struct.pack("<II", NOTE_MAGIC, len(body)) + body


def skippable(opening: bytes) -> bool:
    """Whether a stream opens with a zstd skippable frame (any of the sixteen magics)."""
    return len(opening) >= 4 and opening[1:4] == b"\x2a\x4d\x18" and opening[0] & 0xF0 == 0x50


def read(head: bytes | bytearray) -> bytes | None:
    """The note's text at the start of a payload (`head`: its first HEAD_BYTES or all of
    it), or None when the payload opens with anything else."""
    if len(head) < 8:
        return None
    magic, size = struct.unpack_from("<II", head)
    if magic != NOTE_MAGIC:
        return None
    if size > len(TAG) + NOTE_MAX:
        raise ArchiveCorrupt(
            f"the archive's note is {size:,} bytes; a note is at most {NOTE_MAX:,}"
        )
    body = bytes(head[8 : 8 + size])
    if len(body) < size:
        raise ArchiveCorrupt("the archive's payload ends inside its note")
    if not body.startswith(TAG):
        return None
    return body[len(TAG) :]
