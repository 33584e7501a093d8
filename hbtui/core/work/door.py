"""A box's work as the front ends reach it (`service.work`): what a repository would put
in, the box's diff, its pull and its pull request, each checked for its box and host (a
pull or a pr holds the box); each picks one of the box's repositories (`repo`: a name or
a path) when it has several. A box made with its repository is the Service's `new`: that
spans boxes and work.

Each verb's module loads when that verb runs: a pull's start-up is most of what a pull
that brings one commit costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.core.boxes.core import BoxCore
from hbtui.core.boxes.guard import Guard
from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import RepoSeed
from hbtui.core.work.book import BoxWork, WorkBook, WorkRecord, box_work, pick
from hbtui.events import Report, ignore
from hbtui.names import LOCAL

if TYPE_CHECKING:
    from hbtui.core.work.diff import WorkDiff
    from hbtui.core.work.pr import PrRequest, PrResult
    from hbtui.core.work.pull import PullResult


class Work:
    """Work in and out of boxes: the seed a repository gives, diff, pull."""

    def __init__(self, core: BoxCore) -> None:
        self._core = core
        self._guard = Guard(core)
        self._book = WorkBook(core.paths)

    async def repo_seed(self, text: str) -> RepoSeed:
        """What `new --repo PATH[@REF]` would put in the box (the repository is only read)."""
        return await gitops.resolve_seed(text)

    async def repo_seeds(self, texts: Sequence[str]) -> tuple[RepoSeed, ...]:
        """What `new --repo A --repo B` would put in the box: one clone a repository."""
        from hbtui.core.work.operations import check_seeds

        seeds = tuple([await gitops.resolve_seed(text) for text in texts])
        check_seeds(seeds)
        return seeds

    async def repo_copies(self, seed: RepoSeed, paths: Sequence[str]) -> tuple[str, ...]:
        """`new --copy PATH...` checked against the seed's work tree before any box is
        made: each one's place in it (a UsageError names the first refused)."""
        from hbtui.core.work import copy as work_copy

        return tuple(c.place for c in await work_copy.check(seed.repo, paths))

    def record(self, name: str, host: str = LOCAL) -> BoxWork:
        """What the host recorded of the box's work: its repositories and its task (one
        line for a box made without a repository)."""
        self._guard.box(name, host)
        return box_work(self._core, self._book, name, host)

    def _pick(self, name: str, host: str, repo: str | None) -> tuple[WorkRecord, Path | None]:
        return pick(box_work(self._core, self._book, name, host), name, repo)

    async def diff(
        self, name: str, host: str = LOCAL, *, patch: bool = True, repo: str | None = None
    ) -> WorkDiff:
        """The box's work since its seed: commits, changed files and (unless only the
        stat is asked for) the patch, uncommitted changes included."""
        from hbtui.core.work.diff import diff

        self._guard.box(name, host)
        record, _ = self._pick(name, host, repo)
        return await diff(self._core, record, name, host, patch=patch)

    async def pull(
        self,
        name: str,
        host: str = LOCAL,
        *,
        wip: bool = False,
        repo: str | None = None,
        report: Report = ignore,
    ) -> PullResult:
        """Fetch the box's branches into the host repository (refs/remotes/box/BOX/*)."""
        from hbtui.core.work.pull import host_repo, pull

        async with self._guard.holding(name, host, "pull"):
            record, moved = self._pick(name, host, repo)
            target = await host_repo(record, moved)
            return await pull(self._core, record, target, name, host, wip=wip, report=report)

    async def pr(
        self,
        name: str,
        host: str = LOCAL,
        request: PrRequest | None = None,
        *,
        repo: str | None = None,
        report: Report = ignore,
    ) -> PrResult:
        """Pull the box's work, push its branch to the host repository's remote with the
        host's credentials, and open a pull request when gh can (see hbtui.core.work.pr)."""
        from hbtui.core.work.operations import branch_name
        from hbtui.core.work.pr import PrRequest, check_names, open_pr
        from hbtui.core.work.pull import host_repo

        request = request or PrRequest()
        check_names(request.remote, request.branch or branch_name(name))
        async with self._guard.holding(name, host, "pr"):
            work = box_work(self._core, self._book, name, host)
            record, moved = pick(work, name, repo)
            target = await host_repo(record, moved)
            return await open_pr(self._core, record, target, name, host, request, work.task, report)
