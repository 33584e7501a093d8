"""Work verbs: diff (what the box's agent did) and pull (its branches into the host
repository); `new --repo` reads its options here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.cli.output import Invocation, print_json
from hbtui.errors import UsageError

if TYPE_CHECKING:
    from hbtui.core.work import WorkDiff, WorkRequest


def work_request(inv: Invocation) -> WorkRequest | None:
    """`new`'s --repo, --task/--task-file and --agent, checked before any box is made."""
    from hbtui.core.work import WorkRequest, check_task

    a = inv.args
    if a.task is not None and a.task_file is not None:
        raise UsageError("give the task as --task TEXT or --task-file FILE, not both")
    task = a.task or ""
    if a.task_file is not None:
        path = Path(a.task_file).expanduser()
        try:
            task = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"cannot read the task file {path}: {exc}") from None
    if a.repo is None:
        if task or a.agent:
            raise UsageError("--task and --agent need --repo PATH (the work to do them in)")
        return None
    check_task(task, a.agent or "")
    seed = inv.call(inv.service.repo_seed(a.repo))
    return WorkRequest(seed, task, a.agent or "")


def _stat_lines(diff: WorkDiff) -> list[str]:
    width = max((len(f.path) for f in diff.files), default=0)
    lines = []
    for f in diff.files:
        change = "binary" if f.added is None else f"+{f.added} -{f.deleted}"
        lines.append(f" {f.path.ljust(width)} | {change}")
    added = sum(f.added or 0 for f in diff.files)
    deleted = sum(f.deleted or 0 for f in diff.files)
    lines.append(f" {len(diff.files)} file(s) changed, +{added} -{deleted}")
    return lines


def cmd_diff(inv: Invocation) -> int:
    diff = inv.call(inv.service.diff(inv.args.name, inv.host, patch=not inv.args.stat))
    if inv.json:
        print_json(diff.to_json())
        return 0
    out = sys.stdout
    out.write(
        f"box {diff.box} on {diff.branch or '(detached)'}: {len(diff.commits)} commit(s) "
        f"since {diff.seed[:12]}, {diff.uncommitted} file(s) uncommitted\n"
    )
    for commit in diff.commits:
        out.write(f"  {commit.id[:12]} {commit.subject}\n")
    if inv.args.stat or not diff.patch:
        for line in _stat_lines(diff):
            out.write(line + "\n")
    else:
        out.write(diff.patch)
    return 0


def cmd_pull(inv: Invocation) -> int:
    a = inv.args
    repo = Path(a.repo) if a.repo else None
    with inv.reporter() as rep:
        result = inv.call(inv.service.pull(a.name, inv.host, wip=a.wip, repo=repo, report=rep))
    if inv.json:
        print_json(result.to_json())
        return 0
    if not result.refs:
        sys.stdout.write(f"box {result.box} has no commits since its seed; nothing pulled\n")
    for ref, commit in result.refs:
        sys.stdout.write(f"{ref} -> {commit[:12]} in {result.repo}\n")
    return 0
