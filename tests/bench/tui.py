"""Dashboard benchmark: first paint, refresh cost with 500 boxes, key latency in a log flood.

    .venv/bin/python tests/bench/tui.py [--runs N]

First paint is measured twice, the dashboard against a bare Textual app
(header, one-row table, footer), alternating, median of --runs spawns each:
in-process, from spawn to the first frame Textual composes (headless, over
FakeService); and as the user sees it, the installed `hbtui` and a bare app
that lists the same engine once, each started in a real terminal (a private
tmux server, 160x45, the simulator with one running box) until the box's row
is in the terminal's output. Refresh cost and key latency run headless in this process
over tests/support/tui_fakes.py's FakeService; the log flood is an operation the App
runs (`run_operation`) whose call reports 250-line bursts through the same
Report a Service call gets. Dialog open: each dialog the main screen opens (New, branch,
save, load, extract, remove), from its action to its first frame, against a bare
ModalScreen with one Input, headless in one dashboard. Prints a table, then one JSON line with the
headline numbers (the goals: first_paint_user_vs_bare ≤ 1.5,
refresh_p95_ms_500_boxes ≤ 16, key_latency_p95_ms_log_flood ≤ 50).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hbtui.tui.activity import MAX_LINES  # noqa: E402  (after the path is set)

CHILD = r"""
import os, sys, time
spawned = float(os.environ["BENCH_SPAWNED"])
sys.path[:0] = [os.environ["BENCH_ROOT"], os.environ["BENCH_ROOT"] + "/tests"]
kind = sys.argv[1]
if kind == "bare":
    from textual.app import App
    from textual.widgets import DataTable, Footer, Header

    class Base(App):
        def compose(self):
            yield Header()
            yield DataTable()
            yield Footer()

        def on_mount(self):
            table = self.query_one(DataTable)
            table.add_columns("Box", "State")
            table.add_row("alpha", "running")
    app_cls, args = Base, ()
else:
    from support.tui_fakes import FakeService
    from hbtui.tui.app import HbtuiApp
    app_cls = HbtuiApp
    args = (FakeService(),)

class Timed(app_cls):
    def _display(self, screen, renderable):
        if renderable is not None and not getattr(self, "_painted", False):
            self._painted = True
            print(f"{time.time() - spawned:.6f}", flush=True)
            self.exit()
        super()._display(screen, renderable)

Timed(*args).run(headless=True, size=(160, 45))
"""


def first_paint(kind: str) -> float:
    env = dict(os.environ, BENCH_SPAWNED=repr(time.time()), BENCH_ROOT=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, kind], env=env, capture_output=True, text=True, timeout=60
    )
    line = done.stdout.strip().splitlines()
    if done.returncode or not line:
        raise RuntimeError(f"{kind} run failed: {done.stderr[-2000:]}")
    return float(line[-1]) * 1000


# The bare app of the user-side figure: the dashboard's kinds of widget, run as a script
# as `hbtui` is; it lists the same engine once (`smolvm machine ls --json`) and draws one
# row per machine, the least any dashboard must do before its first box row.
BARE_APP = r"""
import asyncio
import json
import os

from textual.app import App
from textual.widgets import DataTable, Footer, Header


class Bare(App):
    def compose(self):
        yield Header()
        yield DataTable()
        yield Footer()

    async def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns("Box", "State", "Provisioning")
        engine = await asyncio.create_subprocess_exec(
            os.environ["HBTUI_SMOLVM"], "--state-dir", os.environ["HBTUI_SMOLVM_STATE_DIR"],
            "machine", "ls", "--json", stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await engine.communicate()
        for machine in json.loads(out or b"[]"):
            table.add_row(machine["name"], machine.get("state", ""), "")


Bare().run()
"""

# The one box both list: on the screen once its row is.
BOX = "benchbox"
MARKER = BOX.encode()


class Terminal:
    """A private tmux server whose 160x45 panes start a program on a key press.

    Each spawn opens a pane waiting in `read`, pipes the pane's output to a
    file, then presses enter: the program starts (exec) and the clock runs
    until its output holds MARKER, the first frame with the box's row.
    """

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.folder = folder
        self.socket = f"hbtui-bench-{os.getpid()}"
        self.env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES", "TMUX")}
        self.spawns = 0
        # A session that stays, so the server never exits between two spawns.
        self.tmux("new-session", "-d", "-s", "keep", "-x", "160", "-y", "45", "cat")

    def tmux(self, *args: str) -> None:
        subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            check=True,
            capture_output=True,
            env=self.env,
        )

    def first_frame(self, command: str) -> float:
        """Milliseconds from enter (the program's exec) to MARKER (the box's row) on the pane."""
        self.spawns += 1
        session, output = f"s{self.spawns}", self.folder / f"pane-{self.spawns}.out"
        self.tmux(
            "new-session", "-d", "-s", session, "-x", "160", "-y", "45",
            f"read go; exec {command}",
        )  # fmt: skip
        try:
            self.tmux("pipe-pane", "-O", "-t", session, f"cat > {output}")
            deadline = time.monotonic() + 10
            while not output.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("tmux pipe-pane did not start")
                time.sleep(0.001)
            self.tmux("send-keys", "-t", session, "Enter")
            started = time.perf_counter()
            deadline = time.monotonic() + 60
            with output.open("rb") as stream:
                seen = b""
                while MARKER not in seen:
                    chunk = stream.read()
                    if chunk:
                        seen = seen[-len(MARKER) :] + chunk
                    elif time.monotonic() > deadline:
                        raise RuntimeError(f"no table on the screen of: {command}")
                    else:
                        time.sleep(0.0005)
            return (time.perf_counter() - started) * 1000
        finally:
            self.tmux("kill-session", "-t", session)

    def close(self) -> None:
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"], capture_output=True, env=self.env
        )


def first_paint_user(runs: int) -> tuple[list[float], list[float]]:
    """`hbtui` and the bare app spawned in tmux, alternating: ms to the box's row on screen.

    Both run against the simulator with a private home holding one running box.
    """
    with tempfile.TemporaryDirectory(prefix="hbtui-bench-tui-") as tmp:
        folder = Path(tmp)
        (folder / "bare.py").write_text(BARE_APP)
        (folder / "home").mkdir()
        env = dict(
            os.environ,
            TERM="xterm-256color",
            HBTUI_HOME=str(folder / "home"),
            HBTUI_SMOLVM=str(ROOT / "tests" / "sim" / "smolvm"),
            HBTUI_SMOLVM_STATE_DIR=str(folder / "engine"),
        )
        hbtui = Path(sys.executable).with_name("hbtui")
        recipe = str(ROOT / "tests" / "recipes" / "sim")
        made = subprocess.run(
            [str(hbtui), "new", BOX, "-q", "--recipe", recipe], env=env, capture_output=True
        )
        if made.returncode:
            raise RuntimeError(f"cannot make the bench's box: {made.stderr.decode()[-2000:]}")
        terminal = Terminal(folder, env)
        bare, dash = [], []
        try:
            terminal.first_frame(f"{sys.executable} {folder / 'bare.py'}")  # warm the caches
            terminal.first_frame(str(hbtui))
            for _ in range(runs):
                bare.append(terminal.first_frame(f"{sys.executable} {folder / 'bare.py'}"))
                dash.append(terminal.first_frame(str(hbtui)))
        finally:
            terminal.close()
            subprocess.run([str(hbtui), "rm", BOX, "--force"], env=env, capture_output=True)
    return bare, dash


def p95(values: list[float]) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]


async def refresh_cost(ticks: int) -> tuple[list[float], list[float]]:
    """CPU of the main thread per tick: apply the listing, then paint the frame that shows it.

    CPU time, not wall time: Textual paints on its own frame timer, and the wait for that
    timer is idle time, not cost. The frame is awaited with plain sleeps: a Pilot pause
    posts a callback to every widget on screen and waits for each, work the app never
    does on its own (it was about half of what this measured).
    """
    from hbtui.tui.app import HbtuiApp

    from support.tui_fakes import FakeService, frozen_clock, view

    frames: list[float] = []  # main-thread CPU when each frame was handed to the driver

    class Timed(HbtuiApp):
        def _display(self, screen, renderable):
            super()._display(screen, renderable)
            if renderable is not None:
                frames.append(time.thread_time())

    boxes = [
        view(
            f"box-{i:03d}",
            4790 + (i % 210),
            host="local" if i % 5 else f"h{i % 3}",
            state="running" if i % 7 else "stopped",
        )
        for i in range(500)
    ]
    service = FakeService(boxes)
    app = Timed(service, clock=frozen_clock, refresh_seconds=3600)
    apply_ms, total_ms = [], []
    async with app.run_test(size=(160, 45)) as pilot:
        while app.main.table.row_count < 500:
            await pilot.pause(0.05)
        await pilot.press("down", "down", "down")
        await pilot.pause(0.1)
        for tick in range(ticks):
            # Each tick about 5% of the boxes change state, as on a busy host.
            for i in range(tick % 20, 500, 20):
                b = service.views[i]
                service.views[i] = replace(
                    b, state="stopped" if b.state == "running" else "running"
                )
            listing = await service.boxes.listing()
            painted = len(frames)
            c0 = time.thread_time()
            app.main.show_listing(listing)
            c1 = time.thread_time()
            deadline = time.monotonic() + 2
            while len(frames) == painted and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
            apply_ms.append((c1 - c0) * 1000)
            total_ms.append(((frames[painted] if len(frames) > painted else c1) - c0) * 1000)
            await asyncio.sleep(0.05)  # ticks apart, as listings are
    return apply_ms, total_ms


# The dialogs the dashboard opens from the main screen, by the feature's action that opens each.
DIALOGS = {
    "new": ("boxes", "new"),
    "branch": ("boxes", "branch"),
    "save": ("archives", "save"),
    "load": ("archives", "load"),
    "extract": ("archives", "extract"),
    "remove": ("boxes", "remove"),
}


async def dialog_open(opens: int) -> dict[str, list[float]]:
    """Main-thread CPU from a dialog's action to the first frame that shows the dialog,
    each dialog opened `opens` times in one dashboard (the first open reads the dialogs'
    stylesheet), alternating with "bare": a ModalScreen with one Input. CPU, not wall time,
    for the reason refresh_cost gives; a dialog's reads from workers come after its frame.
    The garbage collector is set as `hbtui` sets it (hbtui/tui/dashboard.py): what start-up
    made is frozen once the first rows are up, so its full passes walk only what came after.
    """
    import gc

    from textual.screen import ModalScreen, Screen
    from textual.widgets import Input

    from hbtui.tui.app import HbtuiApp

    from support.tui_fakes import FakeService, frozen_clock

    class Bare(ModalScreen[None]):
        def compose(self):
            yield Input()

    shown: list[tuple[Screen, float]] = []  # (screen, main-thread CPU) per frame

    class Timed(HbtuiApp):
        def _display(self, screen, renderable):
            super()._display(screen, renderable)
            if renderable is not None:
                shown.append((screen, time.thread_time()))

    app = Timed(FakeService(), clock=frozen_clock, refresh_seconds=3600)
    costs: dict[str, list[float]] = {name: [] for name in ("bare", *DIALOGS)}
    async with app.run_test(size=(160, 45)) as pilot:
        while app.main.table.row_count < 4:
            await pilot.pause(0.05)
        gc.freeze()
        await pilot.pause(0.2)
        for _ in range(opens):
            for name in costs:
                # Only this opening's frames: kept, every screen drawn would stay alive
                # (each dialog's widgets), and the collector's full passes over them, up
                # to 200+ ms, landed in the opens measured next.
                shown.clear()
                painted = 0
                c0 = time.thread_time()
                if name == "bare":
                    app.push_screen(Bare())
                else:
                    feature, action = DIALOGS[name]
                    getattr(getattr(app, feature), f"action_{action}")()
                deadline = time.monotonic() + 10
                while not any(s is app.screen and s is not app.main for s, _ in shown[painted:]):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"the {name} dialog never showed")
                    await asyncio.sleep(0.001)
                first = next(t for s, t in shown[painted:] if s is app.screen)
                costs[name].append((first - c0) * 1000)
                await pilot.pause(0.1)  # its workers' answers, as a user would wait
                app.pop_screen()
                while app.screen is not app.main:
                    await asyncio.sleep(0.001)
                await pilot.pause(0.05)
    gc.unfreeze()
    return costs


async def key_latency(lines: int, presses: int) -> tuple[list[float], int]:
    """Key event in, first frame showing its effect out, while two boxes flood their logs."""
    from textual import events

    from hbtui.events import LogLine, Step
    from hbtui.tui.app import HbtuiApp

    from support.tui_fakes import FakeService, frozen_clock

    frames: list[float] = []

    class Timed(HbtuiApp):
        def _display(self, screen, renderable):
            if renderable is not None:
                frames.append(time.perf_counter())
            super()._display(screen, renderable)

    service = FakeService()
    app = Timed(service, clock=frozen_clock, refresh_seconds=3600)
    latencies: list[float] = []
    async with app.run_test(size=(160, 45)) as pilot:
        while app.main.table.row_count < 4:
            await pilot.pause(0.05)

        async def flood(report):
            # A chatty recipe: 250-line bursts as fast as a pipe delivers them
            # (25,000 lines a second), steps every 5,000 lines.
            for start in range(0, lines, 250):
                if start % 5000 == 0:
                    report(Step(start // 5000 + 1, lines // 5000, "flood"))
                for i in range(start, min(start + 250, lines)):
                    report(
                        LogLine(
                            f"\x1b[32m{i:06d}\x1b[0m compiling module {i} of {lines} "
                            "with a long enough line to need wrapping decisions"
                        )
                    )
                await asyncio.sleep(0.01)

        # Alpha and beta both flood, so whichever row is selected shows a flood.
        operations = [
            app.run_operation(("local", name), "flood", flood) for name in ("alpha", "beta")
        ]
        workers = [op.worker for op in operations if op is not None and op.worker is not None]
        table = app.main.table
        for _ in range(presses):
            if not any(w.is_running for w in workers):
                break
            target = 1 if table.cursor_row == 0 else 0
            t0 = time.perf_counter()
            app.post_message(events.Key("down" if target else "up", None))
            while not (table.cursor_row == target and frames and frames[-1] > t0):
                await asyncio.sleep(0.0005)
            latencies.append((frames[-1] - t0) * 1000)
            await asyncio.sleep(0.02)
        for w in workers:
            await w.wait()
        await pilot.pause(0.2)
        shown = app.main.log_pane.log_view.line_count
    return latencies, shown


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--ticks", type=int, default=100)
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--opens", type=int, default=9, help="times each dialog is opened")
    args = parser.parse_args()
    bare, dash = [], []
    for _ in range(args.runs):
        bare.append(first_paint("bare"))
        dash.append(first_paint("dashboard"))
    user_bare, user_dash = first_paint_user(args.runs)
    user_ratio = statistics.median(user_dash) / statistics.median(user_bare)
    apply_ms, total_ms = asyncio.run(refresh_cost(args.ticks))
    latencies, shown = asyncio.run(key_latency(args.lines, 400))
    opens = asyncio.run(dialog_open(args.opens))
    dialog_ratio = p95(opens["new"]) / p95(opens["bare"])
    ratio = statistics.median(dash) / statistics.median(bare)
    rows = [
        ("first paint, bare Textual app (median ms)", f"{statistics.median(bare):.1f}", ""),
        ("first paint, dashboard (median ms)", f"{statistics.median(dash):.1f}", ""),
        ("first paint ratio dashboard / bare", f"{ratio:.2f}", ""),
        (
            "user-side first paint in tmux, bare (median ms)",
            f"{statistics.median(user_bare):.1f}",
            "",
        ),
        (
            "user-side first paint in tmux, hbtui (median ms)",
            f"{statistics.median(user_dash):.1f}",
            "",
        ),
        ("user-side first paint ratio hbtui / bare", f"{user_ratio:.2f}", "≤ 1.5"),
        ("refresh 500 boxes: apply, CPU p95 ms", f"{p95(apply_ms):.2f}", ""),
        ("refresh 500 boxes: apply + repaint, CPU p95 ms", f"{p95(total_ms):.2f}", "≤ 16"),
        (
            f"key → screen during {args.lines} line flood, p95 ms ({len(latencies)} keys)",
            f"{p95(latencies):.1f}" if latencies else "n/a",
            "≤ 50",
        ),
        ("log lines in the pane after the flood", str(shown), f"= {MAX_LINES}"),
        *(
            (
                f"dialog open to first frame, {name}: CPU p95 / median ms",
                f"{p95(opens[name]):.1f} / {statistics.median(opens[name]):.1f}",
                "",
            )
            for name in opens
        ),
        ("dialog open p95 ratio New / bare", f"{dialog_ratio:.2f}", ""),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'value':>13}  goal")
    for name, value, goal in rows:
        print(f"{name:<{width}}  {value:>13}  {goal}")
    print(
        json.dumps(
            {
                "first_paint_vs_bare": round(ratio, 3),
                "first_paint_user_vs_bare": round(user_ratio, 3),
                "refresh_p95_ms_500_boxes": round(p95(total_ms), 2),
                "key_latency_p95_ms_log_flood": round(p95(latencies), 1) if latencies else None,
                "dialog_open_new_vs_bare": round(dialog_ratio, 2),
                "dialog_open_new_p95_ms": round(p95(opens["new"]), 1),
                "dialog_open_new_median_ms": round(statistics.median(opens["new"]), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
