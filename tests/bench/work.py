#!/usr/bin/env python3
"""Work in and out of boxes on the simulator, against baselines in the same run.

    sudo .venv/bin/python tests/bench/work.py [--commits N] [--runs N]

Everything runs in a private HBTUI_HOME and simulator state dir (root is needed, as for
the simulator's tests), with the simulator recipe and a base built first, so boxes are
made from it as a user's would be:

  pull   `hbtui pull BOX` of a clone with N commits (default 5,000) on top of the seed,
         into a fresh copy of the host repository each run, against the same work done by
         git alone: `git bundle create` of the same branches in the box over exec
         (`box_bundle`), then git taking it in with the checks hbtui's pull makes (`checked`:
         a strict index of the bundle's pack, every object checked, then the refs set):
         goal <= 1.5x. Plain `git fetch` of that bundle already on this machine, into
         another fresh copy, is a figure (it checks no object and makes no bundle).
  again  a second `hbtui pull BOX` into the same copy once the box has one more commit:
         what a pull sends then is that commit alone: goal <= 0.4x the first pull. The
         5,000 commits are dated a second apart up to the run's start, as an agent's
         would be; dated from it into the future (as they were), the new commit was
         older than its parent, and git's walks, which go by date, went through all
         5,000 again (in the box's pack and in the host's checks): 20 ms each here.
  try4   `hbtui try 4 NAME --repo --task` (four boxes, each cloned and its agent started)
         against one `hbtui new BOX --repo --task --agent`: goal <= 2.5x.

The installed package carries bytecode (pip compiles it); an editable checkout under
PYTHONDONTWRITEBYTECODE would compile every module at every start (most of a second), so
the package is compiled first, as tests/bench/cli.py does, and so is the simulator, run as
the tests and the other benches run it (tests/sim/bin/smolvm, its bytecode cached): run as
a script it compiled its 2,700 lines on every engine call (35 ms here), which neither the
tests nor the real engine pay, and which a pull's fixed cost then counted.

Prints a table; the LAST line is one JSON object with `pull_vs_git_pipeline`,
`pull_again_vs_pull`, `try4_vs_new`, `pull_vs_git_fetch`, the raw seconds and the load
average (1 min) at the start and end of the pull runs: other work on the machine weighs on
both sides, but more on the side with more processes.
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import json
import os
import py_compile
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from common import hbtui_bin, log  # tests/bench/common.py, beside this script

ROOT = Path(__file__).resolve().parents[2]
SIM_SOURCE = ROOT / "tests" / "sim" / "smolvm"
SIM = ROOT / "tests" / "sim" / "bin" / "smolvm"  # the simulator through its cached bytecode
RECIPE = ROOT / "tests" / "recipes" / "sim"
CLONE = "/data/home/agent/work/repo"
# A stand-in agent (the real ones need an API): it takes its prompt and ends its turn as
# Claude Code does where hbtui sees it (the box's hook hears UserPromptSubmit and Stop;
# `new` and `try` wait for that), then waits, as an agent would.
FAKE_AGENT = r"""cat > /usr/local/bin/claude <<'SH'
#!/bin/sh
[ "$1" = mcp ] && exit 0
for event in UserPromptSubmit Stop; do
    printf '{"session_id":"bench-%s","hook_event_name":"%s"}' "$$" "$event" |
        /opt/hermes-box/bin/hb-agent-hook
done
exec sleep 3600
SH
chmod 755 /usr/local/bin/claude"""

# N commits on top of HEAD in the box, made in one git fast-import (seconds, not minutes).
COMMITS = r"""
import subprocess, sys, time
n = int(sys.argv[1])
head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
out = []
when = int(time.time()) - n  # one a second, the last now: as an agent commits, in order
for i in range(n):
    body = f"line {i}\n" * 20
    msg = f"agent commit {i}\n"
    out.append(f"commit refs/heads/hb/w0\nmark :{i + 1}\n")
    out.append(f"committer agent <agent@w0> {when + i} +0000\n")
    out.append(f"data {len(msg)}\n{msg}")
    out.append(f"from {head}\n" if i == 0 else "")
    out.append(f"M 644 inline file{i % 50}.txt\ndata {len(body)}\n{body}\n")
subprocess.run(["git", "fast-import", "--quiet"], input="".join(out).encode(), check=True)
subprocess.run(["git", "reset", "-q", "--hard", "hb/w0"], check=True)
"""


class Bench:
    def __init__(self, top: Path) -> None:
        self.top = top
        self.env = {
            **os.environ,
            "HBTUI_HOME": str(top / "home"),
            "HBTUI_SMOLVM": str(SIM),
            "HBTUI_SMOLVM_STATE_DIR": str(top / "sim"),
            "HBTUI_RECIPE": str(top / "recipe"),
        }
        (top / "home").mkdir()
        (top / "sim").mkdir()
        self.hbtui = hbtui_bin()

    def run(self, *args: str, timeout: float = 1200) -> tuple[float, str]:
        began = time.perf_counter()
        done = subprocess.run(
            [self.hbtui, *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )
        took = time.perf_counter() - began
        if done.returncode != 0:
            raise SystemExit(f"hbtui {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return took, done.stdout

    def box(self, name: str, script: str, *, user: str = "agent") -> str:
        argv = [str(SIM), "--state-dir", self.env["HBTUI_SMOLVM_STATE_DIR"], "machine", "exec"]
        argv += ["--name", name, "-u", user, "--", "bash", "-c", script]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            raise SystemExit(f"in {name}: {script[:80]}...\n{done.stdout}{done.stderr}")
        return done.stdout

    def cleanup(self) -> None:
        listed = subprocess.run(
            [str(SIM), "--state-dir", self.env["HBTUI_SMOLVM_STATE_DIR"], "machine", "ls", "--json"],
            capture_output=True, text=True,
        )  # fmt: skip
        for machine in json.loads(listed.stdout or "[]"):
            subprocess.run(
                [str(SIM), "--state-dir", self.env["HBTUI_SMOLVM_STATE_DIR"], "machine",
                 "delete", "--name", machine["name"], "-f"],
                capture_output=True,
            )  # fmt: skip


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr}")
    return done.stdout.strip()


def make_repo(path: Path) -> None:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for i in range(200):
        (path / f"src{i}.txt").write_text(f"source {i}\n" * 50)
    git(path, "add", ".")
    git(path, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "seed")


def fresh_copy(repo: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(repo, dest, symlinks=True)
    return dest


def checked_fetch(copy: Path, bundle: Path) -> float:
    """Git alone, taking `bundle` in as hbtui's pull does: its pack through a strict
    index (every object checked, every object it names present), then its refs set.
    Plain `git fetch` of a bundle checks no object (git 2.39 applies no fsck to it)."""
    data = bundle.read_bytes()
    end = data.index(b"\n\n") + 2
    heads = [
        line.split(b" ", 1) for line in data[:end].splitlines()[1:] if line and line[:1] != b"-"
    ]
    began = time.perf_counter()
    subprocess.run(
        ["git", "-C", str(copy), "index-pack", "--strict", "--fix-thin", "--stdin"],
        input=data[end:], check=True, capture_output=True,
    )  # fmt: skip
    updates = "".join(
        f"update refs/remotes/x/{ref.decode().removeprefix('refs/heads/')} {sha.decode()}\n"
        for sha, ref in heads
    )
    subprocess.run(
        ["git", "-C", str(copy), "update-ref", "--stdin"], input=updates.encode(), check=True
    )
    return time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the boxes and files (debug)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("the simulator needs root")
    compileall.compile_dir(str(ROOT / "hbtui"), quiet=1)
    py_compile.compile(str(SIM_SOURCE), importlib.util.cache_from_source(str(SIM_SOURCE)))
    top = Path(tempfile.mkdtemp(prefix="hbtui-bench-work-"))
    bench = Bench(top)
    shutil.copytree(RECIPE, top / "recipe", symlinks=False)
    script = top / "recipe" / "provision" / "provision.sh"
    lines = script.read_text().splitlines()
    at = next(i for i, t in enumerate(lines) if t.startswith("step_executor_standin() {"))
    lines.insert(at + 1, FAKE_AGENT)
    script.write_text("\n".join(lines) + "\n")
    repo = top / "repo"
    make_repo(repo)
    res: dict[str, float] = {}
    try:
        log("building a base of the simulator recipe")
        bench.run("base", "build", "-q")
        task = ["--task", "the same task", "--agent", "claude"]
        log("one new --repo")
        new_s, _ = bench.run("new", "w0", "--repo", str(repo), *task, "-q")
        if os.environ.get("BENCH_SKIP_TRY"):
            try_s = new_s
        else:
            log("try 4")
            try_s, _ = bench.run("try", "4", "t", "--repo", str(repo), *task[:2], "-q")
            for k in range(1, 5):
                bench.run("rm", f"t-{k}", "--force")
        res["new_s"], res["try4_s"] = new_s, try_s

        log(f"{args.commits} commits in w0")
        (top / "commits.py").write_text(COMMITS)
        bench.box("w0", f"cat > /tmp/commits.py <<'PY'\n{COMMITS}\nPY")
        bench.box("w0", f"cd {CLONE} && python3 /tmp/commits.py {args.commits}")
        seed = git(repo, "rev-parse", "HEAD")
        # The baseline's bundle: the same branches since the seed, already on this machine.
        bench.box("w0", f"cd {CLONE} && git bundle create -q /tmp/base.bundle --branches ^{seed}")
        local_bundle = top / "base.bundle"
        subprocess.run(
            [str(SIM), "--state-dir", bench.env["HBTUI_SMOLVM_STATE_DIR"], "machine", "cp",
             "w0:/tmp/base.bundle", str(local_bundle)],
            check=True, capture_output=True,
        )  # fmt: skip
        res["bundle_mib"] = local_bundle.stat().st_size / (1 << 20)
        pulls, again, fetches, checked, made = [], [], [], [], []
        res["load_before"] = os.getloadavg()[0]
        for run in range(args.runs):
            copy = fresh_copy(repo, top / "pull-repo")
            took, out = bench.run("pull", "w0", "--repo", str(copy), "--json")
            assert git(copy, "rev-list", "--count", "refs/remotes/box/w0/hb/w0") == str(
                args.commits + 1
            )
            pulls.append(took)
            res["pull_bytes"] = json.loads(out)["bytes"]
            # One more commit in the box, pulled on top of the 5,000 (then undone, so the
            # next run pulls what this one did).
            bench.box(
                "w0",
                f"cd {CLONE} && echo {run} > again.txt && git add again.txt && "
                "git -c user.name=a -c user.email=a@a commit -qm again",
            )
            took, out = bench.run("pull", "w0", "--repo", str(copy), "--json")
            assert git(copy, "rev-list", "--count", "refs/remotes/box/w0/hb/w0") == str(
                args.commits + 2
            )
            again.append(took)
            res["pull_again_bytes"] = json.loads(out)["bytes"]
            bench.box("w0", f"cd {CLONE} && git reset -q --hard HEAD~1")
            copy = fresh_copy(repo, top / "fetch-repo")
            began = time.perf_counter()
            git(
                copy,
                "fetch",
                "-q",
                "--no-tags",
                str(local_bundle),
                "+refs/heads/*:refs/remotes/x/*",
            )
            fetches.append(time.perf_counter() - began)
            checked.append(checked_fetch(fresh_copy(repo, top / "checked-repo"), local_bundle))
            began = time.perf_counter()
            bench.box(
                "w0", f"cd {CLONE} && git bundle create -q /tmp/again.bundle --branches ^{seed}"
            )
            made.append(time.perf_counter() - began)
            log(
                f"run {run + 1}: pull {pulls[-1]:.2f} s, again {again[-1]:.2f} s, "
                f"git fetch {fetches[-1]:.2f} s, "
                f"checked {checked[-1]:.2f} s, box bundle {made[-1]:.2f} s"
            )
        res["load_after"] = os.getloadavg()[0]
        res["pull_s"] = statistics.median(pulls)
        res["pull_again_s"] = statistics.median(again)
        res["git_fetch_s"] = statistics.median(fetches)
        res["checked_git_s"] = statistics.median(checked)
        res["box_bundle_s"] = statistics.median(made)
    finally:
        if args.keep:
            log(f"kept: {top} (env: HBTUI_HOME, HBTUI_SMOLVM_STATE_DIR, HBTUI_RECIPE under it)")
        else:
            bench.cleanup()
            shutil.rmtree(top, ignore_errors=True)
    res["pull_vs_git_fetch"] = res["pull_s"] / res["git_fetch_s"]
    res["try4_vs_new"] = res["try4_s"] / res["new_s"]
    res["pull_vs_checked_git"] = res["pull_s"] / res["checked_git_s"]
    res["pull_vs_git_pipeline"] = res["pull_s"] / (res["box_bundle_s"] + res["checked_git_s"])
    res["pull_again_vs_pull"] = res["pull_again_s"] / res["pull_s"]
    print(f"bundle of {args.commits} commits: {res['bundle_mib']:.2f} MiB")
    print(
        f"pull      {res['pull_s']:7.2f} s   git fetch {res['git_fetch_s']:7.2f} s"
        f"   (load {res['load_before']:.1f} -> {res['load_after']:.1f})"
    )
    print(
        f"          git with pull's checks {res['checked_git_s']:.2f} s"
        f" ({res['pull_vs_checked_git']:.2f}x);"
        f" the bundle made in the box {res['box_bundle_s']:.2f} s"
    )
    print(
        f"pull again {res['pull_again_s']:6.2f} s   (one commit on top of the first pull: "
        f"{res['pull_again_bytes']:.0f} bytes sent, the first {res['pull_bytes']:.0f})"
    )
    print(f"try 4     {res['try4_s']:7.2f} s   new       {res['new_s']:7.2f} s")
    goals = (("pull_vs_git_pipeline", 1.5), ("pull_again_vs_pull", 0.4), ("try4_vs_new", 2.5))
    for key, goal in goals:
        print(
            f"{key:<20} {res[key]:6.2f}x  (goal <= {goal}x)  {'ok' if res[key] <= goal else 'MISSED'}"
        )
    print(json.dumps({k: round(v, 3) for k, v in res.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
