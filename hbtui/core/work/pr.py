"""`hbtui pr`: a box's work pulled (as `pull`, every check kept), then pushed from the
host repository with the host's own git and credentials, and a pull request opened with
`gh` when it is installed and logged in. The box never sees a credential; what is pushed
is the pulled commit (its remote-tracking ref), never the host's work tree or branches,
and never forced.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from hbtui import boxtext
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation import git as gitops
from hbtui.core.work import push as host_tools
from hbtui.core.work.book import WorkError, WorkRecord
from hbtui.core.work.pull import PullResult, pull
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Phase, Report, ignore

COMMITS_SHOWN = 100  # in the pull request's body; the rest counted
TITLE_MAX = 100
BODY_MAX = 60_000  # GitHub takes 65,536 characters


@dataclass(frozen=True)
class PrRequest:
    """What `hbtui pr` is asked: where to push, under what name, and the request's title."""

    remote: str = "origin"
    branch: str = ""  # "" for the box's own branch name, hb/BOX
    title: str = ""  # "" for the task's first line (or the one commit's subject)
    draft: bool = False
    prompt: bool = False  # git may ask for a login on the user's terminal


@dataclass(frozen=True)
class PrResult:
    pull: PullResult
    remote: str
    branch: str
    commit: str
    commits: tuple[str, ...]  # "abbrev subject", oldest first
    pushed: str  # git's word: "new branch", "fast-forward", "up to date"
    url: str  # the pull request gh opened ("" when it did not)
    no_gh: str  # why gh did not open one ("" when it did)
    command: str  # what to run to open it by hand ("" when gh did)

    def to_json(self) -> dict[str, object]:
        return {
            "pull": self.pull.to_json(), "remote": self.remote, "branch": self.branch,
            "commit": self.commit, "commits": list(self.commits), "pushed": self.pushed,
            "url": self.url, "no_gh": self.no_gh, "command": self.command,
        }  # fmt: skip


def check_names(remote: str, branch: str) -> None:
    """A remote and a branch name git reads as names, never as options."""
    if not remote or remote.startswith("-"):
        raise UsageError(f"not a remote name: {remote!r}")
    if not gitops.plain_branch(branch) or len(branch) > gitops.REF_PART_MAX:
        raise UsageError(
            f"not a branch name: {branch!r} (letters, digits, '.', '_', '-' and '/' between "
            "parts, not starting with '-')"
        )


async def _commits(repo: Path, seed: str, tip: str) -> list[str]:
    listed = await gitops.git_out(
        repo, "log", "--reverse", "--no-decorate", "--format=%h %s", f"{seed}..{tip}", "--"
    )
    return [boxtext.line(line)[:300] for line in listed.splitlines()]


def title_for(request: PrRequest, task: str, commits: list[str], branch: str) -> str:
    if request.title:
        return request.title
    first = next((line.strip() for line in task.splitlines() if line.strip()), "")
    if not first and len(commits) == 1:
        first = commits[0].partition(" ")[2]
    first = first or f"{branch}: {len(commits)} commits"
    return first if len(first) <= TITLE_MAX else first[: TITLE_MAX - 1] + "…"


def body_for(name: str, record: WorkRecord, task: str, commits: list[str]) -> str:
    """The task as the description, then the commits (oneline)."""
    shown = [f"- {c}" for c in commits[:COMMITS_SHOWN]]
    if len(commits) > COMMITS_SHOWN:
        shown.append(f"- … and {len(commits) - COMMITS_SHOWN} more")
    tail = f"Commits made in hbtui box {name} on {record.seed[:12]} ({record.ref}):\n" + "\n".join(
        shown
    )
    room = BODY_MAX - len(tail) - 2
    task = task.strip()
    if len(task) > room:
        task = task[: room - 1] + "…"
    return f"{task}\n\n{tail}" if task else tail


async def open_pr(
    boxes: BoxCore, record: WorkRecord, target: Path, name: str, host_name: str,
    request: PrRequest, task: str, report: Report = ignore,
) -> PrResult:  # fmt: skip
    """Pull the box's work into `target`, push its branch's pulled tip to the remote, and
    open the pull request when gh can. The remote is checked first: a missing one changes
    nothing at all."""
    branch = request.branch or record.branch
    if not await host_tools.remote_exists(target, request.remote):
        raise UsageError(f"{target} has no remote {request.remote!r} (see: git remote -v)")
    pulled = await pull(boxes, record, target, name, host_name, wip=False, report=report)
    landed = gitops.target_ref(name, f"refs/heads/{record.branch}")
    tip = next((sha for ref, sha in pulled.refs if ref == landed), None)
    if tip is None:  # the pull lands only a branch with commits since the seed
        raise WorkError(
            f"box {name} has no commits on {record.branch} since its seed {record.seed[:12]}: "
            f"nothing to push (see: hbtui diff {name})"
        )
    commits = await _commits(target, record.seed, tip)
    report(Phase(f"pushing {landed} ({tip[:12]}) to {request.remote} as {branch}"))
    pushed = await host_tools.push(target, request.remote, tip, branch, prompt=request.prompt)
    title = title_for(request, task, commits, branch)
    args = ["--head", branch, "--title", title, *(["--draft"] if request.draft else [])]
    gh, no_gh = await host_tools.gh_ready(target)
    if gh is None:
        command = shlex.join(["gh", "pr", "create", *args])
        return PrResult(pulled, request.remote, branch, tip, tuple(commits), pushed, "", no_gh,
                        f"cd {shlex.quote(str(target))} && {command}")  # fmt: skip
    report(Phase(f"opening a pull request for {branch} with gh"))
    try:
        url = await host_tools.gh_create(
            gh, target, [*args, "--body", body_for(name, record, task, commits)]
        )
    except HbtuiError as exc:
        raise WorkError(f"pushed {branch} to {request.remote}, but {exc.message}") from None
    return PrResult(pulled, request.remote, branch, tip, tuple(commits), pushed, url, "", "")
