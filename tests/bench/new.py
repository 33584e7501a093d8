#!/usr/bin/env python3
"""How long a user waits for a new box: from scratch, from a base, and by branching.

    .venv/bin/python tests/bench/new.py [--runs N] [--install-seconds S]   # on the simulator
    .venv/bin/python tests/bench/new.py --real [--runs N]                  # the real engine and recipe

Every figure is a whole `hbtui … -q` process, spawn to exit (what a user waits for),
median of N runs (default 3), in a private HBTUI_HOME and engine state dir:

  scratch      `hbtui new A --no-base`   the whole recipe
  base build   `hbtui base build`        reported, not part of the ratios
  from base    `hbtui new B`             create from the pack, start, first-boot.sh, executor
  branch       `hbtui branch S C`        S was started --branchable: the engine's branch
  branch copy  `hbtui branch B D`        B runs plain: stop, pack, create --from, start B again

On the simulator (tests/sim/smolvm) the recipe is a copy of tests/recipes/sim whose
install step (where the real recipe runs npm) first sleeps --install-seconds (default
20), a fixed stand-in for the minutes the real recipe spends installing; the rest is what
hbtui does. With --real: the engine hbtui finds (HBTUI_SMOLVM, PATH, smolmachines) and the
recipe shipped with hbtui, on a host that can boot guests (network needed).

After each run its boxes are removed; at the end the base, and whatever an interruption
left in the engine, even on Ctrl-C. Prints a table; the LAST line is one JSON object:
base_speedup, branch_speedup, branch_copy_speedup (scratch time ÷ each) and the medians
in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import hbtui_bin, log  # tests/bench/common.py, beside this script

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hbtui.core.doctor.checks import boot_problems  # noqa: E402
from hbtui.engine import locate_engine  # noqa: E402

from support import SIM_SMOLVM, recipe_with, sim_usable  # noqa: E402

# A user's Ctrl-C reaches the bench only (children run in their own session); the
# running hbtui then gets one SIGTERM, which it treats as Ctrl-C and rolls back.
ROLLBACK_WAIT = 300.0
ROWS = [
    ("scratch_s", "new --no-base (scratch)"),
    ("base_build_s", "base build"),
    ("base_s", "new from the base"),
    ("branch_s", "branch (branchable source)"),
    ("branch_copy_s", "branch (stop, pack, create)"),
]


class Bench:
    """Runs hbtui against one private state and removes everything it made."""

    def __init__(self, engine: str, env: dict[str, str], state_dir: Path) -> None:
        self.hbtui = hbtui_bin()
        self.engine = engine
        self.env = env
        self.state_dir = state_dir

    def run(self, *args: str) -> tuple[float, str]:
        """Seconds from spawn to exit, and stdout; a failure stops the bench with its tail."""
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [self.hbtui, *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate()
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(ROLLBACK_WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            tail = (err or out).strip().splitlines()[-3:]
            raise SystemExit(f"`hbtui {' '.join(args)}` failed: {' / '.join(tail)}")
        return seconds, out

    def boxes(self) -> dict[str, dict]:
        return {b["name"]: b for b in json.loads(self.run("ls", "--json")[1])}

    def remove(self, names: list[str]) -> None:
        for name in names:
            self.run("rm", "-f", name)

    def machines(self) -> list[str]:
        done = subprocess.run(
            [self.engine, "--state-dir", str(self.state_dir), "machine", "ls", "--json"],
            capture_output=True,
            text=True,
        )
        return [m["name"] for m in json.loads(done.stdout or "[]")] if done.returncode == 0 else []

    def clean(self) -> None:
        """Boxes and bases through hbtui, then any machine an interruption left, the engine's."""
        try:
            self.remove(list(self.boxes()))
            for base in json.loads(self.run("base", "ls", "--json")[1]):
                self.run("base", "rm", base["id"])
        except SystemExit as exc:
            log(f"cleanup: {exc}")
        for name in self.machines():
            subprocess.run(
                [
                    self.engine,
                    "--state-dir",
                    str(self.state_dir),
                    "machine",
                    "delete",
                    "--name",
                    name,
                    "--force",
                ],
                capture_output=True,
            )


def expect(ok: bool, what: str) -> None:
    """A run that did not take the path it is meant to time must not be reported."""
    if not ok:
        raise SystemExit(f"not measured: {what}")


def one_run(bench: Bench, i: int) -> dict[str, float]:
    """Each way of making a box once, checked to be that way; at most three boxes at a time."""
    t: dict[str, float] = {}
    t["scratch_s"], _ = bench.run("new", f"scratch{i}", "--no-base", "-q")
    expect(bench.boxes()[f"scratch{i}"]["base"] == "", "the scratch box was made from a base")
    bench.remove([f"scratch{i}"])
    t["base_build_s"], _ = bench.run("base", "build", "-q")
    t["base_s"], _ = bench.run("new", f"based{i}", "-q")
    bench.run("new", f"src{i}", "--branchable", "-q")
    boxes = bench.boxes()
    expect(boxes[f"based{i}"]["base"] != "", "new did not use the base")
    expect(not boxes[f"based{i}"]["branchable"], "the plain source is branchable")
    expect(boxes[f"src{i}"]["branchable"], "the --branchable source is not branchable")
    t["branch_s"], _ = bench.run("branch", f"src{i}", f"branch{i}", "-q")
    expect(bench.boxes()[f"branch{i}"]["parent"] == f"src{i}", "the branch has no parent")
    bench.remove([f"branch{i}", f"src{i}"])
    t["branch_copy_s"], _ = bench.run("branch", f"based{i}", f"copy{i}", "-q")
    copy = bench.boxes()[f"copy{i}"]
    expect(copy["parent"] == f"based{i}", "the copied branch has no parent")
    expect(copy["state"] == "running", "the copied branch is not running")
    bench.remove([f"copy{i}", f"based{i}"])
    return t


def environment(args: argparse.Namespace, root: Path) -> tuple[str, dict[str, str]]:
    """The engine and the env for hbtui: private state, the bench's recipe."""
    state = root / "engine-state"
    state.mkdir()
    env = dict(os.environ, HBTUI_HOME=str(root / "home"), HBTUI_SMOLVM_STATE_DIR=str(state))
    for var in ("HBTUI_PASSPHRASE", "BOX_PASSPHRASE", "HBTUI_RECIPE"):
        env.pop(var, None)
    if args.real:
        engine = locate_engine(os.environ.get("HBTUI_SMOLVM", "")).path
        if Path(engine).resolve() == SIM_SMOLVM.resolve():
            raise SystemExit("--real needs the real engine, but HBTUI_SMOLVM is the simulator")
    else:
        engine = str(SIM_SMOLVM)
        line = f"    sleep {args.install_seconds:g}  # bench: a fixed install time"
        env["HBTUI_RECIPE"] = str(recipe_with(root, line, name="recipe"))
    env["HBTUI_SMOLVM"] = engine
    return engine, env


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--install-seconds", type=float, default=20.0, help="simulator: the install step's time"
    )
    ap.add_argument("--real", action="store_true", help="the real engine and shipped recipe")
    args = ap.parse_args()
    if args.runs < 1 or args.install_seconds < 0:
        ap.error("--runs must be at least 1 and --install-seconds not negative")
    if args.real:
        problems = boot_problems()
        if problems:
            log(f"guests cannot boot here: {problems[0][0]}")
            return 2
    else:
        why = sim_usable()
        if why:
            log(why)
            return 2

    root = Path(tempfile.mkdtemp(prefix="hbtui-bench-new-"))
    for signum in (signal.SIGINT, signal.SIGTERM):  # also when started in the background
        signal.signal(signum, signal.default_int_handler)
    bench = None
    try:
        engine, env = environment(args, root)
        bench = Bench(engine, env, root / "engine-state")
        runs = []
        for i in range(1, args.runs + 1):
            log(f"run {i}/{args.runs} ...")
            runs.append(one_run(bench, i))
    except KeyboardInterrupt:
        log("interrupted")
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if bench is not None:
            log("removing what the bench made ...")
            bench.clean()
        shutil.rmtree(root, ignore_errors=True)

    medians = {key: statistics.median(r[key] for r in runs) for key, _ in ROWS}
    if args.real:
        print(f"real engine, the shipped recipe, {args.runs} runs")
    else:
        print(f"simulator, install step {args.install_seconds:g} s, {args.runs} runs")
    print(f"{'':<30} {'median':>9}  {'speedup':>7}")
    for key, label in ROWS:
        ratio = key not in ("scratch_s", "base_build_s")
        speedup = f"{medians['scratch_s'] / medians[key]:6.1f}x" if ratio else ""
        print(f"{label:<30} {medians[key]:7.2f} s  {speedup:>7}")
    result = {
        "base_speedup": round(medians["scratch_s"] / medians["base_s"], 1),
        "branch_speedup": round(medians["scratch_s"] / medians["branch_s"], 1),
        "branch_copy_speedup": round(medians["scratch_s"] / medians["branch_copy_s"], 1),
        **{key: round(value, 2) for key, value in medians.items()},
        "runs": args.runs,
        "engine": "real" if args.real else "simulator",
        "install_seconds": None if args.real else args.install_seconds,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
