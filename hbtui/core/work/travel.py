"""A box's work record in its archive (`WorkLink`, the archives' carrier): a save of a box
made with a repository carries the host's record (each repository's path, seed, clone
folder and branch; the task), and a load keeps it for the new box, so its diff, pull and
`try keep` work.

What comes out of an archive is untrusted, whoever made it: every field is checked as the
save wrote it (an absolute repository path, a seed commit id, the clone under the work
folder, a branch hb/NAME), and a record that is not is refused before any box is made.
The repository is the host's: the archive's path when it is a git work tree here,
`load --repo PATH` to name another (of a box with one repository); a repository that is
not here still loads, saying how to pull elsewhere.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path, PurePosixPath

from hbtui import boxtext
from hbtui.core.foundation import git as gitops
from hbtui.core.work.book import SHA, BoxWork, WorkBook, WorkError, WorkRecord
from hbtui.core.work.box import WORK_DIR
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Notice, Phase, Report
from hbtui.names import host_flag, name_problem
from hbtui.paths import Paths, UnreadableFile

KEY = "work"
PATH_MAX = 4096
REF_MAX = 1024
REPOS_MAX = 64
TASK_MAX = 64 * 1024  # as `new --task` takes one
_FOLDER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,99}")  # as RepoSeed.folder makes them
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # C1 too: a terminal may read \x9b as CSI


class RecordRefused(WorkError):
    """An archive's work record that is not one a save writes."""


def _refused(why: str) -> RecordRefused:
    return RecordRefused(f"the archive's work record is refused: {why} (nothing was made)")


def checked_work(data: object) -> BoxWork:
    """The box's work an archive carries ({"repos": [...], "task": ...}, or one
    repository's fields alone, as the first saves wrote it), each record checked."""
    if isinstance(data, dict) and "repos" in data:
        repos, task = data.get("repos"), data.get("task", "")
        if not isinstance(repos, list) or not 1 <= len(repos) <= REPOS_MAX:
            raise _refused(f"its repositories are not a list of 1 to {REPOS_MAX}")
        if not isinstance(task, str) or len(task) > TASK_MAX:
            raise _refused(f"the task is not text of at most {TASK_MAX} characters")
        records = tuple(checked(r) for r in repos)
        if len({r.clone for r in records}) != len(records):
            raise _refused("two repositories share a clone folder")
        return BoxWork(records, task)
    return BoxWork((checked(data),))


def checked(data: object) -> WorkRecord:
    """One repository's record an archive carries, every field as a save writes it."""
    if not isinstance(data, dict):
        raise _refused("not an object")
    fields = {k: data.get(k) for k in ("repo", "seed", "ref", "clone", "branch")}
    for key, value in fields.items():
        if not isinstance(value, str) or not value:
            raise _refused(f"{key} is missing or not text")
    repo, seed, ref, clone, branch = (str(v) for v in fields.values())
    if len(repo) > PATH_MAX or _CONTROL.search(repo):
        raise _refused(f"the repository path is longer than {PATH_MAX} or holds control codes")
    if not PurePosixPath(repo).is_absolute() or os.path.normpath(repo) != repo:
        raise _refused(
            f"the repository path {boxtext.line(repo)[:200]!r} is not absolute and plain"
        )
    if not SHA.fullmatch(seed):
        raise _refused("the seed is not a commit id")
    if len(ref) > REF_MAX or _CONTROL.search(ref):
        raise _refused(f"the ref is longer than {REF_MAX} or holds control codes")
    folder = clone.removeprefix(f"{WORK_DIR}/")
    if folder == clone or not _FOLDER.fullmatch(folder):
        raise _refused(f"the clone folder is not one folder under {WORK_DIR}")
    if not branch.startswith("hb/") or name_problem(branch[3:]):
        raise _refused("the branch is not hb/ and a box name")
    return WorkRecord(repo, seed, ref, clone, branch)


class WorkLink:
    """The carrier of a box's work record through save and load."""

    def __init__(self, paths: Paths) -> None:
        self._book = WorkBook(paths)

    def note(self, host: str, name: str, report: Report) -> dict[str, object]:
        try:
            record = self._book.get(host, name)
        except UnreadableFile as exc:
            report(Notice(f"{exc}: the archive carries no repository link"))
            return {}
        return {} if record is None else {KEY: record.to_json()}

    async def arriving(
        self, note: dict[str, object], repo: Path | None, report: Report
    ) -> Callable[[str, str, Report], None]:
        """A refusal (a record not as a save writes it, a --repo that is no repository)
        comes now, before the box is made; what it returns keeps the record then."""
        carried = note.get(KEY)
        if carried is None:
            if repo is not None:
                raise UsageError(
                    "--repo: the archive carries no repository link (its box was made "
                    "without --repo, or saved by an hbtui before links travelled)"
                )
            return _nothing
        work = checked_work(carried)
        if repo is not None:
            if len(work.repos) > 1:
                raise UsageError(
                    f"--repo: the archive's box has {len(work.repos)} repositories; load it "
                    "without --repo, then pull each with: hbtui pull NAME --repo PATH"
                )
            top = await gitops.repo_top(Path(repo).expanduser().absolute())
            work = replace(work, repos=(replace(work.first, repo=str(top)),))
        lacks = [await _lack(record, moved=repo is not None) for record in work.repos]
        book = self._book

        def land(host: str, name: str, report: Report) -> None:
            book.put(host, name, work)
            for record, lack in zip(work.repos, lacks, strict=True):
                if not lack:  # pull and pr will write to it: say which one it is
                    report(Phase(f"{name}'s work is linked to {record.repo}"))
            for lack in filter(None, lacks):
                report(
                    Notice(f"{name}: {lack} with hbtui pull {name}{host_flag(host)} --repo PATH")
                )

        return land


async def _lack(record: WorkRecord, *, moved: bool) -> str:
    """What the loaded box's pull of this repository will need, said once it is loaded."""
    if not moved and not await _is_work_tree(Path(record.repo)):
        return f"its repository {record.repo} is not here: diff works; pull"
    if not await gitops.ref_exists(Path(record.repo), f"{record.seed}^{{commit}}"):
        return f"{record.repo} lacks its seed commit {record.seed[:12]}: diff works; pull"
    return ""


def _nothing(host: str, name: str, report: Report) -> None:
    """An archive without a work record: the box has none."""


async def _is_work_tree(path: Path) -> bool:
    try:
        return await gitops.repo_top(path) == path
    except HbtuiError:
        return False
