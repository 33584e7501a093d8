"""Where a box's work is, as a listing shows it: its repository and branch from the host's
record, and the commits ahead of its seed from the repository's remote-tracking ref of its
last pull (loose or packed), read from the host's files, never the box."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hbtui.core.foundation.workbook import WorkBook, WorkRecord, pulled_head
from hbtui.paths import resolve_paths

from support.work import git, host_repo


def _commit(repo: Path, n: int) -> str:
    (repo / "b.txt").write_text(f"box {n}\n")
    git(repo, "add", "b.txt")
    git(repo, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", f"box {n}")
    return git(repo, "rev-parse", "HEAD")


def test_commits_ahead_come_from_the_last_pull_s_ref(tmp_path: Path, hbtui_home: Path):
    repo = host_repo(tmp_path, 1)
    seed = git(repo, "rev-parse", "HEAD")
    book = WorkBook(resolve_paths())
    record = WorkRecord(str(repo), seed, "refs/heads/main", "/data/home/agent/work/proj", "hb/b1")
    assert asyncio.run(book.ahead(record, "b1")) is None  # never pulled

    _commit(repo, 1)
    head = _commit(repo, 2)
    git(repo, "update-ref", "refs/remotes/box/b1/hb/b1", head)
    git(repo, "reset", "-q", "--hard", seed)
    assert pulled_head(repo, "refs/remotes/box/b1/hb/b1") == head
    assert asyncio.run(book.ahead(record, "b1")) == 2

    git(repo, "pack-refs", "--all")  # a packed ref reads the same
    assert not (repo / ".git/refs/remotes/box/b1/hb/b1").exists()
    assert pulled_head(repo, "refs/remotes/box/b1/hb/b1") == head
    assert asyncio.run(WorkBook(resolve_paths()).ahead(record, "b1")) == 2


def test_a_repository_that_is_gone_has_no_count(tmp_path: Path, hbtui_home: Path):
    record = WorkRecord(
        str(tmp_path / "gone"), "a" * 40, "HEAD", "/data/home/agent/work/x", "hb/b1"
    )
    assert asyncio.run(WorkBook(resolve_paths()).ahead(record, "b1")) is None
