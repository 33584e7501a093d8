"""The work record of a box with one repository or several: old records load, each clone
has a name of its own, and `--repo NAME|PATH` picks one (or says which there are)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hbtui.core.foundation.git import RepoSeed
from hbtui.core.work import book as work_book
from hbtui.core.work import operations as work
from hbtui.core.work.book import BoxWork, WorkRecord, pick
from hbtui.core.work.pr import PrRequest, body_for, check_names, title_for
from hbtui.errors import UsageError
from hbtui.names import LOCAL
from hbtui.paths import resolve_paths

SHA = "a" * 40


def record(repo: Path, clone: str) -> WorkRecord:
    return WorkRecord(str(repo), SHA, "refs/heads/main", f"/data/home/agent/work/{clone}", "hb/b1")


def test_a_record_written_before_a_box_held_several_repositories_loads(tmp_path: Path):
    book = work_book.WorkBook(resolve_paths({"HBTUI_HOME": str(tmp_path)}))
    (book.root / LOCAL).mkdir(parents=True)
    old = {"repo": "/r", "seed": SHA, "ref": "HEAD", "clone": "/c/proj", "branch": "hb/b1"}
    (book.root / LOCAL / "b1.json").write_text(json.dumps(old))
    assert book.get(LOCAL, "b1") == BoxWork((WorkRecord(**old),), "")
    two = BoxWork((WorkRecord(**old), WorkRecord(**{**old, "clone": "/c/proj-2"})), "do it")
    book.put(LOCAL, "b2", two)
    assert book.get(LOCAL, "b2") == two


def test_each_clone_has_a_folder_of_its_own_and_a_repository_goes_in_once(tmp_path: Path):
    seeds = [RepoSeed(tmp_path / d / "proj", "", "HEAD", SHA) for d in ("x", "y", "z")]
    assert [c.rsplit("/", 1)[1] for c in work.clone_dirs(seeds)] == ["proj", "proj-2", "proj-3"]
    with pytest.raises(UsageError, match="given twice"):
        work.check_seeds([seeds[0], seeds[1], seeds[0]])


def test_repo_picks_by_clone_name_or_path_and_names_them_when_it_cannot(tmp_path: Path):
    a, b = tmp_path / "x" / "proj", tmp_path / "y" / "proj"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    one = BoxWork((record(a, "proj"),))
    two = BoxWork((record(a, "proj"), record(b, "proj-2")))
    assert pick(one, "b1", None) == (one.first, None)
    moved = tmp_path / "moved"
    moved.mkdir()
    assert pick(one, "b1", str(moved)) == (one.first, moved)  # pull --repo PATH, as before
    assert pick(two, "b1", "proj-2") == (two.repos[1], None)
    assert pick(two, "b1", str(b)) == (two.repos[1], None)
    with pytest.raises(UsageError, match=r"^box b1 has 2 repositories \(proj, proj-2\): pick"):
        pick(two, "b1", None)
    with pytest.raises(UsageError, match=r"no repository 'nope': it has proj, proj-2"):
        pick(two, "b1", "nope")
    with pytest.raises(UsageError, match="no repository"):
        pick(two, "b1", str(moved))


@pytest.mark.parametrize("branch", ["-x", "--force", "a..b", "x.lock", "HEAD", "a b", "+x", ""])
def test_a_branch_git_would_read_otherwise_is_refused(branch: str):
    with pytest.raises(UsageError, match="not a branch name"):
        check_names("origin", branch)
    with pytest.raises(UsageError, match="not a remote name"):
        check_names("-u", "hb/b1")
    check_names("origin", "fix/flaky-io")


def test_the_request_s_title_and_body_come_from_the_task_and_the_commits(tmp_path: Path):
    r = record(tmp_path, "proj")
    commits = [f"{n:07x} change {n}" for n in range(150)]
    assert (
        title_for(PrRequest(), "\n  Fix the io test\nmore", commits, "hb/b1") == "Fix the io test"
    )
    assert title_for(PrRequest(title="Mine"), "task", commits, "hb/b1") == "Mine"
    assert title_for(PrRequest(), "", commits[:1], "hb/b1") == "change 0"
    assert len(title_for(PrRequest(), "x" * 500, commits, "hb/b1")) == 100
    body = body_for("b1", r, "Fix it\n\nall of it", commits)
    assert body.startswith("Fix it\n\nall of it\n\nCommits made in hbtui box b1")
    assert "- 0000063 change 99\n- … and 50 more" in body
    assert len(body_for("b1", r, "y" * 100_000, commits)) <= 60_000


def test_an_archive_carries_every_repository_of_a_box_each_checked():
    from hbtui.core.work.travel import RecordRefused, checked_work

    one = {
        "repo": "/srv/proj", "seed": "a" * 40, "ref": "refs/heads/main",
        "clone": "/data/home/agent/work/proj", "branch": "hb/b1",
    }  # fmt: skip
    two = dict(one, repo="/srv/web", clone="/data/home/agent/work/web")
    work = checked_work({"repos": [one, two], "task": "fix it"})
    assert [r.name for r in work.repos] == ["proj", "web"] and work.task == "fix it"
    assert checked_work(one).repos[0].repo == "/srv/proj"  # as the first saves wrote it
    for hostile, said in [
        ({"repos": [one, dict(two, clone=one["clone"])]}, "share a clone folder"),
        ({"repos": [one] * 65}, "1 to 64"),
        ({"repos": []}, "1 to 64"),
        ({"repos": [one], "task": 3}, "the task"),
        ({"repos": [one, dict(two, repo="web")]}, "not absolute"),
    ]:
        with pytest.raises(RecordRefused, match=said):
            checked_work(hostile)


def test_a_long_task_in_another_script_travels_and_a_note_too_long_is_one_error():
    from hbtui.archive.note import NOTE_MAX, NoteTooLong, read
    from hbtui.core.archives.carried import decode, encode

    one = {
        "repo": "/srv/proj", "seed": "a" * 40, "ref": "refs/heads/main",
        "clone": "/data/home/agent/work/proj", "branch": "hb/b1",
    }  # fmt: skip
    task = "修" * 21_000  # 63,000 bytes: a task new --task takes
    text = encode({"work": {"repos": [one], "task": task}})
    assert len(text) < 70_000  # UTF-8, not six bytes a character
    from hbtui.archive.note import frame

    assert decode(read(frame(text)))["work"]["task"] == task
    with pytest.raises(NoteTooLong, match="a note holds at most"):
        encode({"work": {"repos": [one], "task": "x" * NOTE_MAX}})


def test_a_c1_control_in_an_archive_s_record_is_refused():
    from hbtui.core.work.travel import RecordRefused, checked

    one = {
        "repo": "/srv/proj", "seed": "a" * 40, "ref": "refs/heads/main",
        "clone": "/data/home/agent/work/proj", "branch": "hb/b1",
    }  # fmt: skip
    for field, value in [("repo", "/srv/\x9b31mproj"), ("ref", "refs/heads/\x9d0;t\x9c")]:
        with pytest.raises(RecordRefused, match="control codes"):
            checked(dict(one, **{field: value}))
