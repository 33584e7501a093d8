"""What travels in an archive beside a box's /data: the host's word about the box (the
work record of a box made with a repository), as one JSON object in the archive's note
(hbtui.archive.note). A save asks the carrier what to write; a load hands what it read to
the carrier before it makes anything (a refusal makes nothing) and lands it once the box
is ready. The feature that owns the record is the carrier: archives only move it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from hbtui.errors import HbtuiError
from hbtui.events import Report

# The new box's host and name: keeps what arrived, saying in a line what it could not.
Landing = Callable[[str, str, Report], None]


class NoteRefused(HbtuiError):
    """An archive's note that is not what a save writes: nothing is made."""


class Carrier(Protocol):
    """The feature whose records travel with a box's archive."""

    def note(self, host: str, name: str, report: Report) -> dict[str, object]:
        """What a save of the box carries (JSON values)."""
        ...

    async def arriving(self, note: dict[str, object], repo: Path | None, report: Report) -> Landing:
        """What a load read, checked before the box is made; `repo` is `load --repo`."""
        ...


def encode(note: dict[str, object]) -> bytes:
    """The note as the archive carries it, UTF-8 (escaped as ASCII, a task of another
    script took six bytes a character); refused before the box is touched when it is
    more than a note holds."""
    from hbtui.archive import note as notes

    text = json.dumps(note, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    notes.frame(text)
    return text


def decode(text: bytes | None) -> dict[str, object]:
    """An archive's note as an object ({} for an archive without one)."""
    if text is None:
        return {}
    try:
        data = json.loads(text.decode())
    except (UnicodeDecodeError, ValueError):
        raise NoteRefused("the archive's note is not JSON: refused (nothing was made)") from None
    if not isinstance(data, dict):
        raise NoteRefused("the archive's note is not a JSON object: refused (nothing was made)")
    return data
