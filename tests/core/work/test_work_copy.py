"""`new --repo --copy PATH`, checked on the host: what may go into a box's clone (git-ignored
files of the work tree, within the size bound) and what is refused in one line before any
box is made; and the archive that carries them (symlinks as symlinks, never followed)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from hbtui.core.work import copy as work_copy
from hbtui.errors import UsageError

from support import HBTUI_BIN
from support.work import git, host_repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """proj: a.txt and conf/default.yml tracked; .env, conf/local.yml and cache/ ignored;
    notes.txt untracked and not ignored; a secret beside the work tree."""
    repo = host_repo(tmp_path)
    (repo / ".gitignore").write_text(".env\n.env.*\nconf/local.yml\ncache/\nlinks/\n")
    (repo / "conf").mkdir()
    (repo / "conf" / "default.yml").write_text("tracked\n")
    git(repo, "add", ".gitignore", "conf/default.yml")
    git(repo, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "ignore")
    (repo / ".env").write_text("TOKEN=local\n")
    (repo / "conf" / "local.yml").write_text("mine\n")
    (repo / "cache").mkdir()
    (repo / "cache" / "one").write_text("1\n")
    (repo / "notes.txt").write_text("not ignored\n")
    (tmp_path / "secret").write_text("outside\n")
    return repo


def check(repo: Path, *paths: str) -> list[work_copy.Copy]:
    return asyncio.run(work_copy.check(repo, paths))


def test_ignored_files_and_folders_may_be_copied(repo: Path):
    (repo / ".env.dev").symlink_to(".env")  # a symlink: its own name, what it points at
    copies = check(repo, ".env", "cache", str(repo / "conf" / "local.yml"), ".env.dev", ".env")
    assert [(c.place, c.source.name, c.size) for c in copies] == [
        (".env", ".env", 12),
        ("cache", "cache", 2),
        ("conf/local.yml", "local.yml", 5),
        (".env.dev", ".env", 12),
    ]


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("../secret", "not inside the work tree"),
        ("missing.env", "does not exist"),
        ("a.txt", "a.txt is tracked by git"),
        ("conf", "conf holds conf/default.yml, which is tracked"),
        ("notes.txt", "notes.txt is not ignored by git"),
        (".git/config", "git's own folder"),
        (".", "not inside the work tree"),
        ("cache/../../secret", "not inside the work tree"),
    ],
)
def test_a_path_that_may_not_go_in_is_refused_by_name(repo: Path, path: str, words: str):
    with pytest.raises(UsageError) as refused:
        check(repo, ".env", path)
    assert refused.value.message.startswith(f"--copy {path}: "), refused.value.message
    assert words in refused.value.message


def test_a_symlink_that_leads_out_of_the_work_tree_is_refused(repo: Path, tmp_path: Path):
    (repo / ".env.link").symlink_to(tmp_path / "secret")
    with pytest.raises(UsageError, match="not inside the work tree"):
        check(repo, ".env.link")


def test_what_is_copied_is_bounded(repo: Path, monkeypatch):
    monkeypatch.setenv(work_copy.COPY_MAX_ENV, "13")
    assert [c.place for c in check(repo, ".env")] == [".env"]  # 12 bytes
    with pytest.raises(UsageError, match=r"come to 14 bytes, more than 13 \(HBTUI_COPY_MAX"):
        check(repo, ".env", "cache")
    monkeypatch.setenv(work_copy.COPY_MAX_ENV, "lots")
    with pytest.raises(UsageError, match="must be a number of bytes"):
        check(repo, ".env")


def test_symlinks_in_a_copied_folder_go_as_symlinks_never_followed(repo: Path, tmp_path: Path):
    links = repo / "links"
    links.mkdir()
    (links / "out").symlink_to(tmp_path / "secret")
    (links / "in").symlink_to("../a.txt")
    (links / "dir").symlink_to(tmp_path)
    os.mkfifo(links / "pipe")
    (links / "file").write_text("kept\n")
    copies = check(repo, "links")
    assert copies[0].size == 5  # the file alone: a symlink has no size of its own
    archive = tmp_path / "copy.tar"
    work_copy.pack(copies, archive, 1 << 20)
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert sorted(members) == ["links", "links/dir", "links/file", "links/in", "links/out"]
        assert members["links/out"].issym() and members["links/out"].linkname == str(
            tmp_path / "secret"
        )
        assert members["links/dir"].issym() and members["links/in"].linkname == "../a.txt"
        assert tar.extractfile("links/file").read() == b"kept\n"  # type: ignore[union-attr]
    with pytest.raises(Exception, match="grew past 4 bytes"):
        work_copy.pack(copies, archive, 4)


def test_new_refuses_a_bad_copy_in_one_line_and_makes_nothing(hbtui_home, repo: Path):
    for args, words in (
        (["--repo", str(repo), "--copy", "../secret"], "not inside the work tree"),
        (["--repo", str(repo), "--copy", "a.txt"], "tracked by git"),
        (["--copy", ".env"], "need --repo PATH"),
        (["--no-setup"], "need --repo PATH"),
    ):
        done = subprocess.run(
            [HBTUI_BIN, "new", "b1", *args], capture_output=True, text=True, timeout=60
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode != 0 and len(lines) == 1, done.stderr
        assert lines[0].startswith("error: ") and words in lines[0], lines
    assert not any("b1" in f.read_text() for f in hbtui_home.rglob("registry.toml"))
