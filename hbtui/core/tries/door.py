"""Best of N as the front ends reach it (`service.tries`): a try of N boxes, a box's
source branched N ways as a try, the try's boxes side by side, and one kept. Its boxes are
made and removed through the Service's own `new` and `remove` (they span boxes and work),
each holding its box as it runs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Protocol

from hbtui.core.agents import operations as agents_core
from hbtui.core.agents.sessions import ENDED
from hbtui.core.agents.starts import StartBook
from hbtui.core.boxes.guard import Guard
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation.specs import NewSpec, WorkRequest
from hbtui.core.foundation.views import BoxView
from hbtui.core.tries.book import TryBook, TryRecord
from hbtui.core.tries.operations import (
    KeepCutShort,
    TryRow,
    agent_status,
    box_names,
    fingerprint,
    make_boxes,
    prefixed,
    run_check,
    try_name,
    uncancel,
)
from hbtui.core.work import agent as work_agent
from hbtui.core.work.agent import AgentStart
from hbtui.core.work.book import WorkBook, WorkError, box_work
from hbtui.core.work.diff import diff
from hbtui.core.work.door import Work
from hbtui.core.work.operations import branch_work, clone_dir
from hbtui.core.work.pull import PullResult
from hbtui.environment import pid_alive
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Notice, Report, ignore
from hbtui.names import LOCAL, check_name, host_flag


class Door(Protocol):
    """The Service's own operations a try is made of (each holds its box as it runs)."""

    async def new(
        self, spec: NewSpec, *, report: Report = ..., wait_agent: bool = ...
    ) -> BoxView: ...

    async def remove(self, name: str, host: str = ..., *, report: Report = ...) -> BoxView: ...


class Tries:
    """Best of N: a try made, its boxes side by side, one kept (the others removed)."""

    def __init__(self, ops: BoxOperations, work: Work, door: Door) -> None:
        self._ops = ops
        self._core = ops.core
        self._guard = Guard(ops.core)
        self._work = work
        self._door = door
        self._book = TryBook(ops.core.paths)

    async def new(
        self,
        count: int,
        name: str,
        work: WorkRequest,
        *,
        host: str = LOCAL,
        check: str = "",
        report: Report = ignore,
    ) -> tuple[TryRecord, dict[str, str], dict[str, AgentStart]]:
        """N boxes with the same repository and task, made a few at a time, and their
        agents waited for side by side; returns the try, for each box that could not be
        made why (it was rolled back), and how each box's agent started (one that ended
        is in the record: `try ls` shows it)."""
        self._guard.host(host)
        check_name(name)
        names = box_names(name, count)
        self._refuse_live_try(host, name)
        if not work.agent:
            raise UsageError("a try needs an agent: --agent claude|codex|hermes")
        self._refuse_taken(names, name, host)
        seconds = work_agent.wait_seconds()
        starts: dict[str, AgentStart] = {}

        async def make(box: str, said: Report) -> None:
            await self._door.new(NewSpec(box, host=host, work=work), report=said, wait_agent=False)

        async def wait(box: str) -> None:
            clone = clone_dir(work.seed)
            starts[box] = await work_agent.await_start(
                self._core, box, host, clone, work.agent, seconds
            )

        record = TryRecord(name, str(work.seed.repo), work.seed.seed, check, names)
        made, failed = await self._making(
            host, record, make, lambda box: self._door.remove(box, host), report, wait
        )
        record.ended = {box: s.message for box, s in starts.items() if s.ended}
        for box, start in starts.items():
            if start.ended:  # the box's story everywhere, not only in `try ls`
                StartBook(self._core.paths).ended(host, box, start.agent, start.words)
        return self._book.settle(host, record, made), failed, starts

    async def _making(
        self,
        host: str,
        record: TryRecord,
        make: Callable[[str, Report], Awaitable[object]],
        undo: Callable[[str], Awaitable[object]],
        report: Report,
        then: Callable[[str], Awaitable[object]] | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """The try's boxes made with its record written first; interrupted, the boxes
        made are removed (see `make_boxes`) and the record goes with them."""
        self._book.claim(host, record, lambda old: self._has_boxes(old, host))
        try:
            return await make_boxes(record.boxes, make, undo, report, then)
        except BaseException:
            self._book.drop(host, record.name)
            raise

    async def branch(
        self,
        source: str,
        count: int,
        name: str = "",
        host: str = LOCAL,
        *,
        check: str = "",
        branchable: bool | None = None,
        setup: bool = True,
        report: Report = ignore,
    ) -> tuple[TryRecord, dict[str, str]]:
        """`source` branched N ways, NAME-1..NAME-N (NAME: the source's name), as a try
        from a box that has done part of the work: each branch keeps the source's seed
        and gets its own branch hb/NAME-K, so diff, pull and `try ls/keep` work on them.
        Returns the try and, for each branch that could not be made, why."""
        from hbtui.core.bases import instant

        self._guard.host(host)
        check_name(source)
        name = name or source
        check_name(name)
        names = box_names(name, count)
        self._refuse_live_try(host, name)
        book = WorkBook(self._core.paths)
        seeded = box_work(self._core, book, source, host)
        self._refuse_taken(names, name, host)
        async with contextlib.AsyncExitStack() as held:
            for box in sorted({source, *names}):  # one order: no two holders wait on each other
                await held.enter_async_context(self._core.locks.hold(host, box, "branch"))
            async with instant.branching(
                self._ops, source, names, host_name=host, branchable=branchable,
                keep_provisioning=True, report=report,
            ) as make_branch:  # fmt: skip

                async def make(box: str, said: Report) -> None:
                    await make_branch(box, said)
                    await branch_work(self._ops, book, seeded, source, box, host, said, setup=setup)

                async def undo(box: str) -> None:
                    await self._ops.remove(box, host)
                    book.drop(host, box)

                record = TryRecord(name, seeded.first.repo, seeded.first.seed, check, names)
                made, failed = await self._making(host, record, make, undo, report)
        return self._book.settle(host, record, made), failed

    def _has_boxes(self, record: TryRecord, host: str) -> bool:
        registry = self._core.registry.read()
        return any(registry.get(box, host) is not None for box in record.boxes)

    def _refuse_live_try(self, host: str, name: str) -> None:
        """A try of that name stops a new one, unless nothing is left of it: no box and
        no process making them (a try killed early, its boxes since removed)."""
        old = self._book.get(host, name)
        if old is not None and (pid_alive(old.owner) or self._has_boxes(old, host)):
            raise UsageError(f"a try named {name!r} exists (see: hbtui try ls {name})")

    def _refuse_taken(self, names: list[str], name: str, host: str) -> None:
        """A name a box has stops a try or a branch before any box is made."""
        registry = self._core.registry.read()
        taken = [box for box in names if registry.get(box, host) is not None]
        if taken:
            raise UsageError(
                f"a box named {taken[0]!r} exists; {name} makes {', '.join(names)}: "
                "remove it or choose another name"
            )

    def _try_record(self, name: str, host: str) -> TryRecord:
        self._guard.host(host)
        check_name(name)
        record = self._book.get(host, name)
        if record is None:
            raise UsageError(f"no try named {name!r} (made with: hbtui try N {name} ...)")
        return record

    async def rows(self, name: str, host: str = LOCAL) -> tuple[TryRecord, list[TryRow]]:
        """Each box's agent status, work and check; a settled box whose work changed since
        its last check is checked now."""
        record = self._try_record(name, host)
        making = pid_alive(record.owner)  # a box not yet given its agent is not settled
        registry = self._core.registry.read()
        here = [box for box in record.boxes if registry.get(box, host) is not None]
        listing = await agents_core.listing(self._core, here, [host])
        by_box = {row.box: row for row in listing}
        book = WorkBook(self._core.paths)

        async def row(box: str) -> TryRow:
            if box not in here:  # removed with `hbtui rm`: the others still show
                gone = f"box {box} is not in hbtui ls (removed, or never made)"
                return TryRow(box, "removed", None, None, None, None, record.checks.get(box), gone)
            shown, settled = agent_status(by_box.get(box))
            note = ""
            if box in record.ended and shown in ("no agent", ENDED):
                shown, note = ENDED, record.ended[box]
            try:
                work = book.get(host, box)
                if work is None:
                    raise WorkError(f"box {box} has no work record")
                d = await diff(self._core, work.first, box, host, patch=False)
            except HbtuiError as exc:
                last = record.checks.get(box)
                return TryRow(box, shown, None, None, None, None, last, exc.message, note)
            checked = record.checks.get(box)
            now = fingerprint(d)
            if record.check and settled and not making and (checked is None or checked.work != now):
                checked = await run_check(self._core, host, work.first, box, record.check, now)
                record.checks[box] = checked
            added = sum(f.added or 0 for f in d.files)
            deleted = sum(f.deleted or 0 for f in d.files)
            return TryRow(
                box, shown, len(d.commits), len(d.files), added, deleted, checked, note=note
            )

        rows = list(await asyncio.gather(*(row(box) for box in record.boxes)))
        self._book.keep_checks(host, record.name, record.checks)
        return record, rows

    def of(self, box: str, host: str = LOCAL) -> tuple[TryRecord, str]:
        """The try a box NAME-K belongs to, and its other boxes' names are in it."""
        record = self._try_record(try_name(box), host)
        if box not in record.boxes:
            raise UsageError(f"try {record.name} has no box {box!r}")
        return record, box

    async def keep(
        self, box: str, host: str = LOCAL, *, report: Report = ignore
    ) -> tuple[PullResult, list[str]]:
        """Pull the kept box's work, then remove the try's other boxes; returns the pull's
        result and the boxes removed."""
        name = try_name(box)
        self._guard.host(host)
        check_name(name)
        with self._book.keeping(host, name):
            return await self._keep(box, host, report)

    async def _keep(self, box: str, host: str, report: Report) -> tuple[PullResult, list[str]]:
        record, _ = self.of(box, host)  # under the keep's lock: a keep just done dropped it
        pulled = await self._work.pull(box, host, report=report)
        removed = []
        registry = self._core.registry.read()
        try:
            for other in record.boxes:
                if other == box:
                    continue
                if registry.get(other, host) is None:  # removed with `hbtui rm` before
                    report(Notice(f"{other} was removed already"))
                    removed.append(other)
                    continue
                try:
                    await self._door.remove(other, host, report=prefixed(other, report))
                    removed.append(other)
                except HbtuiError as exc:
                    report(Notice(f"{other} was not removed: {exc.message}"))
        except asyncio.CancelledError:
            self._keep_cut_short(record, box, host, pulled)  # raises unless nothing is left
            uncancel()
            removed = [b for b in record.boxes if b != box]
        self._book.drop(host, record.name)
        return pulled, removed

    def _keep_cut_short(self, record: TryRecord, box: str, host: str, pulled: PullResult) -> None:
        """Interrupted once the pull was in: the record keeps the boxes still there, and
        the error says what was done and how to finish (the same command)."""
        registry = self._core.registry.read()
        left = [b for b in record.boxes if b != box and registry.get(b, host) is not None]
        if not left:
            return
        record.boxes = [box, *left]
        self._book.keep_boxes(host, record.name, record.boxes)
        landed = ", ".join(f"{ref} -> {sha[:12]}" for ref, sha in pulled.refs) or "nothing new"
        raise KeepCutShort(
            f"kept {box}, its work pulled ({landed}); interrupted before removing "
            f"{', '.join(left)}: finish with hbtui try keep {box}{host_flag(host)} --yes"
        )
