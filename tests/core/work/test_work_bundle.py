"""The host's side of `pull` with real git and no box: a bundle as a box would send it is
checked in quarantine and taken in, and a hostile one leaves the repository as it was.
(tests/core/work/test_work_in_out.py runs the whole pull against a simulator box.)"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import BundleRefused
from hbtui.core.work import intake

from support.work import check_file

ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *ID, *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    git(repo, "add", name)
    git(repo, "commit", "-qm", f"add {name}")
    return git(repo, "rev-parse", "HEAD")


def host_state(repo: Path) -> tuple[str, ...]:
    objects = sorted(str(p) for p in (repo / ".git" / "objects").rglob("*") if p.is_file())
    return (
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "for-each-ref"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        "\n".join(objects),
    )


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path, str]:
    """The host repository (main, an uncommitted edit) and the box's clone of its seed,
    on hb/b1 with two commits of the agent's."""
    host = tmp_path / "host"
    host.mkdir()
    git(host, "init", "-q", "-b", "main")
    seed = commit(host, "a.txt", "seed\n")
    (host / "a.txt").write_text("host edit, not committed\n")
    box = tmp_path / "box"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(host), str(box)], check=True)
    git(box, "checkout", "-qb", "hb/b1")
    commit(box, "b.txt", "agent one\n")
    commit(box, "c.txt", "agent two\n")
    return host, box, seed


async def check(host: Path, bundle: Path, seed: str, tmp_path: Path, *, blob_max: int = 1 << 20):
    folder = tmp_path / "scratch"
    folder.mkdir(exist_ok=True)
    return await check_file(host, bundle, folder, seed=seed, blob_max=blob_max)


async def test_the_pack_is_indexed_once_in_quarantine_and_only_the_box_refs_land(
    repos, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """One strict index of the pack is every read of it (no throwaway repository made
    first, no fetch after), and every command that sees the box's objects runs in git's
    quarantine environment, where no ref of the host repository can change."""
    host, box, seed = repos
    bundle = tmp_path / "box.bundle"
    git(box, "bundle", "create", "-q", str(bundle), "hb/b1", f"^{seed}")
    before = host_state(host)
    ran: list[tuple[tuple[str, ...], dict[str, str]]] = []
    real = gitops.start_git

    async def watched(repo, *args, **kwargs):
        ran.append((args, dict(kwargs.get("env") or {})))
        return await real(repo, *args, **kwargs)

    monkeypatch.setattr(gitops, "start_git", watched)
    checked = await check(host, bundle, seed, tmp_path)
    verbs = [args[0] for args, _ in ran]
    assert verbs.count("index-pack") == 1
    assert "init" not in verbs and "fetch" not in verbs and "update-ref" not in verbs
    for args, env in ran:
        if args[0] not in ("bundle", "rev-parse"):
            assert env.get("GIT_QUARANTINE_PATH") == str(checked.quarantine.objects), args
    # The quarantine refuses any ref update, and the repository has nothing of the box yet.
    code, _, err = await gitops.run_git(
        host, "update-ref", "refs/heads/evil", "HEAD", check=False, env=checked.quarantine.env()
    )
    assert code != 0 and b"quarantine" in err
    assert host_state(host) == before

    await intake.take_in(host, checked, "b1")
    head = git(box, "rev-parse", "hb/b1")
    assert git(host, "rev-parse", "refs/remotes/box/b1/hb/b1") == head
    assert git(host, "cat-file", "-p", f"{head}:c.txt") == "agent two"
    after = host_state(host)
    assert after[0] == before[0] and after[2] == before[2]  # branch and work tree as they were
    assert git(host, "for-each-ref", "--format=%(refname)").split() == [
        "refs/heads/main",
        "refs/remotes/box/b1/hb/b1",
    ]
    git(host, "fsck", "--strict", "--no-dangling")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        ("git update-ref refs/remotes/origin/x HEAD && "
         "git bundle create -q {out} refs/remotes/origin/x ^{seed}", "refs/remotes/origin/x"),
        ("git bundle create -q {out}.full hb/b1 ^{seed} && "
         "head -c $(( $(stat -c %s {out}.full) - 30 )) {out}.full > {out}", "broken pack"),
        ("printf 'PK junk\\n' > {out}", "fails git bundle verify"),
        ("git checkout -q --orphan fresh && git commit -qm new && git branch -f hb/b1 fresh && "
         "git bundle create -q {out} hb/b1", "no longer contains the seed"),
        ("head -c 3000000 /dev/zero > zeros && git add zeros && git commit -qm zeros && "
         "git bundle create -q {out} hb/b1 ^{seed}", "a file of more than"),
    ],
    ids=["ref-outside", "cut-short", "not-a-bundle", "rewritten", "big-file"],
)  # fmt: skip
async def test_a_hostile_bundle_is_refused_and_the_repository_stays_as_it_was(
    repos, tmp_path: Path, make: str, words: str
):
    host, box, seed = repos
    bundle = tmp_path / "evil.bundle"
    who = {
        f"GIT_{role}_{part}": "e" for role in ("AUTHOR", "COMMITTER") for part in ("NAME", "EMAIL")
    }
    script = make.format(out=bundle, seed=seed)
    subprocess.run(["sh", "-c", script], cwd=box, check=True, env={**os.environ, **who})
    before = host_state(host)
    with pytest.raises(BundleRefused, match=words):
        await check(host, bundle, seed, tmp_path, blob_max=256 * 1024)
    assert host_state(host) == before
