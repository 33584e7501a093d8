"""The host's record of each box made with a repository (`WorkBook`): for each repository
in the box, its path, the seed commit and the clone's folder in the box; and the agent's
task. The seed is the host's word, never the box's: it defines "what the agent did" and is
what every pulled branch must contain.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from hbtui.core.boxes.core import BoxCore, BoxNotFound
from hbtui.core.foundation.registry import FAILED, WORK_MISSING
from hbtui.engine import MachineNotFound, MachineNotRunning
from hbtui.errors import HbtuiError, UsageError
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

    @property
    def name(self) -> str:
        """What `--repo NAME` picks it by: its clone's folder name (unique in its box)."""
        return PurePosixPath(self.clone).name


@dataclass(frozen=True)
class BoxWork:
    """A box's work: each repository cloned in it (the first is where its agent works)
    and the task it was given."""

    repos: tuple[WorkRecord, ...]
    task: str = ""

    @property
    def first(self) -> WorkRecord:
        return self.repos[0]

    def to_json(self) -> dict[str, object]:
        return {"repos": [asdict(r) for r in self.repos], "task": self.task}

    @classmethod
    def from_json(cls, data: object) -> BoxWork | None:
        """A record as written now ({"repos": [...], "task": ...}), or as one repository's
        fields alone, as it was before a box could hold several."""
        if not isinstance(data, dict):
            return None
        if "repos" not in data:
            one = WorkRecord.from_json(data)
            return None if one is None else cls((one,))
        repos, task = data.get("repos"), data.get("task", "")
        if not isinstance(repos, list) or not repos or not isinstance(task, str):
            return None
        records = [WorkRecord.from_json(r) for r in repos]
        if any(r is None for r in records):
            return None
        return cls(tuple(r for r in records if r is not None), task)


class WorkBook:
    """One JSON record per box made with a repository: `<data>/work/<host>/<box>.json`."""

    MAX = 1 << 20  # a task may be 64 KiB, and JSON writes a control character as six

    def __init__(self, paths: Paths) -> None:
        self.root = paths.data_dir / "work"

    def _path(self, host: str, name: str) -> Path:
        return self.root / host / f"{name}.json"

    def get(self, host: str, name: str) -> BoxWork | None:
        raw = read_state(self._path(host, name), self.MAX)
        if raw is None:
            return None
        try:
            record = BoxWork.from_json(json.loads(raw))
        except (UnicodeDecodeError, ValueError):
            record = None
        if record is None:  # not "made without a repository": it was, and this is damaged
            raise UnreadableFile(
                self._path(host, name),
                "not a work record (damaged?): restore it from a copy, or remove it and the "
                "box's diff and pull with it (its clone in the box is untouched)",
            )
        return record

    def put(self, host: str, name: str, work: BoxWork) -> None:
        make_folder(self.root / host)
        write_atomic(self._path(host, name), json.dumps(work.to_json(), indent=2).encode())

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
