"""Work in and out of a simulator box with real git on both sides: `new --repo --task
--agent`, `diff`, `pull` (and `--wip`), and a hostile box whose bundles are refused with one
line while the host repository stays exactly as it was."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from support import HBTUI_BIN, SIM_RECIPE, recipe_with
from support.work import CLONE, LIVE_AGENT, box_sh, git, host_repo

pytestmark = pytest.mark.sim

# A task no shell may read as code: if it ever went through one, a file would appear.
TASK = "fix it; $(touch /tmp/pwned) `touch /tmp/pwned2` 'quoted' \"double\"\nsecond line"


def hbtui(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HBTUI_BIN, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def in_box(env, script: str, *, user: str = "agent", check: bool = True) -> str:
    """A shell script in box b1 (as agent in the clone unless it says otherwise)."""
    done = subprocess.run(
        [
            env["HBTUI_SMOLVM"], "--state-dir", env["HBTUI_SMOLVM_STATE_DIR"], "machine", "exec",
            "--name", "b1", "-u", user, "--", "bash", "-c", script,
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    if check:
        assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def one_error_line(done: subprocess.CompletedProcess, *words: str) -> str:
    assert done.returncode != 0, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def host_state(repo: Path) -> tuple[str, ...]:
    """Everything a pull must not touch, or (refused) touch at all."""
    objects = subprocess.run(
        ["find", str(repo / ".git" / "objects"), "-type", "f"], capture_output=True, text=True
    ).stdout
    return (
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "for-each-ref"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        (repo / "a.txt").read_text(),
        "\n".join(sorted(objects.splitlines())),
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A host repository on main with two commits, an unstaged change and an untracked file."""
    return host_repo(tmp_path, 2, dirty=True)


@pytest.mark.timeout(900)
def test_new_with_repo_diff_pull_and_a_hostile_box(sim_env, repo: Path, tmp_path: Path):
    seed = git(repo, "rev-parse", "HEAD")
    recipe = recipe_with(tmp_path, LIVE_AGENT)
    made = hbtui(
        "new", "b1", "--recipe", str(recipe), "--repo", str(repo), "--task", TASK,
        "--agent", "claude", "-q", env=sim_env,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    before = host_state(repo)

    # The clone: on hb/b1 at the seed, the seed kept as refs/hbtui/seed; no git credentials.
    assert in_box(sim_env, f"cd {CLONE} && git symbolic-ref --short HEAD").strip() == "hb/b1"
    assert in_box(sim_env, f"cd {CLONE} && git rev-parse HEAD refs/hbtui/seed").split() == [
        seed,
        seed,
    ]
    assert in_box(sim_env, f"cd {CLONE} && git status --porcelain") == ""
    assert in_box(sim_env, f"cat {CLONE}/a.txt") == "line 2\n"  # committed history only
    creds = in_box(
        sim_env,
        f"cd {CLONE}; ls -a ~ ; env | grep -iE 'TOKEN|^GIT_ASKPASS|^SSH_AUTH_SOCK' ; "
        "test -e ~/.config/gh/hosts.yml && echo gh-login; "
        "for h in github.com gitlab.com source.developers.google.com; do "
        "printf 'protocol=https\\nhost=%s\\n\\n' $h | GIT_TERMINAL_PROMPT=0 "
        "GIT_ASKPASS=/bin/false git credential fill 2>/dev/null && echo got-login-$h; done; true",
    )
    assert ".git-credentials" not in creds and "gh-login" not in creds, creds
    assert "TOKEN" not in creds and "SSH_AUTH_SOCK" not in creds, creds
    assert "got-login" not in creds and "password" not in creds, creds
    helpers = in_box(sim_env, f"cd {CLONE} && git config --get-all credential.helper")
    assert helpers.splitlines()[-1] == "", helpers  # the image's helpers are reset
    # The agent started in tmux main, in the clone, with the task as its first prompt.
    assert in_box(sim_env, "cat ~/claude-prompt") == TASK.rstrip("\n")
    assert in_box(sim_env, "cat ~/claude-cwd").strip() == CLONE
    assert in_box(sim_env, "ls /tmp/pwned /tmp/pwned2 2>&1", check=False).count("No such") == 2

    # The agent's work: one commit, one uncommitted change, one new untracked file.
    in_box(
        sim_env,
        f"cd {CLONE} && echo agent > b.txt && git add b.txt && git commit -qm 'agent: add b' "
        "&& echo 'agent edit' >> a.txt && echo new > c.txt",
    )
    head = in_box(sim_env, f"cd {CLONE} && git rev-parse HEAD").strip()
    shown = hbtui("diff", "b1", "--json", env=sim_env)
    assert shown.returncode == 0, shown.stderr
    d = json.loads(shown.stdout)
    assert d["seed"] == seed and d["head"] == head and d["branch"] == "hb/b1"
    assert [c["subject"] for c in d["commits"]] == ["agent: add b"]
    assert d["uncommitted"] == 2
    assert {f["path"]: (f["added"], f["deleted"]) for f in d["files"]} == {
        "a.txt": (1, 0),
        "b.txt": (1, 0),
        "c.txt": (1, 0),
    }
    assert "+agent edit" in d["patch"] and "+new" in d["patch"]
    stat = hbtui("diff", "b1", "--stat", env=sim_env)
    assert stat.returncode == 0 and "3 file(s) changed, +3 -0" in stat.stdout, stat.stdout
    assert in_box(sim_env, f"cd {CLONE} && git status --porcelain") == " M a.txt\n?? c.txt\n"

    # pull: the branch lands under refs/remotes/box/b1/, the host's branch and tree as they were.
    pulled = hbtui("pull", "b1", env=sim_env)
    assert pulled.returncode == 0, pulled.stderr
    assert "refs/remotes/box/b1/hb/b1" in pulled.stdout
    assert "uncommitted" in pulled.stdout + pulled.stderr
    assert git(repo, "rev-parse", "refs/remotes/box/b1/hb/b1") == head
    after = host_state(repo)
    assert after[0] == before[0] and after[2:4] == before[2:4]
    assert git(repo, "for-each-ref", "--format=%(refname)") == "\n".join(
        ["refs/heads/main", "refs/remotes/box/b1/hb/b1"]
    )
    # --wip: the uncommitted changes as a commit on the throwaway ref, gone from the box after.
    wip = hbtui("pull", "b1", "--wip", "--json", env=sim_env)
    assert wip.returncode == 0, wip.stderr
    result = json.loads(wip.stdout)
    assert result["uncommitted"] == 2 and result["wip"]
    assert git(repo, "rev-parse", "refs/remotes/box/b1/hbtui-wip") == result["wip"]
    assert git(repo, "show", "refs/remotes/box/b1/hbtui-wip:c.txt") == "new"
    assert in_box(sim_env, f"cd {CLONE} && git for-each-ref refs/hbtui/wip") == ""
    assert in_box(sim_env, f"cd {CLONE} && git status --porcelain") == " M a.txt\n?? c.txt\n"
    # Nothing uncommitted any more (and a WIP ref a killed pull left in the box): a later
    # pull --wip leaves no WIP ref anywhere; the old one would show changes long gone.
    stash = f"cd {CLONE} && git -c user.name=a -c user.email=a@a stash -q -u"
    in_box(sim_env, f"{stash} && git update-ref refs/hbtui/wip HEAD")
    again = hbtui("pull", "b1", "--wip", env=sim_env)
    assert again.returncode == 0, again.stderr
    assert "removed refs/remotes/box/b1/hbtui-wip" in again.stdout, again.stdout
    branches_only = "refs/heads/main\nrefs/remotes/box/b1/hb/b1"
    assert git(repo, "for-each-ref", "--format=%(refname)") == branches_only
    assert in_box(sim_env, f"cd {CLONE} && git for-each-ref refs/hbtui/wip") == ""
    # Changes again: --wip takes them, and a plain pull after does not keep the old ones.
    in_box(sim_env, f"cd {CLONE} && git stash pop -q")
    assert hbtui("pull", "b1", "--wip", env=sim_env).returncode == 0
    assert git(repo, "show", "refs/remotes/box/b1/hbtui-wip:c.txt") == "new"
    plain = hbtui("pull", "b1", env=sim_env)
    assert plain.returncode == 0 and "--wip takes them" in plain.stdout, plain.stdout
    assert git(repo, "for-each-ref", "--format=%(refname)") == branches_only

    # A hostile box: what it streams out is a bundle the test made, whatever it bundled.
    in_box(
        sim_env,
        "printf '%s\\n' '#!/bin/sh' "
        "'if [ -e /tmp/evil.bundle ]; then cat > /dev/null; set -- -w 65536 /tmp/evil.bundle; fi' "
        "'exec /usr/bin/base64 \"$@\"' > /usr/local/bin/base64 && chmod 755 /usr/local/bin/base64",
        user="root",
    )
    steady = host_state(repo)

    def refused(evil: str, *words: str, env=sim_env) -> None:
        fresh = f"rm -rf /tmp/e /tmp/evil.bundle /tmp/full.bundle && git clone -q {CLONE} /tmp/e"
        in_box(sim_env, f"{fresh} && cd /tmp/e && {evil}")
        one_error_line(hbtui("pull", "b1", env=env), *words)
        assert host_state(repo) == steady

    # A ref outside the box's branches.
    refused(
        "git update-ref refs/remotes/origin/main HEAD && "
        "git bundle create -q /tmp/evil.bundle refs/remotes/origin/main ^" + seed,
        "refs/remotes/origin/main",
        "refused",
    )
    refused(
        "git tag v9 HEAD && git bundle create -q /tmp/evil.bundle refs/tags/v9 ^" + seed,
        "refs/tags/v9",
    )
    # A corrupt bundle: its pack cut short.
    refused(
        f"git bundle create -q /tmp/full.bundle hb/b1 ^{seed} && "
        "head -c $(( $(stat -c %s /tmp/full.bundle) - 30 )) /tmp/full.bundle > /tmp/evil.bundle",
        "broken pack",
    )
    # Not a bundle at all.
    refused("printf 'PK junk\\n' > /tmp/evil.bundle", "fails git bundle verify")
    # Rewritten history: hb/b1 without the seed.
    refused(
        "git checkout -q --orphan fresh && git -c user.name=e -c user.email=e@e commit -qm new "
        "&& git branch -f hb/b1 fresh && git bundle create -q /tmp/evil.bundle hb/b1",
        "no longer contains the seed",
    )
    # Over the cap (a small one here): random bytes, refused as they stream in.
    small = {**sim_env, "HBTUI_PULL_MAX_BYTES": str(256 * 1024)}
    refused(
        "head -c 1000000 /dev/urandom > big && git add big && "
        "git -c user.name=e -c user.email=e@e commit -qm big && "
        f"git bundle create -q /tmp/evil.bundle hb/b1 ^{seed}",
        "larger than the cap of 262144",
        env=small,
    )
    # A file far bigger than the cap that compresses to almost nothing.
    refused(
        "head -c 3000000 /dev/zero > zeros && git add zeros && "
        "git -c user.name=e -c user.email=e@e commit -qm zeros && "
        f"git bundle create -q /tmp/evil.bundle hb/b1 ^{seed}",
        "a file of more than",
        env=small,
    )
    # Garbage where the bundle's base64 should be.
    in_box(sim_env, "rm -f /tmp/evil.bundle", user="root")
    in_box(
        sim_env,
        "printf '%s\\n' '#!/bin/sh' 'echo \"!!! not base64 !!!\"' > /usr/local/bin/base64 && "
        "chmod 755 /usr/local/bin/base64",
        user="root",
    )
    one_error_line(hbtui("pull", "b1", env=sim_env), "garbled")
    assert host_state(repo) == steady


def test_new_whose_work_cannot_go_in_leaves_no_box_and_bad_input_makes_none(
    sim_env, repo: Path, tmp_path: Path
):
    # The clone's folder is taken already: the box made for it is removed again.
    recipe = recipe_with(tmp_path, f"mkdir -p {CLONE} && touch {CLONE}/taken")
    made = hbtui("new", "b1", "--recipe", str(recipe), "--repo", str(repo), "-q", env=sim_env)
    one_error_line(made, CLONE, "already exists")
    assert json.loads(hbtui("ls", "--json", env=sim_env).stdout) == []
    one_error_line(hbtui("diff", "b1", env=sim_env), "b1")
    # Input errors come before any box is made.
    one_error_line(hbtui("new", "b2", "--repo", str(tmp_path), env=sim_env), "not in a git")
    one_error_line(hbtui("new", "b2", "--repo", f"{repo}@nosuch", env=sim_env), "nosuch")
    one_error_line(hbtui("new", "b2", "--task", "x", env=sim_env), "--repo")
    one_error_line(hbtui("new", "b2", "--repo", str(repo), "--task", "x", env=sim_env), "--agent")
    assert json.loads(hbtui("ls", "--json", env=sim_env).stdout) == []
    assert git(repo, "for-each-ref", "--format=%(refname)") == "refs/heads/main"


def test_a_pull_into_a_repository_without_the_seed_blames_the_repository(
    sim_env, repo: Path, tmp_path: Path
):
    """`pull --repo` of an unrelated repository said "the box's bundle fails git bundle
    verify": the box was not at fault, the repository lacks the seed its work is built on."""
    env = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    made = hbtui("new", "b1", "--repo", str(repo), "-q", env=env)
    assert made.returncode == 0, made.stderr
    in_box(env, f"cd {CLONE} && echo more >> a.txt && git commit -qam more")
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    who = ("-c", "user.name=o", "-c", "user.email=o@o")
    git(other, *who, "commit", "-q", "--allow-empty", "-m", "unrelated")
    before = git(other, "for-each-ref")
    seed = git(repo, "rev-parse", "HEAD")
    line = one_error_line(hbtui("pull", "b1", "--repo", str(other), env=env), "seed commit")
    assert line == (
        f"error: {other} does not have b1's seed commit {seed[:12]}; pull into the "
        "repository the box was made from (--repo PATH)"
    )
    assert git(other, "for-each-ref") == before


def test_work_in_and_out_of_a_box_on_a_remote_host(trusted_host, sim_env, repo: Path):
    env, _state, _server = trusted_host
    env = dict(env, HBTUI_RECIPE=str(SIM_RECIPE))
    seed = git(repo, "rev-parse", "HEAD")
    made = hbtui("new", "rb1", "--host", "r1", "--repo", f"{repo}@HEAD~1", "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    first = git(repo, "rev-parse", "HEAD~1")
    assert seed != first
    work = (
        f"cd {CLONE} && test $(git rev-parse HEAD) = {first} && echo r > r.txt && git add r.txt "
        "&& git commit -qm remote"
    )
    done = hbtui("exec", "rb1", "--host", "r1", "--", "sh", "-c", work, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    shown = json.loads(hbtui("diff", "rb1", "--host", "r1", "--json", env=env).stdout)
    assert [c["subject"] for c in shown["commits"]] == ["remote"]
    pulled = hbtui("pull", "rb1", "--host", "r1", "--json", env=env)
    assert pulled.returncode == 0, pulled.stderr
    [landed] = json.loads(pulled.stdout)["refs"]
    assert landed["ref"] == "refs/remotes/box/rb1/hb/rb1"
    assert git(repo, "log", "--format=%s", "-1", landed["ref"]) == "remote"
    assert git(repo, "rev-parse", "HEAD") == seed  # the host's branch did not move


@pytest.mark.timeout(900)
def test_try_three_checks_each_and_keep_leaves_one_box_and_its_branch(
    sim_env, repo: Path, tmp_path: Path
):
    env = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)))
    task = tmp_path / "task.md"
    task.write_text("add ok.txt\n")
    made = hbtui(
        "try", "3", "t", "--repo", str(repo), "--task-file", str(task), "--check",
        "test -e ok.txt", env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    # Each progress line names its box once ("t-1: t-1 is ready" named it twice).
    assert "t-1: reserving a port" in made.stdout, made.stdout
    assert not any(f"t-{k}: t-{k}" in made.stdout for k in (1, 2, 3)), made.stdout
    boxes = sorted(b["name"] for b in json.loads(hbtui("ls", "--json", env=env).stdout))
    assert boxes == ["t-1", "t-2", "t-3"]
    for box in ("t-1", "t-3"):
        done = hbtui(
            "exec", box, "--", "sh", "-c",
            f"cd {CLONE} && touch ok.txt && git add ok.txt && git commit -qm ok", env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    listed = hbtui("try", "ls", "t", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {r["box"]: r for r in json.loads(listed.stdout)["boxes"]}
    assert {b: (r["commits"], r["check"]["status"]) for b, r in rows.items()} == {
        "t-1": (1, 0),
        "t-2": (0, 1),
        "t-3": (1, 0),
    }
    table = hbtui("try", "ls", "t", env=env).stdout
    assert "pass" in table and "fail (1)" in table
    nothing = hbtui("pull", "t-2", env=env)
    assert nothing.returncode == 0 and "nothing pulled" in nothing.stdout, nothing.stderr
    # A stopped box's message goes under the table: in a cell it widened the columns.
    assert hbtui("stop", "t-2", env=env).returncode == 0
    lines = hbtui("try", "ls", "t", env=env).stdout.splitlines()
    assert lines[0] == table.splitlines()[0], lines  # the same columns
    assert max(map(len, lines)) <= 80, lines
    assert lines[-1] == "t-2: box t-2 is not running: start it first (hbtui start t-2)"
    # Keeping asks first; without a terminal or --yes nothing changes.
    one_error_line(hbtui("try", "keep", "t-3", env=env), "--yes")
    kept = hbtui("try", "keep", "t-3", "--yes", env=env)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    boxes = [b["name"] for b in json.loads(hbtui("ls", "--json", env=env).stdout)]
    assert boxes == ["t-3"]
    assert git(repo, "log", "-1", "--format=%s", "refs/remotes/box/t-3/hb/t-3") == "ok"
    one_error_line(hbtui("try", "ls", "t", env=env), "no try")
    assert hbtui("stop", "t-3", env=env).returncode == 0
    one_error_line(hbtui("diff", "t-3", env=env), "not running", "hbtui start t-3")
    one_error_line(hbtui("pull", "t-3", env=env), "not running")


@pytest.mark.timeout(600)
def test_a_check_that_writes_files_leaves_the_work_and_a_wip_pull_clean(
    sim_env, repo: Path, tmp_path: Path
):
    """A check that compiles the agent's module wrote __pycache__/ into the clone: it
    showed in `diff --stat` and `try ls`, and a `--wip` pull shipped it."""
    env = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)))
    check = "python3 -c 'import calc' && echo 'calc imports'"
    made = hbtui(
        "try", "1", "c", "--repo", str(repo), "--task", "add calc", "--check", check, "-q",
        env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    box_sh(
        env, "c-1",
        "echo 'x = 1' > calc.py && git add calc.py && git commit -qm calc && echo n > notes.txt",
    )  # fmt: skip
    stat = hbtui("diff", "c-1", "--stat", env=env)
    assert stat.returncode == 0 and "2 file(s) changed" in stat.stdout, stat.stdout
    listed = hbtui("try", "ls", "c", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)["boxes"]
    assert row["check"]["status"] == 0 and "calc imports" in row["check"]["output"], row
    assert row["files"] == 2, row
    assert hbtui("diff", "c-1", "--stat", env=env).stdout == stat.stdout
    assert box_sh(env, "c-1", "git status --porcelain --untracked-files=all") == "?? notes.txt"
    wip = hbtui("pull", "c-1", "--wip", env=env)
    assert wip.returncode == 0, wip.stderr
    files = git(repo, "ls-tree", "-r", "--name-only", "refs/remotes/box/c-1/hbtui-wip")
    assert files.splitlines() == ["a.txt", "calc.py", "notes.txt"]


def test_a_try_whose_box_name_is_taken_makes_nothing(sim_env, repo: Path):
    """`try 2 t` beside a box t-1 made t-2, then failed t-1: a name is known to be taken
    before any box is made."""
    env = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    made = hbtui("new", "t-1", "-q", env=env)
    assert made.returncode == 0, made.stderr
    done = hbtui("try", "2", "t", "--repo", str(repo), "--task", "x", "-q", env=env)
    one_error_line(done, "'t-1' exists")
    boxes = sorted(b["name"] for b in json.loads(hbtui("ls", "--json", env=env).stdout))
    assert boxes == ["t-1"]
    assert hbtui("try", "ls", "t", env=env).returncode == 2


@pytest.mark.timeout(900)
def test_a_keep_terminated_after_its_pull_says_what_it_did(sim_env, repo: Path, tmp_path: Path):
    """SIGTERM while `try keep k-1` removed k-2 said "SIGTERM: cancelled", though k-1's work
    had landed: it says what was done and what is left, and that command finishes it."""
    import signal

    from support.cli import background, wait_for

    gates = tmp_path / "gates"
    gates.mkdir()
    env = dict(
        sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)), SMOLSIM_GATES=str(gates)
    )
    made = hbtui("try", "2", "k", "--repo", str(repo), "--task", "x", "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    commit = f"cd {CLONE} && touch k.txt && git add k.txt && git commit -qm k1"
    assert hbtui("exec", "k-1", "--", "sh", "-c", commit, env=env).returncode == 0
    hold = gates / "delete.hold"
    hold.touch()
    keeping = background("try", "keep", "k-1", "--yes", env=env)
    wait_for("k-2's delete", lambda: (gates / "delete.waiting").exists())
    keeping.send_signal(signal.SIGTERM)
    hold.unlink()
    out, _ = keeping.communicate(timeout=120)
    assert keeping.returncode == 143, out
    said = [line for line in out.splitlines() if line.startswith("error:")]
    assert len(said) == 1 and "cancelled" not in said[0], out
    assert "kept k-1, its work pulled (refs/remotes/box/k-1/hb/k-1 -> " in said[0], said
    assert said[0].endswith("before removing k-2: finish with hbtui try keep k-1 --yes"), said
    assert git(repo, "log", "-1", "--format=%s", "refs/remotes/box/k-1/hb/k-1") == "k1"
    finish = hbtui("try", "keep", "k-1", "--yes", env=env)
    assert finish.returncode == 0, finish.stdout + finish.stderr
    assert "removed k-2" in finish.stdout, finish.stdout
    assert [b["name"] for b in json.loads(hbtui("ls", "--json", env=env).stdout)] == ["k-1"]


def names(env) -> list[str]:
    return sorted(b["name"] for b in json.loads(hbtui("ls", "--json", env=env).stdout))


@pytest.mark.timeout(900)
def test_branch_count_makes_a_try_of_branches_that_keep_the_clone_and_its_seed(sim_env, repo: Path):
    env = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    seed = git(repo, "rev-parse", "HEAD")
    made = hbtui("new", "b1", "--repo", str(repo), "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    box_sh(env, "b1", "echo one > part.txt && git add part.txt && git commit -qm 'part one'")
    # Bad input: one line each, nothing made.
    for n in ("0", "-1", "17"):
        one_error_line(hbtui("branch", "b1", "--count", n, env=env), "1 to 16", n)
    one_error_line(hbtui("branch", "nope", "--count", "2", env=env), "no box named 'nope'")
    assert hbtui("new", "b1-2", "-q", env=env).returncode == 0
    one_error_line(hbtui("branch", "b1", "--count", "3", env=env), "'b1-2' exists")
    one_error_line(hbtui("branch", "b1-2", "--count", "2", env=env), "not made with a repository")
    assert names(env) == ["b1", "b1-2"]
    assert hbtui("rm", "-f", "b1-2", env=env).returncode == 0
    assert names(env) == ["b1"]

    done = hbtui("branch", "b1", "--count", "3", "--check", "test -e ok.txt", "-q", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "see: hbtui try ls b1" in done.stdout
    boxes = ["b1-1", "b1-2", "b1-3"]
    assert names(env) == ["b1", *boxes]
    for box in boxes:  # each: the clone, the work done so far, the seed, its own branch
        said = box_sh(
            env, box, "git symbolic-ref --short HEAD; git rev-parse refs/hbtui/seed; "
            "git log -1 --format=%s; git config user.name",
        ).splitlines()  # fmt: skip
        assert said == [f"hb/{box}", seed, "part one", f"agent in {box}"]
    assert box_sh(env, "b1", "git symbolic-ref --short HEAD") == "hb/b1"
    box_sh(env, "b1-2", "touch ok.txt && git add ok.txt && git commit -qm ok")
    shown = json.loads(hbtui("diff", "b1-2", "--json", env=env).stdout)
    assert [c["subject"] for c in shown["commits"]] == ["ok", "part one"]
    listed = hbtui("try", "ls", "b1", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {r["box"]: r for r in json.loads(listed.stdout)["boxes"]}
    assert {b: (r["commits"], r["check"]["status"]) for b, r in rows.items()} == {
        "b1-1": (1, 1),
        "b1-2": (2, 0),
        "b1-3": (1, 1),
    }
    kept = hbtui("try", "keep", "b1-2", "--yes", env=env)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    assert names(env) == ["b1", "b1-2"]
    pulled = "refs/remotes/box/b1-2/hb/b1-2"
    assert git(repo, "log", "--format=%s", f"{seed}..{pulled}").splitlines() == ["ok", "part one"]
    assert git(repo, "rev-parse", "HEAD") == seed  # the host's branch did not move
    # A plain branch of a box with a clone carries its work on (diff and pull said the
    # branch was "not made with a repository").
    assert hbtui("branch", "b1", "b2", "-q", env=env).returncode == 0
    assert box_sh(env, "b2", "git symbolic-ref --short HEAD; git config user.name") == (
        "hb/b2\nagent in b2"
    )
    shown = json.loads(hbtui("diff", "b2", "--json", env=env).stdout)
    assert [c["subject"] for c in shown["commits"]] == ["part one"]


@pytest.mark.timeout(900)
def test_a_branch_count_terminated_part_way_removes_every_box_it_made(sim_env, repo: Path):
    """SIGTERM once a branch is made (the fifth starts only when one of the first four is
    done) and others are being made: all are removed, the source runs, no try is left."""
    env = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    made = hbtui("new", "b1", "--repo", str(repo), "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    proc = subprocess.Popen(
        [HBTUI_BIN, "branch", "b1", "--count", "5"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "b1-5: reserving a port" in line:
            break
    else:
        pytest.fail("".join(seen))
    proc.send_signal(signal.SIGTERM)
    rest = proc.communicate(timeout=600)[0]
    assert proc.returncode == 143, "".join(seen) + rest
    assert "removing b1-" in rest and "Traceback" not in rest
    assert names(env) == ["b1"]
    one_error_line(hbtui("try", "ls", "b1", env=env), "no try named 'b1'")
    one_error_line(hbtui("diff", "b1-1", env=env), "no box named 'b1-1'")
    assert box_sh(env, "b1", "git symbolic-ref --short HEAD") == "hb/b1"
