"""Work into boxes: host repositories' history into a box (`new --repo`), carried on to
its branches (`branch`), without the box ever holding a git credential.

The host's record of each box's work is hbtui.core.work.book; `diff` is
hbtui.core.work.diff, `pull` hbtui.core.work.pull, `pr` hbtui.core.work.pr.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path

from hbtui.core.boxes.core import BoxCore
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import RepoSeed
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.registry import FAILED, WORK_MISSING
from hbtui.core.foundation.scratch import scratch
from hbtui.core.foundation.shield import to_the_end
from hbtui.core.foundation.specs import WorkRequest
from hbtui.core.work import agent as work_agent
from hbtui.core.work import box as work_box
from hbtui.core.work import copy as work_copy
from hbtui.core.work.book import BoxWork, WorkBook, WorkError, WorkRecord
from hbtui.core.work.setup import SetupFailed, run_setup, setup_seconds
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Notice, Phase, Report, ignore

AGENTS = ("claude", "codex", "hermes")
TASK_MAX = 64 * 1024


def clone_dir(seed: RepoSeed) -> str:
    return f"{work_box.WORK_DIR}/{seed.folder}"


def clone_dirs(seeds: Sequence[RepoSeed]) -> list[str]:
    """Each seed's clone folder in the box, its name made unique (proj, proj-2)."""
    taken: set[str] = set()
    dirs = []
    for seed in seeds:
        folder, n = seed.folder, 1
        while folder in taken:
            n += 1
            folder = f"{seed.folder}-{n}"
        taken.add(folder)
        dirs.append(f"{work_box.WORK_DIR}/{folder}")
    return dirs


def check_seeds(seeds: Sequence[RepoSeed]) -> None:
    """One clone a repository: a second's branches would land on the first's refs."""
    seen: set[Path] = set()
    for seed in seeds:
        if seed.repo in seen:
            raise UsageError(
                f"--repo {seed.repo} is given twice: a box holds one clone of a repository"
            )
        seen.add(seed.repo)


def branch_name(box: str) -> str:
    return f"hb/{box}"


def check_task(task: str, agent: str) -> None:
    if agent and agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}: one of {', '.join(AGENTS)}")
    if task and not agent:
        raise UsageError("a task needs an agent to do it: add --agent claude|codex|hermes")
    if len(task.encode()) > TASK_MAX:
        raise UsageError(f"the task is longer than {TASK_MAX} bytes")
    if "\x00" in task:
        raise UsageError("the task holds a NUL character")
    if agent:
        work_agent.wait_seconds()  # a bad HBTUI_AGENT_WAIT_SECONDS stops it before any box
    setup_seconds()  # and so does a bad HBTUI_SETUP_SECONDS


async def seed_box(
    boxes: BoxCore, book: WorkBook, name: str, host_name: str, request: WorkRequest,
    report: Report = ignore,
) -> BoxWork:  # fmt: skip
    """Clone each seed into the box on branch hb/BOX, record it, copy the named files
    into the first clone, run each repository's setup, start the agent in the first."""
    host = await boxes.hosts.get(host_name)
    records = tuple(
        WorkRecord(str(seed.repo), seed.seed, seed.label, clone, branch_name(name))
        for seed, clone in zip(request.seeds, clone_dirs(request.seeds), strict=True)
    )
    guest_tmp = f"/tmp/hbtui-seed-{os.getpid()}"
    with scratch(boxes.paths, "seed") as folder:
        await host.engine.exec(name, ["install", "-d", "-m", "0755", guest_tmp], timeout=60)
        try:
            for n, (seed, record) in enumerate(zip(request.seeds, records, strict=True)):
                await _clone(host, name, seed, record, folder / f"seed-{n}", guest_tmp, report)
                book.put(host_name, name, BoxWork(records[: n + 1], request.task))
            first = records[0]
            if request.copy:
                await work_copy.put(
                    host, name, first.clone, request.seed.repo, request.copy, folder, guest_tmp,
                    report,
                )  # fmt: skip
            if request.setup:  # SetupFailed: the box stays, its agent not started
                for record in records:
                    await run_setup(host, name, record.clone, request.agent, report)
            if request.agent:
                if (
                    unkeyed := work_agent.unkeyed(boxes, name, host_name, request.agent)
                ) is not None:
                    report(Notice(unkeyed))
                why = await work_agent.start(
                    host, name, first.clone, request.agent, request.task, folder
                )
                if why is not None:
                    raise WorkError(f"starting {request.agent} in box {name} failed: {why}")
        finally:
            await host.engine.exec(name, ["rm", "-rf", "--", guest_tmp], timeout=60)
    return BoxWork(records, request.task)


async def _clone(
    host: Host, name: str, seed: RepoSeed, record: WorkRecord, folder: Path, guest_tmp: str,
    report: Report,
) -> None:  # fmt: skip
    """One seed's bundle into the box, cloned at `record.clone` on `record.branch`."""
    report(Phase(f"putting {seed.repo} ({seed.label} at {seed.seed[:12]}) in {name}"))
    folder.mkdir()
    bundle = await gitops.seed_bundle(seed, folder)
    guest = f"{guest_tmp}/{folder.name}.bundle"
    await host.engine.cp_in(name, bundle, guest, mode="0644")
    answer = await work_box.run_step(
        host, name, work_box.SEED_SCRIPT,
        [guest, record.clone, record.branch, seed.seed, name], cap=64 * 1024,
    )  # fmt: skip
    if answer.first("exists") is not None:
        raise WorkError(f"{record.clone} already exists in box {name}")
    if answer.returncode != 0 or answer.first("head") != seed.seed:
        raise WorkError(f"cloning the seed in box {name} failed: {answer.why()}")


async def branch_work(
    boxes: BoxOperations, book: WorkBook, source: BoxWork, src: str, name: str, host_name: str,
    report: Report = ignore, *, setup: bool = True,
) -> BoxWork:  # fmt: skip
    """A branch of a box with clones: in its copy of each clone, the branch hb/SRC becomes
    hb/NAME (and the commit identity hbtui gave SRC, NAME's); the seeds stay the
    source's, so the branch's work is measured from where the source's began; then each
    repository's setup runs in it (`setup`). A branch whose work cannot be carried over
    is removed again: nothing is left half-made (a failed setup keeps it)."""

    async def carry() -> BoxWork:
        host = await boxes.core.hosts.get(host_name)
        records: tuple[WorkRecord, ...] = ()
        for record in source.repos:
            records += (await _carry_work(host, record, src, name),)
            book.put(host_name, name, BoxWork(records, source.task))
        if setup:
            for record in records:
                await run_setup(host, name, record.clone, "", report)
        return BoxWork(records, source.task)

    return await work_into(boxes, book, name, host_name, carry, report)


async def work_into(
    boxes: BoxOperations, book: WorkBook, name: str, host_name: str,
    put: Callable[[], Awaitable[BoxWork]], report: Report,
) -> BoxWork:  # fmt: skip
    """Put the work into a box made kept provisioning (`put`), then make it ready. Any
    failure or cancel removes the box again, so nothing is left half-made; killed, it
    is left failed, saying its repository never went in (written ahead: a view shows
    it only once the box failed); a box that cannot be removed is marked failed. A
    failed setup is not half-made: the box is made ready, with its clone, and the
    failure raised then."""
    setup_failed: SetupFailed | None = None
    try:
        await boxes.core.registry.update(name, host_name, error=WORK_MISSING)
        try:
            record = await put()
        except SetupFailed as exc:
            setup_failed = exc
        await boxes.making.ready(name, host_name, report)
    except BaseException:
        report(Phase(f"removing {name}: its work could not be put in"))
        try:
            await to_the_end(boxes.remove(name, host_name))
        except (HbtuiError, OSError) as exc:
            report(Notice(f"{name} stays, failed: removing it failed: {exc}"))
            await to_the_end(
                boxes.core.registry.update(name, host_name, status=FAILED, owner_pid=0)
            )
        book.drop(host_name, name)
        raise
    if setup_failed is not None:
        raise setup_failed
    return record


async def _carry_work(host: Host, source: WorkRecord, src: str, name: str) -> WorkRecord:
    record = replace(source, branch=branch_name(name))
    answer = await work_box.run_step(
        host, name, work_box.BRANCH_SCRIPT,
        [record.clone, source.branch, record.branch, src, name], cap=64 * 1024,
    )  # fmt: skip
    if answer.first("noclone") is not None:
        raise WorkError(f"box {src} has no clone at {record.clone} to branch")
    if answer.returncode != 0:
        raise WorkError(f"naming the branch {record.branch} in box {name} failed: {answer.why()}")
    return record
