"""`hbtui pr` end to end, with real git on both sides and a local bare repository as the
remote: the box's pulled commit pushed under its branch, never forced, the host
repository's own branches and work tree untouched; `gh` is a script on PATH that records
what it was asked (the one part that cannot run offline), or absent. And a box with two
repositories: both cloned, `diff`, `pull` and `pr` picking one with --repo."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support import recipe_with
from support.cli import hbtui, one_line_error
from support.work import LIVE_AGENT, git, host_repo

pytestmark = pytest.mark.sim

TASK = "Make the flaky test pass\n\nIt fails one run in ten; find why."
WHO = ("-c", "user.name=o", "-c", "user.email=o@o")
# Answers `gh auth status` as a logged-in gh does; `gh pr create` records its arguments
# (one a line, NUL-ended) and the environment it was given, and prints the request's URL.
FAKE_GH = """#!/bin/sh
[ "$1 $2" = "auth status" ] && exit "${FAKE_GH_AUTH:-0}"
for a in "$@"; do printf '%s\\0' "$a"; done >> "$FAKE_GH_LOG"
env > "$FAKE_GH_LOG.env"
echo "Creating pull request for hb/b1 into main in o/proj"
echo "https://github.com/o/proj/pull/7"
"""


def box(env: dict[str, str], name: str, script: str, *, folder: str = "proj") -> str:
    """A shell script in a box, as its agent, in its clone of `folder`."""
    done = subprocess.run(
        [
            env["HBTUI_SMOLVM"], "--state-dir", env["HBTUI_SMOLVM_STATE_DIR"], "machine", "exec",
            "--name", name, "-u", "agent", "-w", f"/data/home/agent/work/{folder}", "--",
            "bash", "-c", script,
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def with_remote(repo: Path) -> Path:
    """`repo`'s origin: a bare repository beside it, holding its main."""
    bare = repo.parent / f"{repo.name}-remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")
    return bare


def own_state(repo: Path) -> tuple[str, ...]:
    """What a pr must never touch in the host repository: its branches, HEAD, index and
    work tree."""
    return (
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "for-each-ref", "refs/heads"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        (repo / "a.txt").read_text(),
    )


def recorded(log: Path) -> list[list[str]]:
    """Each `gh pr create` call's arguments."""
    if not log.exists():
        return []
    words = log.read_text().split("\0")[:-1]
    calls, call = [], []
    for word in words:
        if word == "pr" and call:
            calls.append(call)
            call = []
        call.append(word)
    return [*calls, call] if call else calls


@pytest.fixture
def gh_env(sim_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The simulator's env with the fake gh first on PATH, and a passphrase of hbtui's
    that no child may see."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(FAKE_GH)
    (bin_dir / "gh").chmod(0o755)
    return dict(
        sim_env,
        PATH=f"{bin_dir}{os.pathsep}{sim_env['PATH']}",
        FAKE_GH_LOG=str(tmp_path / "gh.log"),
        HBTUI_PASSPHRASE="hbtui-secret-passphrase",
    )


@pytest.mark.timeout(900)
def test_pr_pushes_the_pulled_commit_and_opens_the_request_and_refuses_without_a_trace(
    gh_env: dict[str, str], tmp_path: Path
):
    repo = host_repo(tmp_path, 2, dirty=True)
    bare = with_remote(repo)
    env = dict(gh_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)))
    made = hbtui("new", "b1", "--repo", str(repo), "--agent", "claude", "--task", TASK, "-q",
                 env=env)  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    box(env, "b1", "echo b > b.txt && git add b.txt && git commit -qm 'add b' && "
        "echo c > c.txt && git add c.txt && git commit -qm 'add c'")  # fmt: skip
    head = box(env, "b1", "git rev-parse HEAD")
    mine = own_state(repo)
    log = Path(env["FAKE_GH_LOG"])

    # Bad input first: one line each, and nothing pulled, pushed or asked of gh.
    refs = git(repo, "for-each-ref")
    one_line_error(hbtui("pr", "b1", "--branch=-x", env=env), "not a branch name", "'-x'")
    one_line_error(hbtui("pr", "b1", "--remote", "nope", env=env), "no remote 'nope'")
    assert hbtui("pr", "b1", "--branch", "-x", env=env).returncode == 2
    assert git(repo, "for-each-ref") == refs
    assert git(bare, "for-each-ref", "--format=%(refname)") == "refs/heads/main"

    done = hbtui("pr", "b1", "--draft", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(bare, "rev-parse", "refs/heads/hb/b1") == head
    assert git(repo, "rev-parse", "refs/remotes/box/b1/hb/b1") == head
    assert "pushed" in done.stdout and "https://github.com/o/proj/pull/7" in done.stdout
    [call] = recorded(log)
    body = call[call.index("--body") + 1]
    assert call[:7] == ["pr", "create", "--head", "hb/b1", "--title", "Make the flaky test pass",
                        "--draft"]  # fmt: skip
    assert TASK in body and "add b" in body and "add c" in body
    assert body.index("add b") < body.index("add c")
    assert "hbtui-secret-passphrase" not in Path(f"{log}.env").read_text()
    assert own_state(repo) == mine

    # The remote's branch moved on meanwhile: the push is refused (never forced), and
    # the remote, the host's branches and gh are as they were.
    other = tmp_path / "other"
    subprocess.run(["git", "clone", "-q", "-b", "main", str(bare), str(other)], check=True)
    git(other, "checkout", "-q", "hb/b1")
    git(other, *WHO, "commit", "-q", "--allow-empty", "-m", "a reviewer's commit")
    git(other, "push", "-q", "origin", "hb/b1")
    theirs = git(bare, "rev-parse", "refs/heads/hb/b1")
    box(env, "b1", "echo d > d.txt && git add d.txt && git commit -qm 'add d'")
    line = one_line_error(hbtui("pr", "b1", env=env), "refused", "[rejected]")
    assert "hb/b1" in line
    assert git(bare, "rev-parse", "refs/heads/hb/b1") == theirs
    assert len(recorded(log)) == 1
    assert own_state(repo) == mine

    # Under a branch name of its own it goes; gh not logged in: the command to run.
    done = hbtui(
        "pr", "b1", "--branch", "fix/flaky", "--title", "Fix it", env=dict(env, FAKE_GH_AUTH="1")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(bare, "rev-parse", "refs/heads/fix/flaky") == box(env, "b1", "git rev-parse HEAD")
    assert "gh is not logged in" in done.stdout
    assert "gh pr create --head fix/flaky --title 'Fix it'" in done.stdout
    assert len(recorded(log)) == 1


@pytest.mark.timeout(600)
def test_pr_without_gh_prints_the_command_and_a_box_with_nothing_new_pushes_nothing(
    sim_env: dict[str, str], tmp_path: Path
):
    repo = host_repo(tmp_path, 1)
    bare = with_remote(repo)
    path = os.pathsep.join(
        p for p in sim_env["PATH"].split(os.pathsep) if not (Path(p) / "gh").exists()
    )
    env = dict(sim_env, PATH=path, HBTUI_RECIPE=str(recipe_with(tmp_path, "")))
    for name in ("b1", "b2"):
        made = hbtui("new", name, "--repo", str(repo), "-q", env=env)
        assert made.returncode == 0, made.stdout + made.stderr
    one_line_error(hbtui("pr", "b2", env=env), "no commits", "nothing to push")
    assert git(bare, "for-each-ref", "--format=%(refname)") == "refs/heads/main"

    box(env, "b1", "echo w > w.txt && git add w.txt && git commit -qm work")
    done = hbtui("pr", "b1", "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["url"] == "" and result["no_gh"] == "gh is not installed"
    assert result["command"] == f"cd {repo} && gh pr create --head hb/b1 --title work"
    assert git(bare, "rev-parse", "refs/heads/hb/b1") == result["commit"]
    assert result["commits"] == [f"{result['commit'][:7]} work"]


@pytest.mark.timeout(900)
def test_a_box_with_two_repositories_clones_each_and_picks_one_by_repo(
    gh_env: dict[str, str], tmp_path: Path
):
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    first, second = host_repo(tmp_path / "x", 1), host_repo(tmp_path / "y", 2)  # both "proj"
    bare = with_remote(second)
    env = dict(gh_env, HBTUI_RECIPE=str(recipe_with(tmp_path, "")))
    one_line_error(hbtui("new", "b9", "--repo", str(first), "--repo", f"{first}@HEAD", env=env),
                   "given twice")  # fmt: skip
    made = hbtui("new", "b1", "--repo", str(first), "--repo", str(second), "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert box(env, "b1", "git symbolic-ref --short HEAD") == "hb/b1"
    assert box(env, "b1", "git symbolic-ref --short HEAD", folder="proj-2") == "hb/b1"
    assert box(env, "b1", "git log --format=%s", folder="proj-2") == "host 2\nhost 1"

    for verb in ("diff", "pull", "pr"):
        done = hbtui(verb, "b1", env=env)
        assert done.returncode == 2, done.stderr
        one_line_error(done, "2 repositories (proj, proj-2)", "--repo")
    one_line_error(hbtui("pull", "b1", "--repo", "nope", env=env), "no repository 'nope'",
                   "proj, proj-2")  # fmt: skip

    box(env, "b1", "echo two > t.txt && git add t.txt && git commit -qm 'in the second'",
        folder="proj-2")  # fmt: skip
    shown = json.loads(hbtui("diff", "b1", "--repo", "proj-2", "--json", env=env).stdout)
    assert [c["subject"] for c in shown["commits"]] == ["in the second"]
    assert (
        json.loads(hbtui("diff", "b1", "--repo", str(first), "--json", env=env).stdout)["commits"]
        == []
    )
    done = hbtui("pull", "b1", "--repo", "proj-2", env=env)
    assert done.returncode == 0, done.stderr
    assert git(second, "log", "-1", "--format=%s", "refs/remotes/box/b1/hb/b1") == "in the second"
    assert "box/b1" not in git(first, "for-each-ref")
    done = hbtui("pr", "b1", "--repo", str(second), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(bare, "log", "-1", "--format=%s", "refs/heads/hb/b1") == "in the second"
