"""Best of N: the same task given to N boxes (`hbtui try N NAME`), their results side by
side (`try ls`), one kept (`try keep NAME-K`).

A try is a host record, `<data>/tries/<host>/NAME.json`: its boxes NAME-1..NAME-N, the
check command and each box's last check. A check runs when `try ls` finds a box's agent
idle (or gone) and its work changed since its last check: the record keeps the result
with the work it was run on, so a result is never shown for work it did not see.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from typing import Protocol, cast

from hbtui import boxtext
from hbtui.core.agents import operations as agents_core
from hbtui.core.agents.sessions import ENDED, ERROR, IDLE, STATUSES, BoxAgents
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation.hosts import HostPool
from hbtui.core.foundation.shield import to_the_end
from hbtui.core.foundation.specs import NewSpec, WorkRequest
from hbtui.core.foundation.views import BoxView
from hbtui.core.tries.book import CheckResult, TryBook, TryRecord
from hbtui.core.work import agent as work_agent
from hbtui.core.work import box as work_box
from hbtui.core.work.agent import AgentStart
from hbtui.core.work.book import WorkBook, WorkError, WorkRecord, work_record
from hbtui.core.work.diff import WorkDiff, diff
from hbtui.core.work.operations import PullResult, branch_work, clone_dir
from hbtui.core.work.setup import SetupFailed
from hbtui.engine import Bound
from hbtui.environment import pid_alive
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Event, Notice, Phase, Report, ignore
from hbtui.names import LOCAL, check_name, host_flag
from hbtui.paths import Paths

TRY_MAX = 16
TRY_CONCURRENCY = 4  # boxes made at once
CHECK_TIMEOUT = 1800.0
CHECK_OUTPUT = 4096  # characters of a check's output kept (its end)
_KEY = re.compile(r"(.+)-(\d+)")


@dataclass(frozen=True)
class TryRow:
    """One box of a try, as `try ls` shows it."""

    box: str
    agent: str  # the agent's status (idle, working, ...), "no agent", or why it is unknown
    commits: int | None
    files: int | None
    added: int | None
    deleted: int | None
    check: CheckResult | None
    error: str = ""  # why its work could not be read (its numbers are None)
    note: str = ""  # how its agent ended at its start, while no agent runs in it

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["check"] = asdict(self.check) if self.check else None
        return data


class KeepCutShort(HbtuiError):
    """`try keep` interrupted after its pull landed: the work is in, some boxes are left."""

    exit_code = 130


def _uncancel() -> None:
    """The cancellation came when nothing was left to do: the caller hears it succeeded."""
    current = asyncio.current_task()
    if current is not None:
        current.uncancel()


def _try_name(box: str) -> str:
    """The try a box NAME-K would belong to."""
    match = _KEY.fullmatch(box)
    if match is None:
        raise UsageError(f"{box!r} is not a box of a try (NAME-K)")
    return match.group(1)


def box_names(name: str, count: int) -> list[str]:
    if not 1 <= count <= TRY_MAX:
        raise UsageError(f"a try makes 1 to {TRY_MAX} boxes, not {count}")
    names = [f"{name}-{k}" for k in range(1, count + 1)]
    for box in names:
        check_name(box)
    return names


def _prefixed(box: str, report: Report) -> Report:
    """One box's progress among N: its phases and notices, named once (a message that
    starts with the box's name already says whose it is); the rest stays quiet."""

    def named(message: str) -> str:
        said = message.startswith(box) and message[len(box) : len(box) + 1] in (" ", ":")
        return message if said else f"{box}: {message}"

    def relay(event: Event) -> None:
        if isinstance(event, (Phase, Notice)):
            report(replace(event, message=named(event.message)))

    return relay


async def _make_boxes(
    names: list[str],
    make: Callable[[str, Report], Awaitable[object]],
    undo: Callable[[str], Awaitable[object]],
    report: Report,
    then: Callable[[str], Awaitable[object]] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The boxes of a try or of a branch N ways, TRY_CONCURRENCY at a time: the ones
    made, and why each other one could not be (its own rollback removed it; the others
    stay) or, made, failed its repository's setup (it stays, among those made). `then`
    runs for each box made once its slot is free (the waits for the agents run side by
    side, not TRY_CONCURRENCY at a time). Cancelled (Ctrl-C, SIGTERM), the boxes made
    so far are removed too."""
    limit = asyncio.Semaphore(TRY_CONCURRENCY)
    failed: dict[str, str] = {}
    made: list[str] = []

    async def one(box: str) -> None:
        async with limit:
            try:
                await make(box, _prefixed(box, report))
                made.append(box)
            except SetupFailed as exc:  # the box stays, made, with no agent to wait for
                made.append(box)
                failed[box] = exc.message
                report(Notice(f"{box}: {exc.message}"))
                return
            except HbtuiError as exc:
                failed[box] = exc.message
                report(Notice(f"{box}: {exc.message}"))
                return
        if then is not None:
            await then(box)

    making = [asyncio.create_task(one(box)) for box in names]
    try:
        await asyncio.gather(*making)
    except BaseException:
        await to_the_end(_settled(making))
        for box in made:
            report(Phase(f"removing {box}: interrupted"))
            try:
                await to_the_end(undo(box))
            except HbtuiError as exc:
                report(Notice(f"{box} stays (remove it: hbtui rm {box}): {exc.message}"))
        raise
    return [box for box in names if box in made], failed


async def _settled(tasks: list[asyncio.Task[None]]) -> None:
    """Every task ended: `gather` gives up at the first one cancelled or failed while
    the others may still be rolling back their box, and the loop's close would cut
    those rollbacks off. One not yet asked to stop is cancelled, once: a second cancel
    would cut off the rollback it is running."""
    for task in tasks:
        if not task.done() and not task.cancelling():
            task.cancel()
    await asyncio.wait(tasks)


def _fingerprint(d: WorkDiff) -> str:
    files = ",".join(f"{f.path}:{f.added}:{f.deleted}" for f in d.files)
    return f"{d.head} {files}"


def _agent_status(row: BoxAgents | None) -> tuple[str, bool]:
    """(what to show, whether the box is settled enough to check)."""
    if row is None:
        return "unknown", False
    if row.error:
        return "error", False
    live = [s for s in row.sessions if s.status not in (ENDED, ERROR)]
    if not live:
        return ("ended" if row.sessions else "no agent"), True
    statuses = {s.status for s in live}
    shown = next(s for s in STATUSES if s in statuses)
    return shown, statuses == {IDLE}


async def run_check(
    boxes: BoxOperations, host_name: str, record: WorkRecord, name: str, command: str, work: str
) -> CheckResult:
    """The check in the box, as its agent, in the clone; the end of its output kept.
    What it writes is taken out again after it (work_box.CHECK_SCRIPT): the check's files
    are never the agent's work."""
    host = await boxes.hosts.get(host_name)
    try:
        done = await host.engine.exec(
            name,
            ["bash", "-c", work_box.CHECK_SCRIPT, "hbtui", command],
            user=work_box.AGENT,
            workdir=record.clone,
            timeout=CHECK_TIMEOUT,
            bound=Bound(CHECK_OUTPUT * 4, tail=True),
        )
    except (HbtuiError, OSError) as exc:
        return CheckResult(work, None, boxtext.line(str(exc))[:300])
    text = (done.stdout + done.stderr)[-CHECK_OUTPUT * 4 :].decode(errors="replace")
    return CheckResult(work, done.returncode, boxtext.lines(text)[-CHECK_OUTPUT:])


class _Door(Protocol):
    """The Service's own operations a try is made of (each holds its box as it runs)."""

    async def new(
        self, spec: NewSpec, *, report: Report = ..., wait_agent: bool = ...
    ) -> BoxView: ...

    async def remove(self, name: str, host: str = ..., *, report: Report = ...) -> BoxView: ...

    async def pull(self, name: str, host: str = ..., *, report: Report = ...) -> PullResult: ...


class TryOperations:
    """The Service's best-of-N methods (it inherits them)."""

    paths: Paths
    _boxes: BoxOperations
    _hosts: HostPool

    @property
    def _tries(self) -> TryBook:
        return TryBook(self.paths)

    def _try_host(self, host: str) -> None:
        if host not in self._hosts.names():
            raise UsageError(f"unknown host {host!r}; see: hbtui hosts ls")

    async def try_new(
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
        self._try_host(host)
        check_name(name)
        names = box_names(name, count)
        self._refuse_live_try(host, name)
        if not work.agent:
            raise UsageError("a try needs an agent: --agent claude|codex|hermes")
        self._refuse_taken(names, name, host)
        door = cast(_Door, self)
        seconds = work_agent.wait_seconds()
        starts: dict[str, AgentStart] = {}

        async def make(box: str, said: Report) -> None:
            await door.new(NewSpec(box, host=host, work=work), report=said, wait_agent=False)

        async def wait(box: str) -> None:
            clone = clone_dir(work.seed)
            starts[box] = await work_agent.await_start(
                self._boxes, box, host, clone, work.agent, seconds
            )

        record = TryRecord(name, str(work.seed.repo), work.seed.seed, check, names)
        made, failed = await self._making(
            host, record, make, lambda box: door.remove(box, host), report, wait
        )
        record.ended = {box: s.message for box, s in starts.items() if s.ended}
        return self._tries.settle(host, record, made), failed, starts

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
        made are removed (see `_make_boxes`) and the record goes with them."""
        self._tries.claim(host, record, lambda old: self._has_boxes(old, host))
        try:
            return await _make_boxes(record.boxes, make, undo, report, then)
        except BaseException:
            self._tries.drop(host, record.name)
            raise

    async def branch_count(
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

        self._try_host(host)
        check_name(source)
        name = name or source
        check_name(name)
        names = box_names(name, count)
        self._refuse_live_try(host, name)
        book = WorkBook(self.paths)
        seeded = work_record(self._boxes, book, source, host)
        self._refuse_taken(names, name, host)
        async with contextlib.AsyncExitStack() as held:
            for box in sorted({source, *names}):  # one order: no two holders wait on each other
                await held.enter_async_context(self._boxes.locks.hold(host, box, "branch"))
            async with instant.branching(
                self._boxes, source, names, host_name=host, branchable=branchable,
                keep_provisioning=True, report=report,
            ) as make_branch:  # fmt: skip

                async def make(box: str, said: Report) -> None:
                    await make_branch(box, said)
                    await branch_work(
                        self._boxes, book, seeded, source, box, host, said, setup=setup
                    )

                async def undo(box: str) -> None:
                    await self._boxes.remove(box, host)
                    book.drop(host, box)

                record = TryRecord(name, seeded.repo, seeded.seed, check, names)
                made, failed = await self._making(host, record, make, undo, report)
        return self._tries.settle(host, record, made), failed

    def _has_boxes(self, record: TryRecord, host: str) -> bool:
        registry = self._boxes.registry.read()
        return any(registry.get(box, host) is not None for box in record.boxes)

    def _refuse_live_try(self, host: str, name: str) -> None:
        """A try of that name stops a new one, unless nothing is left of it: no box and
        no process making them (a try killed early, its boxes since removed)."""
        old = self._tries.get(host, name)
        if old is not None and (pid_alive(old.owner) or self._has_boxes(old, host)):
            raise UsageError(f"a try named {name!r} exists (see: hbtui try ls {name})")

    def _refuse_taken(self, names: list[str], name: str, host: str) -> None:
        """A name a box has stops a try or a branch before any box is made."""
        registry = self._boxes.registry.read()
        taken = [box for box in names if registry.get(box, host) is not None]
        if taken:
            raise UsageError(
                f"a box named {taken[0]!r} exists; {name} makes {', '.join(names)}: "
                "remove it or choose another name"
            )

    def _try_record(self, name: str, host: str) -> TryRecord:
        self._try_host(host)
        check_name(name)
        record = self._tries.get(host, name)
        if record is None:
            raise UsageError(f"no try named {name!r} (made with: hbtui try N {name} ...)")
        return record

    async def try_rows(self, name: str, host: str = LOCAL) -> tuple[TryRecord, list[TryRow]]:
        """Each box's agent status, work and check; a settled box whose work changed since
        its last check is checked now."""
        record = self._try_record(name, host)
        making = pid_alive(record.owner)  # a box not yet given its agent is not settled
        registry = self._boxes.registry.read()
        here = [box for box in record.boxes if registry.get(box, host) is not None]
        listing = await agents_core.listing(self._boxes, here, [host])
        by_box = {row.box: row for row in listing}
        book = WorkBook(self.paths)

        async def row(box: str) -> TryRow:
            if box not in here:  # removed with `hbtui rm`: the others still show
                gone = f"box {box} is not in hbtui ls (removed, or never made)"
                return TryRow(box, "removed", None, None, None, None, record.checks.get(box), gone)
            shown, settled = _agent_status(by_box.get(box))
            note = ""
            if box in record.ended and shown in ("no agent", ENDED):
                shown, note = ENDED, record.ended[box]
            try:
                work = book.get(host, box)
                if work is None:
                    raise WorkError(f"box {box} has no work record")
                d = await diff(self._boxes, book, box, host, patch=False)
            except HbtuiError as exc:
                last = record.checks.get(box)
                return TryRow(box, shown, None, None, None, None, last, exc.message, note)
            checked = record.checks.get(box)
            now = _fingerprint(d)
            if record.check and settled and not making and (checked is None or checked.work != now):
                checked = await run_check(self._boxes, host, work, box, record.check, now)
                record.checks[box] = checked
            added = sum(f.added or 0 for f in d.files)
            deleted = sum(f.deleted or 0 for f in d.files)
            return TryRow(
                box, shown, len(d.commits), len(d.files), added, deleted, checked, note=note
            )

        rows = list(await asyncio.gather(*(row(box) for box in record.boxes)))
        self._tries.keep_checks(host, record.name, record.checks)
        return record, rows

    def try_of(self, box: str, host: str = LOCAL) -> tuple[TryRecord, str]:
        """The try a box NAME-K belongs to, and its other boxes' names are in it."""
        record = self._try_record(_try_name(box), host)
        if box not in record.boxes:
            raise UsageError(f"try {record.name} has no box {box!r}")
        return record, box

    async def try_keep(
        self, box: str, host: str = LOCAL, *, report: Report = ignore
    ) -> tuple[PullResult, list[str]]:
        """Pull the kept box's work, then remove the try's other boxes; returns the pull's
        result and the boxes removed."""
        name = _try_name(box)
        self._try_host(host)
        check_name(name)
        with self._tries.keeping(host, name):
            return await self._keep(box, host, report)

    async def _keep(self, box: str, host: str, report: Report) -> tuple[PullResult, list[str]]:
        record, _ = self.try_of(box, host)  # under the keep's lock: a keep just done dropped it
        door = cast(_Door, self)
        pulled = await door.pull(box, host, report=report)
        removed = []
        registry = self._boxes.registry.read()
        try:
            for other in record.boxes:
                if other == box:
                    continue
                if registry.get(other, host) is None:  # removed with `hbtui rm` before
                    report(Notice(f"{other} was removed already"))
                    removed.append(other)
                    continue
                try:
                    await door.remove(other, host, report=_prefixed(other, report))
                    removed.append(other)
                except HbtuiError as exc:
                    report(Notice(f"{other} was not removed: {exc.message}"))
        except asyncio.CancelledError:
            self._keep_cut_short(record, box, host, pulled)  # raises unless nothing is left
            _uncancel()
            removed = [b for b in record.boxes if b != box]
        self._tries.drop(host, record.name)
        return pulled, removed

    def _keep_cut_short(self, record: TryRecord, box: str, host: str, pulled: PullResult) -> None:
        """Interrupted once the pull was in: the record keeps the boxes still there, and
        the error says what was done and how to finish (the same command)."""
        registry = self._boxes.registry.read()
        left = [b for b in record.boxes if b != box and registry.get(b, host) is not None]
        if not left:
            return
        record.boxes = [box, *left]
        self._tries.keep_boxes(host, record.name, record.boxes)
        landed = ", ".join(f"{ref} -> {sha[:12]}" for ref, sha in pulled.refs) or "nothing new"
        raise KeepCutShort(
            f"kept {box}, its work pulled ({landed}); interrupted before removing "
            f"{', '.join(left)}: finish with hbtui try keep {box}{host_flag(host)} --yes"
        )
