"""A hostile box (its agent and root) against `hbtui pull` and `hbtui diff`, through the
real CLI on a simulator box: each attack is one line, in bounded time and memory, and the
host repository is byte for byte as it was (tests/core/work/test_pull_bounds.py has the same bounds
below the CLI)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from hbtui.core.foundation.git import BOX_GIT_MEMORY

from support import HBTUI_BIN, SIM_RECIPE
from support.cli import as_root, hbtui, one_line_error
from support.work import CLONE, box_sh, bundle_by_hand, git, host_repo

pytestmark = pytest.mark.sim

# Runs a command, then writes the largest peak resident set among its descendants (KiB).
PEAK = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[2:]); "
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)); "
    "sys.exit(done.returncode)"
)


def repository_files(repo: Path) -> dict[str, bytes | None]:
    """Every folder (None) and file (its bytes) of the repository's objects, refs and
    reflogs, and its branch, index and work tree."""
    found: dict[str, bytes | None] = {}
    for path in sorted(repo.rglob("*")):
        found[str(path.relative_to(repo))] = None if path.is_dir() else path.read_bytes()
    return found


def refused(done: subprocess.CompletedProcess, *words: str) -> str:
    """One line, `error: ...`, and nothing else."""
    line = one_line_error(done, *words)
    assert done.stderr.strip().splitlines() == [line], done.stderr
    return line


@pytest.mark.timeout(900)
def test_a_hostile_box_cannot_make_a_pull_or_a_diff_cost_the_host(
    sim_env, tmp_path: Path
):  # fmt: skip
    repo = host_repo(tmp_path, 2, dirty=True)
    seed = git(repo, "rev-parse", "HEAD")
    env = {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE)}
    made = hbtui("new", "b1", "--repo", str(repo), "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    box_sh(env, "b1", "echo work > w.txt && git add w.txt && git commit -qm work")
    steady = repository_files(repo)

    # 40,000 branches: refused as the bundle's header arrives, before its pack.
    box_sh(
        env, "b1",
        "test ! -e .git/packed-refs && h=$(git rev-parse HEAD) && "
        "seq 40000 | sed \"s|.*|$h refs/heads/many/b&|\" > .git/packed-refs",
    )  # fmt: skip
    assert box_sh(env, "b1", "git for-each-ref refs/heads/many | wc -l") == "40000"
    began = time.monotonic()
    refused(hbtui("pull", "b1", env=env), "more than 1000 branches", "nothing fetched")
    assert time.monotonic() - began < 60  # 56 s of CPU before, for a misleading refusal
    assert repository_files(repo) == steady
    box_sh(env, "b1", "rm .git/packed-refs")

    # A delta bomb: 16 KiB of bundle that asks git for 3 GiB.
    bomb = tmp_path / "bomb.bundle"
    bundle_by_hand(bomb, seed, mib=16, copies=192)
    as_root(env, "b1", "cat > /tmp/evil.bundle", input=bomb.read_bytes())
    as_root(
        env, "b1",
        "printf '%s\\n' '#!/bin/sh' "
        "'if [ -e /tmp/evil.bundle ]; then cat > /dev/null; set -- -w 65536 /tmp/evil.bundle; fi' "
        "'exec /usr/bin/base64 \"$@\"' > /usr/local/bin/base64 && chmod 755 /usr/local/bin/base64",
    )  # fmt: skip
    peak = tmp_path / "peak"
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(peak), HBTUI_BIN, "pull", "b1"],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    refused(done, f"needs more than the {BOX_GIT_MEMORY >> 20} MiB git may use", "nothing fetched")
    # The largest of hbtui and every process it ran (its git commands, the engine's exec).
    assert int(peak.read_text()) * 1024 < 512 << 20, peak.read_text()
    assert repository_files(repo) == steady
    as_root(env, "b1", "rm /usr/local/bin/base64 /tmp/evil.bundle")

    # A git that sleeps, or drips: given up after the idle bound (3 s here), not 600 s.
    quick = {**env, "HBTUI_BOX_IDLE_SECONDS": "3"}
    for verb, does, words in [
        ("status", "exec sleep 600", "went silent while reading its work for diff"),
        ("log", "while :; do echo '::hbtui-work:: commit 0 d'; sleep 0.3; done", "for diff"),
        ("pack-objects", "exec sleep 600", "went silent while bundling its work for pull"),
        ("pack-objects", "while :; do printf abcd; sleep 1; done", "bundling its work for pull"),
    ]:
        shim = f'#!/bin/sh\ncase " $* " in *" {verb} "*) {does} ;; esac\nexec /usr/bin/git "$@"\n'
        as_root(
            env,
            "b1",
            "cat > /usr/local/bin/git && chmod 755 /usr/local/bin/git",
            input=shim.encode(),
        )
        verb_of_hbtui = "pull" if verb == "pack-objects" else "diff"
        began = time.monotonic()
        line = refused(hbtui(verb_of_hbtui, "b1", env=quick), "box b1", words)
        assert line.endswith("(less than 1024 bytes in 3 s): given up"), line
        assert time.monotonic() - began < 60, line
    assert repository_files(repo) == steady
    as_root(env, "b1", "rm /usr/local/bin/git")

    # Refused at update-ref (an earlier pull's branch zz where the box now has zz/q):
    # no object moved in, no folder left for aa/bb/cc.
    git(repo, "update-ref", "refs/remotes/box/b1/zz", seed)
    box_sh(env, "b1", "git branch aa/bb/cc && git branch zz/q")
    steady = repository_files(repo)
    refused(
        hbtui("pull", "b1", env=env), "cannot land", "refs/remotes/box/b1/zz", "nothing fetched"
    )
    assert repository_files(repo) == steady
    git(repo, "update-ref", "-d", "refs/remotes/box/b1/zz")
    box_sh(env, "b1", "git branch -D aa/bb/cc zz/q")

    # A branch hbtui-wip is refused, and the WIP ref an earlier --wip pull left stays.
    box_sh(env, "b1", "echo more >> w.txt")
    wip = hbtui("pull", "b1", "--wip", "--json", env=env)
    assert wip.returncode == 0, wip.stderr
    box_sh(env, "b1", "git branch hbtui-wip")
    steady = repository_files(repo)
    for flags in ([], ["--wip"]):
        refused(hbtui("pull", "b1", *flags, env=env), "hbtui-wip, a name hbtui keeps")
        assert repository_files(repo) == steady
    assert git(repo, "show", "refs/remotes/box/b1/hbtui-wip:w.txt") == "work\nmore"
    # Renamed, it lands as any branch.
    box_sh(env, "b1", "git branch -m hbtui-wip mine")
    assert hbtui("pull", "b1", env=env).returncode == 0
    assert git(repo, "rev-parse", "refs/remotes/box/b1/mine") == git(
        repo, "rev-parse", "refs/remotes/box/b1/hb/b1"
    )
    assert box_sh(env, "b1", f"cd {CLONE} && git status --porcelain") == "M w.txt"
