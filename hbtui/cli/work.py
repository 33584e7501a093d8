"""Work verbs: diff (what the box's agent did) and pull (its branches into the host
repository); `new --repo` reads its options here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui import boxtext
from hbtui.cli.output import Invocation, table
from hbtui.errors import UsageError

if TYPE_CHECKING:
    from hbtui.core.foundation import WorkRequest
    from hbtui.core.tries import TryRecord, TryRow
    from hbtui.core.work import AgentStart, WorkDiff


def task_text(inv: Invocation) -> str:
    """The first prompt, from --task TEXT or --task-file FILE (one of them, or none)."""
    from hbtui.core.work import TASK_MAX
    from hbtui.paths import UnreadableFile, read_state

    a = inv.args
    if a.task is not None and a.task_file is not None:
        raise UsageError("give the task as --task TEXT or --task-file FILE, not both")
    task: str = a.task or ""
    if a.task_file is not None:
        path = Path(a.task_file).expanduser()
        try:  # a FIFO or a device is refused before a byte is read, a huge file after 64 KiB
            data = read_state(path, TASK_MAX)
            if data is None:
                raise UsageError(f"the task file {path} does not exist")
            task = data.decode("utf-8")
        except UnreadableFile as exc:  # the user's own file: theirs to fix, not to move away
            why = exc.reason.removesuffix("; move it away")
            raise UsageError(f"the task file {exc.path}: {why}") from None
        except UnicodeDecodeError:
            raise UsageError(f"the task file {path} is not UTF-8 text") from None
    return task


def work_request(inv: Invocation) -> WorkRequest | None:
    """`new`'s --repo, --task/--task-file, --agent, --copy and --no-setup, checked before
    any box is made."""
    from hbtui.core.foundation import WorkRequest
    from hbtui.core.work import check_task

    a = inv.args
    task = task_text(inv)
    if not a.repo:
        if task or a.agent:
            raise UsageError("--task and --agent need --repo PATH (the work to do them in)")
        if a.copy or a.no_setup:
            raise UsageError("--copy and --no-setup need --repo PATH (the clone they are for)")
        return None
    check_task(task, a.agent or "")
    seed, *more = inv.call(inv.service.work.repo_seeds(a.repo))
    copy = inv.call(inv.service.work.repo_copies(seed, a.copy)) if a.copy else ()
    return WorkRequest(seed, task, a.agent or "", copy=copy, setup=not a.no_setup, more=tuple(more))


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
    a = inv.args
    diff = inv.call(inv.service.work.diff(a.name, inv.host, patch=not a.stat, repo=a.repo))

    def text() -> None:  # as git gives it, unwrapped: not through rich
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

    inv.show(diff.to_json(), text)
    return 0


def cmd_pull(inv: Invocation) -> int:
    a = inv.args
    with inv.reporter() as rep:
        result = inv.call(
            inv.service.work.pull(a.name, inv.host, wip=a.wip, repo=a.repo, report=rep)
        )

    def text() -> None:
        if not result.refs:
            sys.stdout.write(f"box {result.box} has no commits since its seed; nothing pulled\n")
        for ref, commit in result.refs:
            sys.stdout.write(f"{ref} -> {commit[:12]} in {result.repo}\n")

    inv.show(result.to_json(), text)
    return 0


def cmd_pr(inv: Invocation) -> int:
    from hbtui.core.work import PrRequest

    a = inv.args
    request = PrRequest(a.remote, a.branch or "", a.title or "", a.draft, prompt=sys.stdin.isatty())
    with inv.reporter() as rep:
        result = inv.call(inv.service.work.pr(a.name, inv.host, request, repo=a.repo, report=rep))

    def text() -> None:
        out = sys.stdout
        for ref, commit in result.pull.refs:
            out.write(f"{ref} -> {commit[:12]} in {result.pull.repo}\n")
        out.write(
            f"pushed {result.commit[:12]} ({len(result.commits)} commit(s)) to {result.remote} "
            f"as {result.branch}: {result.pushed}\n"
        )
        if result.url:
            out.write(f"{result.url}\n")
        else:
            out.write(f"{result.no_gh}; to open the pull request: {result.command}\n")

    inv.show(result.to_json(), text)
    return 0


def _try_new(inv: Invocation, words: list[str]) -> int:
    a = inv.args
    if len(words) != 2 or not words[0].isdigit():
        raise UsageError("try N NAME --repo PATH --task TEXT (see: hbtui try --help)")
    if not a.repo or (a.task is None and a.task_file is None):
        raise UsageError("try N NAME needs --repo PATH and --task TEXT (or --task-file FILE)")
    if len(a.repo) > 1:
        raise UsageError("try N NAME takes one --repo: each box works on one repository")
    request = work_request(inv)
    assert request is not None
    with inv.reporter() as rep:
        record, failed, starts = inv.call(
            inv.service.tries.new(
                int(words[0]), words[1], request, host=inv.host, check=a.check or "", report=rep
            )
        )
    return _made(inv, record, failed, f"started {request.agent} on the task", starts)


def branch_ways(inv: Invocation) -> int:
    """`branch SRC [NAME] --count N`: a try made of branches of a box with a clone."""
    a = inv.args
    if a.port is not None:
        raise UsageError("--port names one box's port; --count makes several (leave it out)")
    with inv.reporter() as rep:
        record, failed = inv.call(
            inv.service.tries.branch(
                a.source, a.count, a.name or "", inv.host, check=a.check or "",
                branchable=a.branchable, setup=not a.no_setup, report=rep,
            )
        )  # fmt: skip
    return _made(inv, record, failed, f"branched from {a.source}")


def _made(
    inv: Invocation, record: TryRecord, failed: dict[str, str], done: str,
    starts: dict[str, AgentStart] | None = None,
) -> int:  # fmt: skip
    """What a try (or a branch N ways) made, and how each box's agent started (a try's
    `done` is said only of an agent seen on its task); exit status 1 when a box could
    not be made or its agent ended."""
    starts = starts or {}

    def text() -> None:
        for box in record.boxes:
            if box in failed:  # made, but its setup failed: said below
                continue
            start = starts.get(box)
            if start is None or start.took:
                sys.stdout.write(f"✓ {box} {done}\n")
            else:
                mark = "✗" if start.ended else "?"
                sys.stdout.write(f"{mark} {box}: {start.message}\n")
        for box, why in failed.items():  # an error, which may quote the box
            sys.stdout.write(f"✗ {box}: {boxtext.line(why)}\n")
        if record.boxes:
            sys.stdout.write(f"see: hbtui try ls {record.name}\n")

    agents = {box: s.to_json() for box, s in starts.items()}
    inv.show({**record.to_json(), "failed": failed, "agents": agents}, text)
    return 1 if failed or any(s.ended for s in starts.values()) else 0


def _try_ls(inv: Invocation, words: list[str]) -> int:
    if len(words) != 2:
        raise UsageError("try ls NAME")
    record, rows = inv.call(inv.service.tries.rows(words[1], inv.host))
    inv.show(
        {"name": record.name, "check": record.check, "boxes": [r.to_json() for r in rows]},
        lambda: _try_table(inv, record, rows),
    )
    return 0


def _try_table(inv: Invocation, record: TryRecord, rows: list[TryRow]) -> None:
    from rich.text import Text

    made = table(("BOX", "AGENT", "COMMITS", "FILES", "+/-", "CHECK"))
    why: list[Text] = []  # a box's message goes under the table: a cell would widen its column
    for r in rows:
        if r.check is None:
            check = Text("-" if record.check else "")
        elif r.check.status is None:
            check = Text("could not run", style="red")
        else:
            check = Text(
                "pass" if r.check.passed else f"fail ({r.check.status})",
                style="green" if r.check.passed else "red",
            )
        if r.note:
            why.append(Text.assemble(f"{r.box}: ", (r.note, "yellow")))
        if r.error:
            made.add_row(Text(r.box), Text(r.agent), Text("-"), Text("-"), Text("-"), check)
            why.append(Text.assemble(f"{r.box}: ", (r.error, "red")))
            continue
        made.add_row(
            Text(r.box), Text(r.agent), Text(str(r.commits)), Text(str(r.files)),
            Text(f"+{r.added} -{r.deleted}"), check,
        )  # fmt: skip
    inv.out.print(made)
    for line in why:
        inv.out.print(line)


def _try_keep(inv: Invocation, words: list[str]) -> int:
    if len(words) != 2:
        raise UsageError("try keep NAME-K [--yes]")
    record, box = inv.service.tries.of(words[1], inv.host)
    others = [b for b in record.boxes if b != box]
    if others and not inv.args.yes:
        if not sys.stdin.isatty():
            raise UsageError(
                f"refusing to remove {', '.join(others)} without a terminal; use --yes"
            )
        answer = input(f"Pull {box}'s work and remove {', '.join(others)}? [y/N] ").strip()
        if answer.lower() not in ("y", "yes"):
            raise UsageError("not confirmed; nothing was changed")
    with inv.reporter() as rep:
        pulled, removed = inv.call(inv.service.tries.keep(box, inv.host, report=rep))

    def text() -> None:
        for ref, commit in pulled.refs:
            sys.stdout.write(f"{ref} -> {commit[:12]} in {pulled.repo}\n")
        sys.stdout.write(f"kept {box}; removed {', '.join(removed) or 'nothing'}\n")

    inv.show({"kept": box, "pull": pulled.to_json(), "removed": removed}, text)
    return 0 if inv.json or len(removed) == len(others) else 1  # JSON: `removed` says it


def cmd_try(inv: Invocation) -> int:
    words = list(inv.args.words)
    if words[0] == "ls":
        return _try_ls(inv, words)
    if words[0] == "keep":
        return _try_keep(inv, words)
    return _try_new(inv, words)
