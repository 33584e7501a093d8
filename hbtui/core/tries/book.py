"""The record of each try (`<data>/tries/<host>/NAME.json`): its boxes, its check, each
box's last check result, and how each box's agent started. Apart from hbtui.core.tries.operations,
which makes and lists tries, so that what only reads or shows a record does not import
the box operations."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from hbtui.environment import pid_alive
from hbtui.errors import UsageError
from hbtui.paths import Paths, make_folder, read_state
from hbtui.statefile import locked, open_lock, write_atomic


@dataclass
class CheckResult:
    work: str  # the work it ran on: head and the files' stat
    status: int | None  # the command's exit status; None: it could not run
    output: str  # the end of its output, made safe

    @property
    def passed(self) -> bool:
        return self.status == 0


@dataclass
class TryRecord:
    name: str
    repo: str
    seed: str
    check: str
    boxes: list[str]
    checks: dict[str, CheckResult] = field(default_factory=dict)
    owner: int = 0  # the process making its boxes; 0: made
    ended: dict[str, str] = field(default_factory=dict)  # boxes whose agent ended at start: how

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> TryRecord | None:
        if not isinstance(data, dict):
            return None
        try:
            checks = {
                str(k): CheckResult(str(v["work"]), v["status"], str(v["output"]))
                for k, v in dict(data.get("checks") or {}).items()
            }
            return cls(
                str(data["name"]),
                str(data["repo"]),
                str(data["seed"]),
                str(data["check"]),
                [str(b) for b in data["boxes"]],
                checks,
                int(data.get("owner") or 0),
                {str(k): str(v) for k, v in dict(data.get("ended") or {}).items()},
            )
        except (KeyError, TypeError, ValueError):
            return None


class TryBook:
    """The tries of each host. Every change reads, changes and writes a record under
    its lock, so a `try ls` checking boxes never writes back a record that its `try`
    settled or dropped meanwhile."""

    def __init__(self, paths: Paths) -> None:
        self.root = paths.data_dir / "tries"

    def _path(self, host: str, name: str) -> Path:
        return self.root / host / f"{name}.json"

    @contextlib.contextmanager
    def _held(self, host: str, name: str) -> Iterator[None]:
        make_folder(self.root / host)
        with locked(self.root / host / f".{name}.lock"):
            yield

    def get(self, host: str, name: str) -> TryRecord | None:
        raw = read_state(self._path(host, name), 1 << 20)
        if raw is None:
            return None
        try:
            return TryRecord.from_json(json.loads(raw))
        except (UnicodeDecodeError, ValueError):
            return None

    def _put(self, host: str, record: TryRecord) -> None:
        write_atomic(self._path(host, record.name), json.dumps(record.to_json(), indent=2).encode())

    def claim(self, host: str, record: TryRecord, left: Callable[[TryRecord], bool]) -> None:
        """Write a new try's record, owned by this process, before its boxes are made (a
        try killed on the way still lists them). A try of that name is one line, unless
        nothing is `left` of it (no box, no live maker): then the new one replaces it."""
        with self._held(host, record.name):
            old = self.get(host, record.name)
            if old is not None and (pid_alive(old.owner) or left(old)):
                raise UsageError(
                    f"a try named {record.name!r} exists (see: hbtui try ls {record.name})"
                )
            self._put(host, replace(record, owner=os.getpid()))

    def settle(self, host: str, record: TryRecord, made: list[str]) -> TryRecord:
        """The try's record once its boxes are made: the ones that were, with the checks
        a `try ls` meanwhile kept for them (none made: no try)."""
        with self._held(host, record.name):
            now = self.get(host, record.name) or record
            checks = {box: c for box, c in now.checks.items() if box in made}
            record = replace(record, boxes=made, checks=checks, owner=0)
            if made:
                self._put(host, record)
            else:
                self._path(host, record.name).unlink(missing_ok=True)
        return record

    def keep_checks(self, host: str, name: str, checks: dict[str, CheckResult]) -> None:
        """The checks `try ls` ran, into the record as it is now (gone: nothing)."""
        with self._held(host, name):
            now = self.get(host, name)
            if now is not None:
                now.checks.update({box: c for box, c in checks.items() if box in now.boxes})
                self._put(host, now)

    def keep_boxes(self, host: str, name: str, boxes: list[str]) -> None:
        """Only `boxes` left in the try (gone: nothing)."""
        with self._held(host, name):
            now = self.get(host, name)
            if now is not None:
                self._put(host, replace(now, boxes=boxes))

    def drop(self, host: str, name: str) -> None:
        with self._held(host, name):
            self._path(host, name).unlink(missing_ok=True)

    @contextlib.contextmanager
    def keeping(self, host: str, name: str) -> Iterator[None]:
        """One `try keep` of a try at a time: two keeps of different boxes each removed
        the box the other kept. Held for the whole keep; a second is refused at once."""
        make_folder(self.root / host)
        fd = open_lock(self.root / host / f".{name}.keep.lock")
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise UsageError(
                    f"try {name} is busy with another keep; try again when it is done"
                ) from None
            yield
        finally:
            os.close(fd)
