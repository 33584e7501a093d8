"""A box's work record as the work verbs need it: one that is not there, or a box that
cannot be reached, is one line. The record itself (`WorkRecord`, `WorkBook`) is the
foundation's (hbtui.core.foundation.workbook), re-exported here."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hbtui.core.boxes.core import BoxCore, BoxNotFound
from hbtui.core.foundation.registry import FAILED, WORK_MISSING
from hbtui.core.foundation.workbook import SHA, WorkBook, WorkRecord
from hbtui.engine import MachineNotFound, MachineNotRunning
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL, host_flag

__all__ = [
    "SHA",
    "WorkBook",
    "WorkError",
    "WorkRecord",
    "count_said",
    "reaching",
    "work_record",
]


class WorkError(HbtuiError):
    """A box has no work hbtui knows of, or its clone cannot be read."""


@contextlib.contextmanager
def reaching(name: str) -> Iterator[None]:
    """A box that is not running, or gone, is one line saying what to do (asking the
    engine first would cost every diff and pull a status call)."""
    try:
        yield
    except MachineNotRunning:
        raise WorkError(f"box {name} is not running: start it first (hbtui start {name})") from None
    except MachineNotFound:
        raise WorkError(f"box {name} is not there (see: hbtui ls)") from None


def work_record(boxes: BoxCore, book: WorkBook, name: str, host: str) -> WorkRecord:
    """The box's work record; a box that does not exist, or has none, is one line."""
    record = book.get(host, name)
    row = boxes.registry.read().get(name, host) if record is None else None
    if record is None and row is None:
        where = "" if host == LOCAL else f" on {host}"
        raise BoxNotFound(f"no box named {name!r}{where} (see: hbtui ls)")
    if row is not None and row.effective_status() == FAILED and row.error == WORK_MISSING:
        # Killed before its clone went in (a `new --repo` or a try): not a box without one.
        raise WorkError(
            f"box {name} failed: {WORK_MISSING}; remove it (hbtui rm {name}{host_flag(host)}) "
            "and make it again"
        )
    if record is None:
        raise WorkError(f"box {name} was not made with a repository (hbtui new {name} --repo PATH)")
    return record


def count_said(text: str | None) -> int:
    return int(text) if text is not None and text.strip().isdigit() else 0
