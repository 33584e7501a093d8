"""hbtui's own record of the boxes it made.

A TOML file in the state home, rewritten atomically (temp file, fsync,
rename) and only under an exclusive lock on a side file, so concurrent
`hbtui` processes never lose each other's rows. The engine stays the truth
for whether a machine exists and runs; the registry holds what the engine
does not (the port mapping, the provisioning status, the last save).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import tomli_w

from hbtui.core.hosts import LOCAL
from hbtui.errors import HbtuiError

PROVISIONING = "provisioning"
READY = "ready"
FAILED = "failed"


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class BoxRecord:
    name: str
    port: int
    host: str = LOCAL
    image: str = ""
    cpus: int = 0
    memory_mib: int = 0
    created: str = field(default_factory=utc_now)
    recipe: str = ""
    status: str = PROVISIONING
    last_save: str = ""
    error: str = ""
    # The hbtui process provisioning this box on this machine, so a box whose
    # provisioning was killed can be told from one still being provisioned.
    owner_pid: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.host, self.name)

    def with_(self, **changes: object) -> BoxRecord:
        return replace(self, **changes)  # type: ignore[arg-type]

    def effective_status(self) -> str:
        if self.status == PROVISIONING and self.owner_pid and not _pid_alive(self.owner_pid):
            return FAILED
        return self.status


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class RegistryError(HbtuiError):
    pass


class Boxes:
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

    def _read(self) -> dict[tuple[str, str], BoxRecord]:
        try:
            raw = tomllib.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except tomllib.TOMLDecodeError as exc:
            raise RegistryError(f"registry {self.path} is damaged: {exc}") from None
        rows: dict[tuple[str, str], BoxRecord] = {}
        known = set(BoxRecord.__dataclass_fields__)
        for host, boxes in (raw.get("boxes") or {}).items():
            for name, data in boxes.items():
                values = {k: v for k, v in data.items() if k in known}
                values.update(name=name, host=host)
                try:
                    rows[(host, name)] = BoxRecord(**values)
                except TypeError as exc:
                    raise RegistryError(f"registry row {host}/{name} is damaged: {exc}") from None
        return rows

    def _write(self, rows: dict[tuple[str, str], BoxRecord]) -> None:
        doc: dict[str, dict[str, dict[str, object]]] = {}
        for (host, name), rec in sorted(rows.items()):
            data = {k: v for k, v in asdict(rec).items() if k not in ("name", "host")}
            doc.setdefault(host, {})[name] = data
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w") as fh:
            fh.write(tomli_w.dumps({"version": 1, "boxes": doc}))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def read(self) -> Boxes:
        """A consistent snapshot; changes to it are not saved.

        No lock: every version of the file is written whole and renamed into
        place, so a reader sees the old rows or the new ones. (Taking the lock
        here would also deadlock a process that lists boxes while one of its
        own transactions, a `new` allocating a port, holds it.)
        """
        return Boxes(self._read())

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Boxes]:
        """Exclusive access across processes; rows are saved if the block succeeds."""
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
            boxes = Boxes(self._read())
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
