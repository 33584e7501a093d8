"""hbtui's own record of the boxes it made.

A TOML file in the state home, rewritten atomically (temp file, fsync,
rename) and only under an exclusive lock on a side file, so concurrent
`hbtui` processes never lose each other's rows. The engine stays the truth
for whether a machine exists and runs; the registry holds what the engine
does not (the port mapping, the provisioning status, the last save).

The file is `version = 1` and a table per row, `[boxes.HOST.NAME]`, whose
keys are BoxRecord's fields: the dataclass (its types and `rule(...)`
metadata) is the schema rows are read and written by. A file that breaks it
(not UTF-8, not TOML, a wrong shape, a bad value, two rows on one port) is a
RegistryError naming the file, the row and the field; no transaction runs on
such a file, so a hand-damaged registry is never "repaired" by dropping rows.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from hbtui.config import MAX_CPUS, MAX_MEMORY_MIB
from hbtui.environment import pid_alive
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL, host_name_problem, name_problem
from hbtui.schema import Invalid, from_table, plain, read_toml, rule, show, to_table
from hbtui.statefile import lock_fd, write_atomic

PROVISIONING = "provisioning"
READY = "ready"
FAILED = "failed"
# The error of a box made to hold a repository (`new --repo`, a branch of such a box)
# that never got it: the recipe cannot give it, so repair does not apply.
WORK_MISSING = "its repository never went in"
VERSION = 1
PID_MAX = 2**22  # the largest pid Linux hands out (PID_MAX_LIMIT); macOS stays below
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_TIME_RE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z")


def utc_now() -> str:
    return datetime.now(UTC).strftime(_TIME_FORMAT)


def _time_problem(text: str) -> str | None:
    if not text:
        return None
    if not _TIME_RE.fullmatch(text):
        return "not YYYY-MM-DDTHH:MM:SSZ"
    try:
        datetime.strptime(text, _TIME_FORMAT)
    except ValueError:
        return "no such date or time"
    return None


def _host_problem(host: str) -> str | None:
    return None if host == LOCAL else host_name_problem(host)


_TIME = rule(desc='a UTC time like "2026-01-31T12:00:00Z" (or "")', check=_time_problem)


@dataclass(frozen=True)
class BoxRecord:
    name: str = field(metadata=rule(desc="a box name", check=name_problem))
    port: int = field(metadata=rule(low=1024, high=65535))
    host: str = field(
        default=LOCAL, metadata=rule(desc="'local' or a host name", check=_host_problem)
    )
    image: str = ""
    cpus: int = field(default=0, metadata=rule(low=0, high=MAX_CPUS, note="0: unknown"))
    memory_mib: int = field(
        default=0, metadata=rule(low=0, high=MAX_MEMORY_MIB, note="MiB, at most 4 TiB; 0: unknown")
    )
    created: str = field(default_factory=utc_now, metadata=_TIME)
    recipe: str = ""
    status: str = field(default=PROVISIONING, metadata=rule(choices=(PROVISIONING, READY, FAILED)))
    last_save: str = field(default="", metadata=_TIME)
    error: str = ""
    # The hbtui process provisioning this box on this machine, so a box whose
    # provisioning was killed can be told from one still being provisioned.
    owner_pid: int = field(default=0, metadata=rule(low=0, high=PID_MAX, note="0: none"))
    base: str = ""  # the base it was made from; empty: the whole recipe ran in it
    parent: str = ""  # the box it was branched from
    branchable: bool = False  # started so that it can be branched
    # The port inside the box its executor bridge listens on, when not `port`: an engine
    # branch keeps its source's guest port (forwarded from the child's own host port).
    guest_port: int = field(default=0, metadata=rule(low=0, high=65535, note="0: same as port"))
    # Credential presets bound to the machine (comma-separated; values are never here),
    # and the egress policy it was created with (`allow`: its allow list, comma-separated).
    credentials: str = ""
    egress: str = ""  # "": made before hbtui set egress policies (open)
    allow: str = ""
    # What its coding agents may do unasked: "ask" (or "": before this setting) or "skip".
    agent_permissions: str = field(default="", metadata=rule(choices=("", "ask", "skip")))

    @property
    def inner_port(self) -> int:
        return self.guest_port or self.port

    @property
    def key(self) -> tuple[str, str]:
        return (self.host, self.name)

    def with_(self, **changes: object) -> BoxRecord:
        return replace(self, **changes)  # type: ignore[arg-type]

    def effective_status(self) -> str:
        if self.status == PROVISIONING and self.owner_pid and not pid_alive(self.owner_pid):
            return FAILED
        return self.status


class RegistryError(HbtuiError):
    pass


_FROM_KEYS = ("name", "host")  # a row's table keys, not fields in its table


def _row(host: str, name: str) -> str:
    return f"row {plain(host)}/{plain(name)}"


def parse_rows(raw: dict[str, Any]) -> dict[tuple[str, str], BoxRecord]:
    """The rows of a parsed registry file, every one checked; Invalid if any is bad."""
    unknown = sorted(k for k in raw if k not in ("version", "boxes"))
    if unknown:
        raise Invalid(f"unknown key {plain(unknown[0])}")
    if "version" not in raw:
        # hbtui always writes `version = 1`: a file without it (empty, comments only) was
        # cut short or written by hand, and reading it as "no boxes" would lose them.
        raise Invalid(f"it has no version = {VERSION} (cut short, or not written by hbtui?)")
    version = raw["version"]
    if type(version) is not int or version != VERSION:
        raise Invalid(
            f"version must be {VERSION}, got {show(version)} (written by another hbtui version?)"
        )
    hosts = raw.get("boxes", {})
    if not isinstance(hosts, dict):
        raise Invalid(f"boxes must be a table of hosts, got {show(hosts)}")
    rows: dict[tuple[str, str], BoxRecord] = {}
    for host, boxes in hosts.items():
        if not isinstance(boxes, dict):
            raise Invalid(f"boxes.{plain(host)} must be a table of boxes, got {show(boxes)}")
        for name, data in boxes.items():
            if not isinstance(data, dict):
                raise Invalid(f"{_row(host, name)} must be a table, got {show(data)}")
            try:
                # A row without `created` (hand-written) was made at an unknown time, not
                # at each read (the field's default is for new rows).
                table = {"created": "", **data}
                rows[(host, name)] = from_table(
                    BoxRecord, table, given={"name": name, "host": host}
                )
            except Invalid as exc:
                raise Invalid(f"{_row(host, name)}: {exc}") from None
    check_rows(rows)
    return rows


def check_rows(rows: dict[tuple[str, str], BoxRecord]) -> None:
    """What holds across rows: one port, one box on each host. Invalid if not."""
    owners: dict[tuple[str, int], str] = {}
    for (host, name), rec in sorted(rows.items()):
        other = owners.setdefault((host, rec.port), name)
        if other != name:
            raise Invalid(
                f"{_row(host, name)}: port {rec.port} is also the port of {_row(host, other)}"
            )


def rows_to_doc(rows: dict[tuple[str, str], BoxRecord]) -> dict[str, Any]:
    """The registry file's table for `rows`, each one checked as a reader will check it."""
    doc: dict[str, dict[str, dict[str, object]]] = {}
    for key, rec in sorted(rows.items()):
        host, name = key
        data = {k: v for k, v in to_table(rec).items() if k not in _FROM_KEYS}
        try:
            if key != rec.key:
                raise Invalid(f"is filed under {plain(host)}/{plain(name)}")
            from_table(BoxRecord, data, given={"name": name, "host": host})
        except Invalid as exc:
            raise Invalid(f"{_row(rec.host, rec.name)}: {exc}") from None
        doc.setdefault(host, {})[name] = data
    check_rows(rows)
    return {"version": VERSION, "boxes": doc}


class Rows:
    """The registry's rows while the lock is held; changes are written on exit."""

    def __init__(self, rows: dict[tuple[str, str], BoxRecord]) -> None:
        self.rows = rows
        self.changed = False

    def get(self, name: str, host: str = LOCAL) -> BoxRecord | None:
        return self.rows.get((host, name))

    def put(self, record: BoxRecord) -> None:
        self.rows[record.key] = record
        self.changed = True

    def remove(self, name: str, host: str = LOCAL) -> BoxRecord | None:
        record = self.rows.pop((host, name), None)
        self.changed = self.changed or record is not None
        return record

    def on_host(self, host: str) -> list[BoxRecord]:
        return [r for (h, _), r in sorted(self.rows.items()) if h == host]

    def __iter__(self) -> Iterator[BoxRecord]:
        return iter([self.rows[k] for k in sorted(self.rows)])


class Registry:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = path.with_name(path.name + ".lock")

    def _error(self, problem: object) -> RegistryError:
        return RegistryError(f"registry {plain(str(self.path))}: {problem}")

    def _read(self) -> dict[tuple[str, str], BoxRecord]:
        try:
            raw = read_toml(self.path)
            return {} if raw is None else parse_rows(raw)
        except Invalid as exc:
            raise self._error(exc) from None

    def _write(self, rows: dict[tuple[str, str], BoxRecord]) -> None:
        try:
            text = tomli_w.dumps(rows_to_doc(rows))
        except Invalid as exc:
            raise self._error(f"refusing to write {exc}") from None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, text.encode())
        except OSError as exc:
            raise self._error(f"cannot write it: {exc.strerror or exc}") from None

    def read(self) -> Rows:
        """A consistent snapshot; changes to it are not saved.

        No lock: every version of the file is written whole and renamed into
        place, so a reader sees the old rows or the new ones. (Taking the lock
        here would also deadlock a process that lists boxes while one of its
        own transactions, a `new` allocating a port, holds it.)
        """
        return Rows(self._read())

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Rows]:
        """Exclusive access across processes; rows are saved if the block succeeds."""
        try:
            self.lock_path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise self._error(
                f"cannot open its lock {plain(str(self.lock_path))}: {exc.strerror or exc}"
            ) from None
        try:
            await lock_fd(fd)
            boxes = Rows(self._read())
            yield boxes
            if boxes.changed:
                self._write(boxes.rows)
        finally:
            os.close(fd)

    async def update(self, name: str, host: str = LOCAL, **changes: object) -> BoxRecord | None:
        async with self.transaction() as boxes:
            rec = boxes.get(name, host)
            if rec is not None:
                rec = rec.with_(**changes)
                boxes.put(rec)
            return rec

    async def settle(
        self, name: str, host: str, status: str, error: str = "", **changes: object
    ) -> BoxRecord | None:
        """An operation on the box ended: its status, no process owns it any more, and why
        it failed ("" when it did not)."""
        return await self.update(name, host, status=status, owner_pid=0, error=error, **changes)
