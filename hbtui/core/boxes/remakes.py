"""Remaking a box from its own disk, so that no kill, power cut or full disk loses it.

`credentials add|rm` must delete a box's machine and make it again (the engine binds
credentials only when it creates a machine). Between the delete and the new machine,
the box's whole disk exists only as a pack. So the pack is written to a durable folder
on the box's host (never the scratch folder the next run sweeps), and a journal entry
naming it, the box as it was and as it is to be, is written and synced here before the
machine is deleted. `finish` makes the machine from the pack (as wanted, else as it
was), updates the registry, then drops the entry and the pack. An entry left by a
killed process makes the box refuse every operation but `hbtui repair`, which runs
`finish` again: the pack is the box as it was when it was stopped, since nothing could
run it in between.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.registry import BoxRecord, Registry
from hbtui.engine import EngineError, MachineNotFound, MachineSpec
from hbtui.environment import pid_alive
from hbtui.errors import HbtuiError
from hbtui.events import Notice, Phase, Report
from hbtui.names import host_flag
from hbtui.paths import make_folder
from hbtui.schema import Invalid, from_table, read_toml, to_table
from hbtui.statefile import fsync_dir, write_atomic

PREFIX = ".remake-"  # pack folders on a host: .remake-NAME-PID-NS


class RemakePending(HbtuiError):
    """The box's disk is in a pack, waiting for `hbtui repair` to make its machine."""


@dataclass(frozen=True)
class Remake:
    """One journal entry: where the box's disk is, and what to make of it."""

    pid: int  # the process making it; 0 once that process gave up (it failed)
    folder: str  # the pack's folder on the box's host
    pack: str  # the .smolmachine file in it
    was_running: bool
    old: BoxRecord
    new: BoxRecord

    @property
    def name(self) -> str:
        return self.old.name

    @property
    def host(self) -> str:
        return self.old.host

    def to_table(self) -> dict[str, object]:
        return {**asdict(self), "old": to_table(self.old), "new": to_table(self.new)}


def _record(raw: object) -> BoxRecord:
    if not isinstance(raw, dict):
        raise Invalid("a box record must be a table")
    return from_table(BoxRecord, raw)


def hint(name: str, host: str) -> str:
    return f"hbtui repair {name}{host_flag(host)}"


class RemakeJournal:
    """One JSON file per box being remade, under the state home."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, host: str, name: str) -> Path:
        return self.folder / f"{host}--{name}.toml"

    def write(self, remake: Remake) -> None:
        import tomli_w  # only a remake writes its journal

        make_folder(self.folder)
        data = tomli_w.dumps(remake.to_table()).encode()
        write_atomic(self._path(remake.host, remake.name), data)

    def get(self, host: str, name: str) -> Remake | None:
        """The box's entry, or None. A damaged entry is an error, never "no entry": it
        may be the only record of where the box's disk is."""
        path = self._path(host, name)
        try:
            raw = read_toml(path)
        except Invalid as exc:
            raise HbtuiError(
                f"the remake journal {path} is damaged ({exc}); the box's disk may be in a "
                f"{PREFIX}{name}-* folder beside the host's bases"
            ) from None
        if raw is None:
            return None
        try:
            return Remake(
                pid=int(raw["pid"]),
                folder=str(raw["folder"]),
                pack=str(raw["pack"]),
                was_running=bool(raw["was_running"]),
                old=_record(raw["old"]),
                new=_record(raw["new"]),
            )
        except (KeyError, TypeError, ValueError, Invalid) as exc:
            raise HbtuiError(f"the remake journal {path} is damaged ({exc})") from None

    def pending(self, host: str, name: str) -> Remake | None:
        """An entry no process is working on: the box waits for `hbtui repair`."""
        remake = self.get(host, name)
        if remake is None or (remake.pid and pid_alive(remake.pid)):
            return None
        return remake

    def drop(self, host: str, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(host, name).unlink()
        fsync_dir(self.folder)

    def folders(self) -> set[str]:
        """The pack folders that entries name (kept by the sweep whoever wrote them)."""
        found = set()
        for path in self.folder.glob("*.toml") if self.folder.is_dir() else ():
            with contextlib.suppress(Invalid, KeyError):
                raw = read_toml(path)
                if raw is not None:
                    found.add(str(raw["folder"]))
        return found


def pack_folder(host: Host, name: str) -> str:
    return f"{host.files.bases_dir()}/{PREFIX}{name}-{os.getpid()}-{time.time_ns()}"


async def finish(
    host: Host,
    registry: Registry,
    journal: RemakeJournal,
    remake: Remake,
    spec: Callable[[BoxRecord, Path], MachineSpec],
    boot: Callable[[], Awaitable[None]],
    report: Report,
) -> BoxRecord:
    """Make the box's machine from its pack as `remake.new` says, else as it was; record
    what was made; drop the entry and the pack. Returns the record made. If neither can
    be made, the entry and the pack stay and the error says how to finish later.

    A machine made from a pack has a disk of its own only once it has run (until then
    the engine shows it `created` and cannot pack it again): a box that was stopped is
    started (`boot`) and stopped once, so it is the stopped box it was."""
    name = remake.name
    report(Phase(f"making {name} again with {remake.new.credentials or 'no credentials'}"))
    with contextlib.suppress(MachineNotFound):
        await host.engine.delete(name)
    made = remake.new
    failure: BaseException | None = None
    try:
        await host.engine.create(spec(remake.new, Path(remake.pack)))
    except Exception as exc:
        failure = exc
        report(Notice(f"could not make {name} again ({exc}); restoring it as it was"))
        made = remake.old
        try:
            with contextlib.suppress(MachineNotFound, EngineError):
                await host.engine.delete(name)
            await host.engine.create(spec(remake.old, Path(remake.pack)))
        except Exception as again:
            journal.write(replace(remake, pid=0))  # waits for `hbtui repair`
            raise RemakePending(
                f"{name} could not be made again ({again}); its disk is kept in {remake.pack}",
                hint=f"once that is fixed, finish it with: {hint(name, remake.host)}",
            ) from None
    await registry.update(name, remake.host, credentials=made.credentials, allow=made.allow)
    journal.drop(remake.host, name)
    await host.files.remove_tree(remake.folder)
    if not remake.was_running:
        report(Phase(f"starting and stopping {name} once, so that it is stopped as it was"))
        await boot()
        await host.engine.stop(name)
    if failure is not None:
        raise failure
    return made
