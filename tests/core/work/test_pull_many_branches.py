"""A box that offers thousands of branches cannot hold a pull for minutes: the bundle's
checks run a fixed number of git commands whatever the number of branches (two per
branch before: 2,000 branches took 100 s on a loaded machine). They still refuse a
branch whose history lost the seed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import BundleRefused

from support.work import check_file

ID = ["-c", "user.name=h", "-c", "user.email=h@h"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture
def host_and_box(tmp_path: Path) -> tuple[Path, Path, str]:
    """A host repository at the seed, and a box's clone with work on top of it."""
    host = tmp_path / "host"
    host.mkdir()
    git(host, "init", "-q", "-b", "main")
    (host / "a").write_text("a\n")
    git(host, "add", "a")
    git(host, *ID, "commit", "-qm", "seed")
    seed = git(host, "rev-parse", "HEAD")
    box = tmp_path / "box"
    git(tmp_path, "clone", "-q", str(host), str(box))
    git(box, "checkout", "-q", "-b", "hb/b1")
    (box / "b").write_text("b\n")
    git(box, "add", "b")
    git(box, *ID, "commit", "-qm", "work")
    return host, box, seed


def bundle_of(box: Path, seed: str, refs: list[str], folder: Path) -> Path:
    out = folder / "box.bundle"
    git(box, "bundle", "create", "-q", str(out), *refs, f"^{seed}")
    return out


def counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """Every git command the intake and check_bundle run, recorded (each still runs)."""
    calls: list[tuple[str, ...]] = []
    real = gitops.start_git

    async def recorded(repo, *args, **kwargs):
        calls.append(args)
        return await real(repo, *args, **kwargs)

    monkeypatch.setattr(gitops, "start_git", recorded)
    return calls


async def test_many_branches_cost_no_more_git_commands_than_one(
    host_and_box, tmp_path: Path, monkeypatch
):
    host, box, seed = host_and_box
    head = git(box, "rev-parse", "HEAD")
    many = [f"many/b{i}" for i in range(300)]
    updates = "".join(f"create refs/heads/{b} {head}\n" for b in many)
    subprocess.run(["git", "-C", str(box), "update-ref", "--stdin"], input=updates, text=True)
    counts = []
    for refs in (["hb/b1"], ["hb/b1", *many]):
        folder = tmp_path / f"check-{len(refs)}"
        folder.mkdir()
        calls = counting(monkeypatch)
        checked = await check_file(host, bundle_of(box, seed, refs, folder), folder, seed=seed)
        assert sorted(ref for _, ref in checked.heads) == sorted(f"refs/heads/{r}" for r in refs)
        counts.append(len(calls))
        monkeypatch.undo()
    assert counts[0] == counts[1], counts


async def test_a_branch_that_lost_the_seed_is_still_refused(host_and_box, tmp_path: Path):
    host, box, seed = host_and_box
    git(box, "checkout", "-q", "--orphan", "rewritten")
    git(box, *ID, "commit", "-qm", "no seed here")
    folder = tmp_path / "check"
    folder.mkdir()
    # `^seed` leaves the orphan's whole history in: a bundle that verifies.
    bundle = bundle_of(box, seed, ["hb/b1", "rewritten"], folder)
    with pytest.raises(BundleRefused, match="rewritten in the box no longer contains the seed"):
        await check_file(host, bundle, folder, seed=seed)


async def test_a_merge_that_holds_the_seed_through_its_second_parent_passes(
    host_and_box, tmp_path: Path
):
    """The walk follows every parent, not only the first."""
    host, box, seed = host_and_box
    git(box, "checkout", "-q", "--orphan", "other")
    git(box, *ID, "commit", "-qm", "unrelated start")
    git(box, *ID, "merge", "-q", "--allow-unrelated-histories", "-m", "join", "hb/b1")
    folder = tmp_path / "check"
    folder.mkdir()
    bundle = bundle_of(box, seed, ["hb/b1", "other"], folder)
    checked = await check_file(host, bundle, folder, seed=seed)
    assert sorted(ref for _, ref in checked.heads) == ["refs/heads/hb/b1", "refs/heads/other"]
