#!/usr/bin/env python3
"""Agents at a glance with many boxes: refresh cost, the dashboard's CPU, UI tick, ask→shown;
and how long `hbtui agents resume` takes.

    .venv/bin/python tests/bench/agents.py [--boxes 30] [--seconds 60] [--period 10]
                                           [--refreshes 5] [--no-stats] [--resumes 3]
                                           [--resume-only]

On the simulator (tests/sim/smolvm), in a private HBTUI_HOME and engine state dir: makes
--boxes boxes (`hbtui new`, the sim recipe, four at once) and starts an agent stand-in in
each, in tmux as the agent user: a small script that writes its status file as
hb-agent-hook does (to a temporary name, then renamed), turning `needs-you` once every
--period seconds (the boxes' turns spread over the period) and `working` in between.

The dashboard (HbtuiApp over the real Service) runs headless in this process with the
selected box's agent preview shown (its pane captured every second). Over --seconds:

  dashboard_cpu_percent   this process's CPU time (user + system) over the wall time, in
                          % of one core (the engine execs it starts are their own processes)
  tick_p95_ms             how late a 50 ms timer on the dashboard's event loop fires, p95:
                          whatever blocks the UI shows here (the same timer without
                          the dashboard, for 10 s before it starts, says what the
                          machine's load alone costs; column_update_cpu_p95_ms is the
                          CPU time of one update of the Agent column, which load does
                          not stretch; box_watchers_cpu_percent is what the boxes'
                          `hb agents --watch` used meanwhile, all together)
  ask_to_shown_p95_ms     from a stand-in writing `needs-you` (its `since`, the box and
                          host share a clock) to the Agent column showing it, p95

then, with the dashboard still running:

  refresh_p95_ms_30_boxes one `Service.agents.listing()` of the dashboard's Service, p95 of
                          --refreshes (5): every box whose status stream runs answers
                          from its stream, the others with an exec in the box (eight at
                          once); the poll the dashboard falls back to
  refresh_cold_p95_ms     the same from a second Service without streams (`hbtui agents`,
                          a script): an exec in every box, eight at once. Not a goal: on
                          the simulator each exec is an engine process and the box's
                          helper (bash, node) on the same cores, about 0.25 s of CPU

then, in a box of its own with the real `claude` (the agent tests' stand-in: the host's
claude against the fake Messages API in the box), started at its prompt by `hbtui agents
start`:

  resume_s                `hbtui agents resume` of the stopped session (`agents stop`)
                          until `hbtui agents` shows it idle or working, the slowest of
                          --resumes (3); -1 without claude. --resume-only measures only this

--no-stats leaves out the dashboard's `machine stats` (the CPU and memory of the rows on
screen: the selected box's after each listing, the others' every 10 s, four at once), to
see their share of the load.

Goals: ≤ 1000 ms, ≤ 15 %, ≤ 16 ms, ≤ 1000 ms, ≤ 10 s. Boxes are removed at the end, even on
Ctrl-C. The LAST line is one JSON object with the figures and the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from common import hbtui_bin, log  # tests/bench/common.py, beside this script

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support import SIM_RECIPE, SIM_SMOLVM, sim_usable  # noqa: E402
from support.agents import CLAUDE, real_claude_recipe  # noqa: E402

# The stand-in, run as the agent in tmux: one session whose status file says `working`,
# then `needs-you` at a known time (its `since`), then `working` again, every period.
STAND_IN = r"""
import json, os, socket, sys, time
period, offset = float(sys.argv[1]), float(sys.argv[2])
state = os.path.expanduser("~/.local/state/hermes-box/agents")
os.makedirs(state, exist_ok=True)
sid = "bench-" + socket.gethostname()
pid = os.getpid()
stat = open(f"/proc/{pid}/stat").read()
start = stat[stat.rindex(")") + 2:].split()[19]
started = time.time()

def write(status, waiting=""):
    body = {"agent": "claude", "session_id": sid, "status": status, "pid": pid,
            "proc_start": start, "since": time.time(), "started": started,
            "waiting_for": waiting, "cwd": os.path.expanduser("~/workspace"),
            "pane": os.environ.get("TMUX_PANE", "")}
    tmp = f"{state}/{sid}.json.{pid}.tmp"
    with open(tmp, "w") as f:
        json.dump(body, f)
    os.replace(tmp, f"{state}/{sid}.json")

base, turn = time.time() + offset, 0
while True:
    for at, status in ((0.0, "working"), (0.5, "needs-you"), (0.75, "working")):
        time.sleep(max(0.0, base + (turn + at) * period - time.time()))
        waiting = f"Bash: make test # turn {turn}" if status == "needs-you" else ""
        print(status, waiting, flush=True)
        write(status, waiting)
    turn += 1
"""

START = """
set -e
git -C ~/workspace init -q 2>/dev/null || true
cat > ~/stand_in.py
tmux new-session -d -s agent -x 120 -y 30 "python3 ~/stand_in.py {period} {offset}"
"""


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]


def make_boxes(hbtui: str, names: list[str], period: float) -> None:
    def make(i_name: tuple[int, str]) -> None:
        i, name = i_name
        done = run([hbtui, "new", name, "-q", "--recipe", str(SIM_RECIPE)], timeout=600)
        if done.returncode:
            raise RuntimeError(f"hbtui new {name}: {done.stderr.strip()[-500:]}")
        offset = period * i / len(names)
        script = START.format(period=period, offset=offset)
        started = run([hbtui, "exec", name, "--", "sh", "-c", script], input=STAND_IN, timeout=120)
        if started.returncode:
            raise RuntimeError(f"stand-in in {name}: {started.stderr.strip()[-500:]}")
        log(f"  {name} ready")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(make, enumerate(names)))


def watchers_cpu() -> float:
    """CPU seconds used so far by the boxes' `hb agents --watch` (the simulator's boxes
    are processes of this kernel); a watcher that ended since is not counted."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if b"hb-agents\0--watch" in cmdline:
            fields = stat[stat.rindex(")") + 2 :].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


async def tick_lags(seconds: float) -> list[float]:
    """How late a 50 ms timer fires on this event loop, each time, for `seconds`."""
    loop = asyncio.get_running_loop()
    lags: list[float] = []
    end = loop.time() + seconds
    while loop.time() < end:
        due = loop.time() + 0.05
        await asyncio.sleep(0.05)
        lags.append(max(0.0, loop.time() - due))
    return lags


class Asks:
    """Wraps the box table's `set_agents`: each `needs-you` it draws for the first time,
    with how long after the stand-in wrote it (its `since`)."""

    def __init__(self, table) -> None:  # type: ignore[no-untyped-def]
        from hbtui.core.agents.sessions import NEEDS_YOU

        self.needs_you = NEEDS_YOU
        self.shown: dict[tuple[str, float], float] = {}  # (box, since) -> seconds
        self.counting = False
        self.work: list[float] = []  # CPU time of each update of the Agent column
        self.original = table.set_agents
        table.set_agents = self.set_agents

    def waiting(self, agents):  # type: ignore[no-untyped-def]
        for row in agents.values():
            for s in row.sessions:
                if s.status == self.needs_you and s.since:
                    yield (s.box, s.since)

    def start(self, agents) -> None:  # type: ignore[no-untyped-def]
        """What waits already is no ask this run saw."""
        self.shown.update((key, -1.0) for key in self.waiting(agents))
        self.counting = True

    def set_agents(self, agents, activities, now) -> None:  # type: ignore[no-untyped-def]
        cpu = time.thread_time()
        self.original(agents, activities, now)
        if self.counting:
            self.work.append(time.thread_time() - cpu)
            at = time.time()
            for key in self.waiting(agents):
                self.shown.setdefault(key, at - key[1])

    def seconds(self) -> list[float]:
        return [v for v in self.shown.values() if v >= 0]


async def all_shown(pilot, boxes: int) -> float:  # type: ignore[no-untyped-def]
    began = time.monotonic()
    while sum(1 for r in pilot.app.main.agent_panel.agents.values() if r.sessions) < boxes:
        if time.monotonic() > began + 300:
            raise RuntimeError(f"only {len(pilot.app.main.agent_panel.agents)} boxes showed agents")
        await pilot.pause(0.1)
    return time.monotonic() - began


async def refreshed(service, boxes: int, refreshes: int) -> list[float]:  # type: ignore[no-untyped-def]
    """How long each of `refreshes` calls of `service.agents.listing()` took."""
    times = []
    for _ in range(refreshes):
        t0 = time.monotonic()
        rows = await service.agents.listing()
        times.append(time.monotonic() - t0)
        if sum(1 for r in rows if r.sessions) < boxes:
            raise RuntimeError(f"a refresh saw agents in fewer than {boxes} boxes: {rows}")
    return times


def session_status(hbtui: str, box: str) -> str:
    """The status of the box's newest claude session, as `hbtui agents` says it."""
    done = run([hbtui, "agents", box, "--json"], timeout=120)
    rows = json.loads(done.stdout or "[]")
    found = [s for r in rows for s in r["sessions"] if s["agent"] == "claude"]
    return max(found, key=lambda s: s["since"] or 0)["status"] if found else "none"


def until_status(hbtui: str, box: str, wanted: tuple[str, ...], limit: float = 120) -> None:
    deadline = time.monotonic() + limit
    while (now := session_status(hbtui, box)) not in wanted:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{box}'s agent never became {' or '.join(wanted)} (is {now})")


def resumes(hbtui: str, folder: Path, runs: int) -> list[float]:
    """Seconds from `agents resume` to the session shown idle or working, `runs` times."""
    box = "r1"
    made = run([hbtui, "new", box, "-q", "--recipe", str(real_claude_recipe(folder))], timeout=600)
    if made.returncode:
        raise RuntimeError(f"hbtui new {box}: {made.stderr.strip()[-500:]}")
    started = run(
        [hbtui, "agents", "start", box, "--agent", "claude", "--keyless", "--task", "say hi"],
        timeout=300,
    )  # a conversation to resume (a session never asked anything has none)
    if started.returncode:
        raise RuntimeError(f"agents start: {started.stderr.strip()[-500:]}")
    log(f"  {started.stdout.strip()}")
    until_status(hbtui, box, ("idle",))
    took = []
    for _ in range(runs):
        stopped = run([hbtui, "agents", "stop", box, "--yes"], timeout=120)
        if stopped.returncode:
            raise RuntimeError(f"agents stop: {stopped.stderr.strip()[-500:]}")
        until_status(hbtui, box, ("ended",))
        t0 = time.monotonic()
        resumed = run([hbtui, "agents", "resume", box], timeout=300)
        if resumed.returncode:
            raise RuntimeError(f"agents resume: {resumed.stderr.strip()[-500:]}")
        until_status(hbtui, box, ("idle", "working"))
        took.append(time.monotonic() - t0)
        log(f"  resumed, shown idle or working after {took[-1]:.1f} s")
    return took


async def measure(
    boxes: int, seconds: float, refreshes: int, stats: bool
) -> dict[str, float | int]:
    from hbtui.tui.app import HbtuiApp
    from hbtui.tui.boxes.table import BoxTable
    from hbtui.wiring import build_service

    class WithoutStats(HbtuiApp):
        def on_stats_wanted(self, _message: object) -> None:
            """--no-stats: the per-box `machine stats` after each listing is left out."""

    bare = await tick_lags(min(10.0, seconds))  # the machine's own share of the lateness
    service = build_service()
    app = (HbtuiApp if stats else WithoutStats)(service, refresh_seconds=2)
    async with app.run_test(size=(160, 45)) as pilot:
        shown_s = await all_shown(pilot, boxes)
        log(f"all {boxes} boxes' agents shown {shown_s:.1f} s after the dashboard started")
        await pilot.press("v")  # the selected box's agent screen, captured every second
        asks = Asks(app.main.query_one(BoxTable))
        asks.start(app.main.agent_panel.agents)
        in_boxes = watchers_cpu()
        before, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
        lags = await tick_lags(seconds)
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - wall
        in_boxes = watchers_cpu() - in_boxes
        asks.counting = False
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) / wall

        times = await refreshed(service, boxes, refreshes)
        cold = build_service()
        cold_times = await refreshed(cold, boxes, refreshes)
        await cold.close()
    await service.close()
    seen = asks.seconds()
    return {
        "refresh_p95_ms_30_boxes": round(p95(times) * 1000) if times else -1,
        "dashboard_cpu_percent": round(cpu * 100, 1),
        "tick_p95_ms": round(p95(lags) * 1000, 1),
        "ask_to_shown_p95_ms": round(p95(seen) * 1000),
        "ask_to_shown_median_ms": round(statistics.median(seen) * 1000),
        "asks": len(seen),
        "refresh_median_ms": round(statistics.median(times) * 1000) if times else -1,
        "refresh_cold_p95_ms": round(p95(cold_times) * 1000) if cold_times else -1,
        "all_boxes_shown_s": round(shown_s, 1),
        "tick_p95_ms_without_dashboard": round(p95(bare) * 1000, 1),
        "column_update_cpu_p95_ms": round(p95(asks.work) * 1000, 1),
        "box_watchers_cpu_percent": round(in_boxes / wall * 100, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--boxes", type=int, default=30)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--period", type=float, default=10.0)
    parser.add_argument("--refreshes", type=int, default=5, help="Service.agents.listing() calls")
    parser.add_argument("--resumes", type=int, default=3, help="agents resume runs (resume_s)")
    parser.add_argument(
        "--resume-only", action="store_true", help="measure only resume_s (one box, no dashboard)"
    )
    parser.add_argument(
        "--no-stats",
        action="store_true",
        help="leave out the dashboard's per-box `machine stats` (to see its share of the load)",
    )
    args = parser.parse_args()
    why = sim_usable()
    if why:
        raise SystemExit(f"error: the simulator cannot run here: {why}")
    hbtui = hbtui_bin()
    folder = Path(tempfile.mkdtemp(prefix="hbtui-bench-agents-"))
    state = folder / "engine"
    os.environ.update(
        HBTUI_HOME=str(folder / "home"),
        HBTUI_SMOLVM=str(SIM_SMOLVM),
        HBTUI_SMOLVM_STATE_DIR=str(state),
    )
    names = [f"agent{i:02d}" for i in range(args.boxes)]
    load_before = os.getloadavg()
    try:
        figures: dict[str, float | int] = {}
        if not args.resume_only:
            log(
                f"making {args.boxes} boxes with an agent stand-in each (load {load_before[0]:.1f})"
            )
            t0 = time.monotonic()
            make_boxes(hbtui, names, args.period)
            log(f"made in {time.monotonic() - t0:.0f} s; the dashboard runs {args.seconds:g} s")
            figures = asyncio.run(
                measure(args.boxes, args.seconds, args.refreshes, not args.no_stats)
            )
        took = resumes(hbtui, folder, args.resumes) if CLAUDE is not None else []
        figures["resume_s"] = round(max(took), 1) if took else -1
        figures["resume_median_s"] = round(statistics.median(took), 1) if took else -1
    finally:
        listed = run([str(SIM_SMOLVM), "--state-dir", str(state), "machine", "ls", "--json"])
        for machine in json.loads(listed.stdout or "[]"):
            run([str(SIM_SMOLVM), "--state-dir", str(state), "machine", "delete", "--name",
                 machine["name"], "-f"])  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)
    load_after = os.getloadavg()
    goals = {
        "refresh_p95_ms_30_boxes": 1000,
        "dashboard_cpu_percent": 15,
        "tick_p95_ms": 16,
        "ask_to_shown_p95_ms": 1000,
        "resume_s": 10,
    }
    for key, goal in goals.items():
        if key not in figures:
            continue
        mark = "ok" if 0 <= figures[key] <= goal else "MISSED"
        log(f"  {key:26} {figures[key]:>8}   goal ≤ {goal}  {mark}")
    log(
        f"  ({figures.get('asks', 0)} asks; load average {load_before[0]:.1f} → {load_after[0]:.1f})"
    )
    print(
        json.dumps(
            {
                **figures,
                "boxes": 1 if args.resume_only else args.boxes + 1,
                "load_before": load_before[0],
                "load_after": load_after[0],
            }
        )
    )


if __name__ == "__main__":
    main()
