"""`hbtui diff`: a box's work since its seed, read in the box (commits, files, the patch),
every word of it checked on the host (the box's answer is untrusted)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from hbtui import boxtext
from hbtui.core.boxes.core import BoxCore
from hbtui.core.work import box as work_box
from hbtui.core.work.book import SHA, WorkError, WorkRecord, count_said, reaching

DIFF_MAX = 32 << 20
_NUM = re.compile(r"(-|\d+)\t(-|\d+)\t(.+)")


@dataclass(frozen=True)
class Commit:
    id: str
    subject: str


@dataclass(frozen=True)
class FileChange:
    path: str
    added: int | None  # None: a binary file
    deleted: int | None


@dataclass(frozen=True)
class WorkDiff:
    """`hbtui diff`: the box's commits since the seed, and every change since the seed
    (committed or not) file by file and, unless only the stat was asked for, as a patch."""

    box: str
    host: str
    repo: str
    seed: str
    head: str
    branch: str
    commits: tuple[Commit, ...]
    files: tuple[FileChange, ...]
    uncommitted: int  # files with changes not committed yet
    patch: str | None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


_QUOTED = re.compile(r'"((?:[^"\\]|\\(?:[abtnvfr"\\]|[0-3][0-7]{2}))*)"')
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquoted(path: str) -> str:
    """A path as git quotes one with special characters ("caf\\303\\251.txt"), read back
    to the name (café.txt); anything else as it is."""
    match = _QUOTED.fullmatch(path)
    if match is None:
        return path
    out, body, i = bytearray(), match.group(1), 0
    while i < len(body):
        if body[i] != "\\":
            out += body[i].encode()
            i += 1
        elif body[i + 1] in _C_ESCAPES:
            out.append(_C_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(int(body[i + 1 : i + 4], 8))
            i += 4
    return out.decode(errors="replace")


def _parse_diff(name: str, host: str, record: WorkRecord, answer: work_box.Answer) -> WorkDiff:
    commits, files = [], []
    for word, rest in answer.tagged:
        if word == "commit":
            sha, _, subject = rest.partition(" ")
            if SHA.fullmatch(sha):
                commits.append(Commit(sha, boxtext.line(subject)[:300]))
        elif word == "num" and (m := _NUM.fullmatch(rest)):
            added, deleted, path = m.groups()
            files.append(
                FileChange(
                    boxtext.line(_unquoted(path))[:1000],
                    None if added == "-" else int(added),
                    None if deleted == "-" else int(deleted),
                )
            )
    head = answer.first("head") or ""
    patch = None
    if answer.first("patch") is not None:
        patch = boxtext.lines("\n".join(answer.body) + ("\n" if answer.body else ""))
    return WorkDiff(
        box=name,
        host=host,
        repo=record.repo,
        seed=record.seed,
        head=head if SHA.fullmatch(head) else "",
        branch=boxtext.line(answer.first("branch") or "")[:200],
        commits=tuple(commits),
        files=tuple(files),
        uncommitted=count_said(answer.first("dirty")),
        patch=patch,
    )


async def diff(
    boxes: BoxCore, record: WorkRecord, name: str, host_name: str, *, patch: bool
) -> WorkDiff:
    """The work in the box's clone `record` since its seed."""
    host = await boxes.hosts.get(host_name)
    with reaching(name):
        answer = await work_box.run_step(
            host, name, work_box.DIFF_SCRIPT,
            [record.clone, record.seed, "patch" if patch else "stat"], cap=DIFF_MAX,
            doing="reading its work for diff",
        )  # fmt: skip
    if answer.first("noclone") is not None:
        raise WorkError(f"box {name} has no clone at {record.clone}")
    if answer.returncode != 0:
        raise WorkError(f"reading the work in box {name} failed: {answer.why()}")
    return _parse_diff(name, host_name, record, answer)
