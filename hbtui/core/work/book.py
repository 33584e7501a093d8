"""The host's record of each box made with a repository (`WorkBook`): the repository's
path, the seed commit and the clone's folder in the box. The seed is the host's word, never
the box's: it defines "what the agent did" and is what every pulled branch must contain.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from hbtui.core.boxes.core import BoxCore, BoxNotFound
from hbtui.core.foundation.registry import FAILED, WORK_MISSING
from hbtui.engine import MachineNotFound, MachineNotRunning
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL, host_flag
from hbtui.paths import Paths, UnreadableFile, make_folder, read_state
from hbtui.statefile import write_atomic

SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class WorkError(HbtuiError):
    """A box has no work hbtui knows of, or its clone cannot be read."""


@dataclass(frozen=True)
class WorkRecord:
    """Where a box's work came from, as the host recorded it at `new --repo`."""

    repo: str
    seed: str
    ref: str  # what the seed was resolved from (refs/heads/main, HEAD, a commit)
    clone: str  # the clone's folder in the box
    branch: str  # hb/BOX

    @classmethod
    def from_json(cls, data: object) -> WorkRecord | None:
        if not isinstance(data, dict):
            return None
        fields = {k: data.get(k) for k in ("repo", "seed", "ref", "clone", "branch")}
        if not all(isinstance(v, str) for v in fields.values()):
            return None
        if not SHA.fullmatch(str(fields["seed"])):
            return None
        return cls(**{k: str(v) for k, v in fields.items()})


class WorkBook:
    """One JSON record per box made with a repository: `<data>/work/<host>/<box>.json`."""

    def __init__(self, paths: Paths) -> None:
        self.root = paths.data_dir / "work"

    def _path(self, host: str, name: str) -> Path:
        return self.root / host / f"{name}.json"

    def get(self, host: str, name: str) -> WorkRecord | None:
        raw = read_state(self._path(host, name), 64 * 1024)
        if raw is None:
            return None
        try:
            record = WorkRecord.from_json(json.loads(raw))
        except (UnicodeDecodeError, ValueError):
            record = None
        if record is None:  # not "made without a repository": it was, and this is damaged
            raise UnreadableFile(
                self._path(host, name),
                "not a work record (damaged?): restore it from a copy, or remove it and the "
                "box's diff and pull with it (its clone in the box is untouched)",
            )
        return record

    def put(self, host: str, name: str, record: WorkRecord) -> None:
        make_folder(self.root / host)
        write_atomic(self._path(host, name), json.dumps(asdict(record), indent=2).encode())

    def drop(self, host: str, name: str) -> None:
        self._path(host, name).unlink(missing_ok=True)


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
