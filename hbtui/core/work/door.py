"""A box's work as the front ends reach it (`service.work`): what a repository would put
in, the box's diff, and its pull, each checked for its box and host (a pull holds the box).
A box made with its repository is the Service's `new`: that spans boxes and work.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hbtui.core.boxes.core import BoxCore
from hbtui.core.boxes.guard import Guard
from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import RepoSeed
from hbtui.core.work import copy as work_copy
from hbtui.core.work.book import WorkBook
from hbtui.core.work.diff import WorkDiff, diff
from hbtui.core.work.operations import PullResult, pull
from hbtui.events import Report, ignore
from hbtui.names import LOCAL


class Work:
    """Work in and out of boxes: the seed a repository gives, diff, pull."""

    def __init__(self, core: BoxCore) -> None:
        self._core = core
        self._guard = Guard(core)
        self._book = WorkBook(core.paths)

    async def repo_seed(self, text: str) -> RepoSeed:
        """What `new --repo PATH[@REF]` would put in the box (the repository is only read)."""
        return await gitops.resolve_seed(text)

    async def repo_copies(self, seed: RepoSeed, paths: Sequence[str]) -> tuple[str, ...]:
        """`new --copy PATH...` checked against the seed's work tree before any box is
        made: each one's place in it (a UsageError names the first refused)."""
        return tuple(c.place for c in await work_copy.check(seed.repo, paths))

    async def diff(self, name: str, host: str = LOCAL, *, patch: bool = True) -> WorkDiff:
        """The box's work since its seed: commits, changed files and (unless only the
        stat is asked for) the patch, uncommitted changes included."""
        self._guard.box(name, host)
        return await diff(self._core, self._book, name, host, patch=patch)

    async def pull(
        self,
        name: str,
        host: str = LOCAL,
        *,
        wip: bool = False,
        repo: Path | None = None,
        report: Report = ignore,
    ) -> PullResult:
        """Fetch the box's branches into the host repository (refs/remotes/box/BOX/*)."""
        async with self._guard.holding(name, host, "pull"):
            return await pull(self._core, self._book, name, host, wip=wip, repo=repo, report=report)
