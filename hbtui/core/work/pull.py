"""`hbtui pull`: a box's branches back into the host repository as remote-tracking refs,
the box's bundle checked in full before anything lands (hbtui.core.work.intake); a
refusal leaves the repository exactly as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import BundleRefused
from hbtui.core.foundation.scratch import scratch
from hbtui.core.foundation.shield import to_the_end
from hbtui.core.work import box as work_box
from hbtui.core.work import intake
from hbtui.core.work.book import SHA, WorkError, WorkRecord, count_said, reaching
from hbtui.errors import UsageError
from hbtui.events import Notice, Phase, Report, ignore

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


async def host_repo(record: WorkRecord, moved: Path | None) -> Path:
    """The top of the host repository a box's work goes to: the recorded one, or where
    `--repo PATH` says it is now."""
    path = moved if moved is not None else Path(record.repo)
    if not path.is_dir():
        raise UsageError(f"the repository {path} is not there; name it with --repo PATH")
    return await gitops.repo_top(path)


async def _take(
    taking: intake.PackIntake, name: str, seed: str, cap: int, *, wip: bool, wip_commit: str,
    offered: list[str], holders: Awaitable[frozenset[str]],
) -> tuple[tuple[str, str], ...]:  # fmt: skip
    """The bundle the box sent, checked and taken into the repository: the refs that
    landed (none when the box made nothing since the seed: its pack is empty, and its
    branches, if any, still pass every check)."""
    try:
        checked = await intake.check_bundle(
            taking, seed=seed, blob_max=cap, wip=wip, offered=offered, holders=await holders
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
    record: WorkRecord,
    target: Path,
    name: str,
    host_name: str,
    *,
    wip: bool,
    report: Report = ignore,
) -> PullResult:
    """The branches of the box's clone `record` into the host repository `target` under
    refs/remotes/box/BOX/, once the bundle has passed every check (see
    hbtui.core.work.intake); a refusal changes nothing."""
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
        holders: asyncio.Future[frozenset[str]] | None = None
        try:
            # What the host has from the box already (an earlier pull's): the box's
            # bundle builds on it, and sends only what is new; which of it holds the
            # seed is read meanwhile, so that only what is new is walked then.
            had = await gitops.box_commits(target, name, most=intake.BRANCH_MAX)
            offered = [sha for sha in had if sha != record.seed]
            holders = asyncio.ensure_future(intake.seed_holders(target, record.seed, offered))
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
                        offered=offered, holders=holders,
                    )  # fmt: skip
        finally:
            for asked in (objects, holders):
                if asked is not None:
                    asked.cancel()
                    with contextlib.suppress(Exception, asyncio.CancelledError):
                        await asked
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
