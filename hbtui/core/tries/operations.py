"""Best of N: the same task given to N boxes (`hbtui try N NAME`), their results side by
side (`try ls`), one kept (`try keep NAME-K`).

A try is a host record, `<data>/tries/<host>/NAME.json`: its boxes NAME-1..NAME-N, the
check command and each box's last check. A check runs when `try ls` finds a box's agent
idle (or gone) and its work changed since its last check: the record keeps the result
with the work it was run on, so a result is never shown for work it did not see.

These are a try's steps and what it shows; `Tries` (hbtui.core.tries.door) puts them
together as the feature object the front ends reach.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace

from hbtui import boxtext
from hbtui.core.agents.sessions import ENDED, ERROR, IDLE, BoxAgents, box_status
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation.shield import to_the_end
from hbtui.core.tries.book import CheckResult
from hbtui.core.work import box as work_box
from hbtui.core.work.book import WorkRecord
from hbtui.core.work.diff import WorkDiff
from hbtui.core.work.setup import SetupFailed
from hbtui.engine import Bound
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Event, Notice, Phase, Report
from hbtui.names import check_name

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


def uncancel() -> None:
    """The cancellation came when nothing was left to do: the caller hears it succeeded."""
    current = asyncio.current_task()
    if current is not None:
        current.uncancel()


def try_name(box: str) -> str:
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


def prefixed(box: str, report: Report) -> Report:
    """One box's progress among N: its phases and notices, named once (a message that
    starts with the box's name already says whose it is); the rest stays quiet."""

    def named(message: str) -> str:
        said = message.startswith(box) and message[len(box) : len(box) + 1] in (" ", ":")
        return message if said else f"{box}: {message}"

    def relay(event: Event) -> None:
        if isinstance(event, (Phase, Notice)):
            report(replace(event, message=named(event.message)))

    return relay


async def make_boxes(
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
                await make(box, prefixed(box, report))
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


def fingerprint(d: WorkDiff) -> str:
    files = ",".join(f"{f.path}:{f.added}:{f.deleted}" for f in d.files)
    return f"{d.head} {files}"


def agent_status(row: BoxAgents | None) -> tuple[str, bool]:
    """(what to show: the box's one status, as every view gives it; whether the box is
    settled enough to check: no session at work or waiting)."""
    if row is None:
        return "unknown", False
    shown = box_status(row)
    if shown == ERROR and row.error:
        return shown, False
    live = {s.status for s in row.sessions if s.status not in (ENDED, ERROR)}
    return shown, live <= {IDLE}


async def run_check(
    boxes: BoxCore, host_name: str, record: WorkRecord, name: str, command: str, work: str
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
