"""Work in and out of boxes: a host repository's history into a box (`new --repo`), the
box's work seen (`diff`) and taken back (`pull`) without the box ever holding a git
credential or pushing anything.

The host's record of each box's work is hbtui.core.work.book; `diff` is
hbtui.core.work.diff.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TypeVar

from hbtui.core.boxes.core import BoxCore
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import BundleRefused, RepoSeed
from hbtui.core.foundation.registry import FAILED, WORK_MISSING
from hbtui.core.foundation.scratch import scratch
from hbtui.core.foundation.shield import to_the_end
from hbtui.core.foundation.specs import WorkRequest
from hbtui.core.work import agent as work_agent
from hbtui.core.work import box as work_box
from hbtui.core.work import copy as work_copy
from hbtui.core.work import intake
from hbtui.core.work.book import (
    SHA,
    WorkBook,
    WorkError,
    WorkRecord,
    count_said,
    reaching,
    work_record,
)
from hbtui.core.work.setup import SetupFailed, run_setup, setup_seconds
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Notice, Phase, Report, ignore

AGENTS = ("claude", "codex", "hermes")
TASK_MAX = 64 * 1024
PULL_MAX_ENV = "HBTUI_PULL_MAX_BYTES"  # the cap on a pulled bundle and on any file in it
PULL_MAX_DEFAULT = 1 << 30
A = TypeVar("A")
B = TypeVar("B")


def pull_max() -> int:
    """The cap on what a box may send back (`HBTUI_PULL_MAX_BYTES`, default 1 GiB)."""
    text = os.environ.get(PULL_MAX_ENV, "")
    if not text:
        return PULL_MAX_DEFAULT
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{PULL_MAX_ENV} must be a number of bytes, not {text!r}")
    return int(text)


@dataclass(frozen=True)
class PullResult:
    box: str
    host: str
    repo: str
    refs: tuple[tuple[str, str], ...]  # (host ref, commit)
    uncommitted: int
    wip: str  # the commit the uncommitted changes were pulled as ("" without --wip)
    bytes: int

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["refs"] = [{"ref": ref, "commit": sha} for ref, sha in self.refs]
        return data


def clone_dir(seed: RepoSeed) -> str:
    return f"{work_box.WORK_DIR}/{seed.folder}"


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


async def _alongside(main: Awaitable[A], side: Awaitable[B]) -> tuple[A, B]:
    """`main`, with `side` running meanwhile; when `main` fails, `side` is ended first."""
    running = asyncio.ensure_future(side)
    try:
        first = await main
    except BaseException:
        running.cancel()
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await running
        raise
    return first, await running


async def seed_box(
    boxes: BoxCore, book: WorkBook, name: str, host_name: str, request: WorkRequest,
    report: Report = ignore,
) -> WorkRecord:  # fmt: skip
    """Clone the seed into the box on branch hb/BOX, record it, copy the named files in,
    run the repository's setup, start the agent."""
    host = await boxes.hosts.get(host_name)
    seed = request.seed
    record = WorkRecord(str(seed.repo), seed.seed, seed.label, clone_dir(seed), branch_name(name))
    guest_tmp = f"/tmp/hbtui-seed-{os.getpid()}"
    report(Phase(f"putting {seed.repo} ({seed.label} at {seed.seed[:12]}) in {name}"))
    with scratch(boxes.paths, "seed") as folder:
        bundle = await gitops.seed_bundle(seed, folder)
        await host.engine.exec(name, ["install", "-d", "-m", "0755", guest_tmp], timeout=60)
        try:
            await host.engine.cp_in(name, bundle, f"{guest_tmp}/seed.bundle", mode="0644")
            answer = await work_box.run_step(
                host, name, work_box.SEED_SCRIPT,
                [f"{guest_tmp}/seed.bundle", record.clone, record.branch, seed.seed, name],
                cap=64 * 1024,
            )  # fmt: skip
            if answer.first("exists") is not None:
                raise WorkError(f"{record.clone} already exists in box {name}")
            if answer.returncode != 0 or answer.first("head") != seed.seed:
                raise WorkError(f"cloning the seed in box {name} failed: {answer.why()}")
            book.put(host_name, name, record)
            if request.copy:
                await work_copy.put(
                    host, name, record.clone, seed.repo, request.copy, folder, guest_tmp, report
                )
            if request.setup:  # SetupFailed: the box stays, its agent not started
                await run_setup(host, name, record.clone, request.agent, report)
            if request.agent:
                if (
                    unkeyed := work_agent.unkeyed(boxes, name, host_name, request.agent)
                ) is not None:
                    report(Notice(unkeyed))
                why = await work_agent.start(
                    host, name, record.clone, request.agent, request.task, folder
                )
                if why is not None:
                    raise WorkError(f"starting {request.agent} in box {name} failed: {why}")
        finally:
            await host.engine.exec(name, ["rm", "-rf", "--", guest_tmp], timeout=60)
    return record


async def branch_work(
    boxes: BoxOperations, book: WorkBook, source: WorkRecord, src: str, name: str, host_name: str,
    report: Report = ignore, *, setup: bool = True,
) -> WorkRecord:  # fmt: skip
    """A branch of a box with a clone: its copy of the clone's branch hb/SRC becomes
    hb/NAME (and the commit identity hbtui gave SRC, NAME's); the seed stays the
    source's, so the branch's work is measured from where the source's began; then the
    repository's setup runs in it (`setup`). A branch whose work cannot be carried over
    is removed again: nothing is left half-made (a failed setup keeps it)."""

    async def carry() -> WorkRecord:
        record = await _carry_work(boxes.core, book, source, src, name, host_name)
        if setup:
            host = await boxes.core.hosts.get(host_name)
            await run_setup(host, name, record.clone, "", report)
        return record

    return await work_into(boxes, book, name, host_name, carry, report)


async def work_into(
    boxes: BoxOperations, book: WorkBook, name: str, host_name: str,
    put: Callable[[], Awaitable[WorkRecord]], report: Report,
) -> WorkRecord:  # fmt: skip
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


async def _carry_work(
    boxes: BoxCore, book: WorkBook, source: WorkRecord, src: str, name: str, host_name: str
) -> WorkRecord:
    record = replace(source, branch=branch_name(name))
    host = await boxes.hosts.get(host_name)
    answer = await work_box.run_step(
        host, name, work_box.BRANCH_SCRIPT,
        [record.clone, source.branch, record.branch, src, name], cap=64 * 1024,
    )  # fmt: skip
    if answer.first("noclone") is not None:
        raise WorkError(f"box {src} has no clone at {record.clone} to branch")
    if answer.returncode != 0:
        raise WorkError(f"naming the branch {record.branch} in box {name} failed: {answer.why()}")
    book.put(host_name, name, record)
    return record


def _repo(record: WorkRecord, repo: Path | None) -> Path:
    path = Path(repo).expanduser().absolute() if repo is not None else Path(record.repo)
    if not path.is_dir():
        raise UsageError(f"the repository {path} is not there; name it with --repo PATH")
    return path


async def _take(
    taking: intake.PackIntake, name: str, seed: str, cap: int, *, wip: bool, wip_commit: str,
    offered: list[str],
) -> tuple[tuple[str, str], ...]:  # fmt: skip
    """The bundle the box sent, checked and taken into the repository: the refs that
    landed (none when the box made nothing since the seed: its pack is empty, and its
    branches, if any, still pass every check)."""
    try:
        checked = await intake.check_bundle(
            taking, seed=seed, blob_max=cap, wip=wip, offered=offered
        )
    except BundleRefused:
        # A repository without the seed fails every bundle's verify: the box is not at fault.
        if not await gitops.ref_exists(taking.repo, f"{seed}^{{commit}}"):
            raise UsageError(
                f"{taking.repo} does not have {name}'s seed commit {seed[:12]}; pull into the "
                "repository the box was made from (--repo PATH)"
            ) from None
        raise
    heads = checked.heads
    if wip and wip_commit and not any(ref == gitops.WIP_REF for _, ref in heads):
        raise BundleRefused("the box's bundle left out its uncommitted changes: refused")
    if heads:
        await to_the_end(intake.take_in(taking.repo, checked, name))
    return tuple((gitops.target_ref(name, ref), sha) for sha, ref in heads)


async def pull(
    boxes: BoxCore,
    book: WorkBook,
    name: str,
    host_name: str,
    *,
    wip: bool,
    repo: Path | None,
    report: Report = ignore,
) -> PullResult:
    """The box's branches into the host repository under refs/remotes/box/BOX/, once the
    bundle has passed every check (see hbtui.core.work.intake); a refusal changes nothing."""
    record = work_record(boxes, book, name, host_name)
    target = await gitops.repo_top(_repo(record, repo))
    cap = pull_max()
    host = await boxes.hosts.get(host_name)

    async def meanwhile() -> str:
        # Once the box's step has started: the first line of progress may load the
        # terminal's renderer (tens of ms), which then costs no time the box needs.
        report(Phase(f"bundling the work in {name}"))
        return await gitops.ref_exists(target, gitops.target_ref(name, gitops.WIP_REF))

    with scratch(boxes.paths, "pull") as folder:
        # What the host repository's side needs of git is asked while the box bundles,
        # and the box's pack is indexed as it arrives.
        objects = asyncio.ensure_future(gitops.objects_dir(target))
        try:
            # What the host has from the box already (an earlier pull's): the box's
            # bundle builds on it, and sends only what is new.
            had = await gitops.box_commits(target, name, most=intake.BRANCH_MAX)
            offered = [sha for sha in had if sha != record.seed]
            async with intake.PackIntake(target, objects, folder) as taking:
                with reaching(name):
                    (answer, size), old_wip = await _alongside(
                        work_box.fetch_bundle(
                            host, name,
                            [record.clone, record.seed, "1" if wip else "0", *offered],
                            taking.feed, cap,
                        ),
                        meanwhile(),
                    )  # fmt: skip
                if answer.first("noclone") is not None:
                    raise WorkError(f"box {name} has no clone at {record.clone}")
                dirty = count_said(answer.first("dirty"))
                wip_commit = answer.first("wip") or ""
                refs: tuple[tuple[str, str], ...] = ()
                if answer.first("nothing") is None:  # else: no branch at all, nothing sent
                    if answer.returncode != 0 or answer.first("end") is None:
                        raise WorkError(f"bundling the work in box {name} failed: {answer.why()}")
                    report(Phase(f"checking the bundle ({size} bytes)"))
                    refs = await _take(
                        taking, name, record.seed, cap, wip=wip, wip_commit=wip_commit,
                        offered=offered,
                    )  # fmt: skip
        finally:
            objects.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await objects
        if old_wip and not any(ref == old_wip for ref, _ in refs):
            await gitops.drop_ref(target, old_wip)
            if wip or not dirty:
                report(Notice(f"removed {old_wip}: {name} has no uncommitted changes now"))
            else:
                report(
                    Notice(
                        f"removed {old_wip}: it held an earlier pull's uncommitted changes "
                        "(--wip takes them as they are now)"
                    )
                )
    if dirty and not wip:
        report(Notice(f"{dirty} file(s) in {name} have uncommitted changes (not pulled; --wip)"))
    return PullResult(
        name, host_name, str(target), refs, dirty, wip_commit if SHA.fullmatch(wip_commit) else "",
        size,
    )  # fmt: skip
