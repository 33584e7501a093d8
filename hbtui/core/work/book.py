"""A box's work record as the work verbs need it: one that is not there, or a box that
cannot be reached, is one line. The record itself (`BoxWork`, `WorkRecord`, `WorkBook`) is the
foundation's (hbtui.core.foundation.workbook), re-exported here."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from hbtui.core.boxes.core import BoxCore, BoxNotFound
from hbtui.core.foundation.registry import FAILED, WORK_MISSING
from hbtui.core.foundation.workbook import SHA, BoxWork, WorkBook, WorkRecord
from hbtui.engine import MachineNotFound, MachineNotRunning
from hbtui.errors import HbtuiError, UsageError
from hbtui.names import LOCAL, host_flag

__all__ = [
    "SHA",
    "BoxWork",
    "WorkBook",
    "WorkError",
    "WorkRecord",
    "box_work",
    "count_said",
    "pick",
    "reaching",
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


def box_work(boxes: BoxCore, book: WorkBook, name: str, host: str) -> BoxWork:
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


def _same_folder(a: Path, b: Path) -> bool:
    with contextlib.suppress(OSError):
        return a.samefile(b)
    return False


def pick(work: BoxWork, name: str, which: str | None) -> tuple[WorkRecord, Path | None]:
    """The repository `--repo NAME|PATH` picks among the box's, and the host repository
    to use when PATH is not the one recorded (one moved since `new`: a one-repository
    box takes any PATH, as `pull --repo` always did; a box with several, one of the same
    folder name). Missing, or matching none, with several: one line naming them."""
    repos = work.repos
    names = ", ".join(r.name for r in repos)
    if which is None:
        if len(repos) == 1:
            return repos[0], None
        raise UsageError(
            f"box {name} has {len(repos)} repositories ({names}): pick one with --repo NAME"
        )
    path = Path(which).expanduser().absolute()
    if path.is_dir():
        for r in repos:
            if _same_folder(path, Path(r.repo)):
                return r, None
        moved = [r for r in repos if len(repos) == 1 or r.name == path.name]
        if len(moved) == 1:
            return moved[0], path
    else:
        for r in repos:
            if which == r.name:
                return r, None
        if len(repos) == 1:
            return repos[0], path  # "not there", said where the path is used
    raise UsageError(f"box {name} has no repository {which!r}: it has {names} (--repo NAME)")
