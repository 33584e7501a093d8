"""The details view, live resources, the command line, sorting, bulk actions and the
k9s-style keys.

The first part checks the core's side (`Service.boxes.details`, `Service.boxes.stats`,
`hbtui inspect`) against the simulator; the rest drives the dashboard with
Pilot over `FakeService`.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections import Counter, deque
from dataclasses import replace
from types import SimpleNamespace

import pytest
from textual.widgets import Input, Sparkline
from textual.widgets._footer import FooterKey

from hbtui.core.boxes.details import parse_stats
from hbtui.core.foundation.specs import NewSpec
from hbtui.core.foundation.views import BoxStats
from hbtui.tui.app import HbtuiApp
from hbtui.tui.archives.bulk import BulkSaveDialog
from hbtui.tui.boxes.details import DetailsScreen
from hbtui.tui.boxes.new import NewBoxDialog
from hbtui.tui.widgets.command_line import CommandLine

from support import HBTUI_BIN, SIM_RECIPE
from support.pilot import SIZE, make_app, rows, settled, until
from support.tui_fakes import FakeService, frozen_clock, view

sim = pytest.mark.sim


# -- the core: stats read leniently, details, inspect ---------------------------------------------


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        (
            {"cpu_percent": 12.5, "memory_mib": 300, "memory_limit_mib": 4096},
            BoxStats(12.5, 300.0, 4096.0),
        ),
        ({"cpu": "7.5%", "rss_bytes": 64 * 1024 * 1024}, BoxStats(7.5, 64.0, None)),
        (
            {"cpu": {"percent": 3}, "memory": {"used_bytes": 2**30, "limit_bytes": 2**31}},
            BoxStats(3.0, 1024.0, 2048.0),
        ),
        ({"cpu_percent": True, "memory_mib": -1, "state": "running"}, None),
        ({"cpu_percent": float("nan"), "memory_mib": "lots"}, None),
    ],
)
def test_stats_are_read_whatever_the_engine_calls_them(reported, expected):
    assert parse_stats(reported) == expected


@sim
async def test_sim_details_and_stats_of_a_running_box(sim_service, monkeypatch):
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))
    await sim_service.new(NewSpec("web1"))
    details = await sim_service.boxes.details("web1")
    sections = {s.title: dict(s.fields) for s in details.sections}
    assert sections["Box"]["state"] == "running"
    assert sections["Network"]["URL"] == details.view.url
    assert sections["Labels"]["hbtui"] == "1"
    assert sections["Recipe"]["its version"] == sections["Recipe"]["made with version"]
    assert sections["Logs"]["provisioning log"].endswith(".log")
    assert details.engine_record["name"] == "web1"
    # The simulator measures its own process tree: a running box uses some memory.
    assert details.stats is not None and details.stats.memory_mib and details.stats.memory_mib > 1
    assert details.stats.memory_limit_mib == 4096
    live = await sim_service.boxes.stats(["web1"])
    assert live["web1"].cpu_percent is not None
    await sim_service.boxes.stop("web1")
    assert await sim_service.boxes.stats(["web1"]) == {}  # a stopped box has no figures, no error
    assert (await sim_service.boxes.details("web1")).stats is None


@sim
def test_sim_inspect_verb(sim_env):
    env = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    subprocess.run([HBTUI_BIN, "new", "-q", "web2"], env=env, check=True, capture_output=True)
    shown = subprocess.run(
        [HBTUI_BIN, "inspect", "web2"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "Labels" in shown and "hbtui.port" in shown and "CPU " in shown
    data = json.loads(
        subprocess.run(
            [HBTUI_BIN, "inspect", "--json", "web2"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert data["engine"]["name"] == "web2" and data["stats"]["memory_mib"] > 0
    missing = subprocess.run(
        [HBTUI_BIN, "inspect", "nope"], env=env, capture_output=True, text=True
    )
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines() == ["error: no box named 'nope' (see: hbtui ls)"]


# -- the dashboard (Pilot, FakeService) ----------------------------------------------------------


def header(app) -> str:
    return app.main.table.render_line(0).text


def order(app) -> list[str]:
    return list(rows(app))


async def started(pilot, app) -> None:
    await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")


async def test_j_k_g_and_G_move_in_the_table(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        table = app.main.table
        await pilot.press("j", "j")
        assert table.selected_key() == ("lab", "delta")
        await pilot.press("k")
        assert table.selected_key() == ("local", "beta")
        await pilot.press("G")
        assert table.selected_key() == ("local", "gamma")
        await pilot.press("g")
        assert table.selected_key() == ("local", "alpha")


async def test_command_line_completes_runs_and_refuses_in_one_line(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await pilot.press("colon")
        line = app.main.query_one(CommandLine)
        assert line.display and line.has_focus
        await pilot.press(*"sto", "tab")
        assert line.value == "stop "
        await pilot.press("b", "tab")
        assert line.value == "stop beta"
        await pilot.press("enter")
        await until(pilot, lambda: ("stop", "beta", "local") in static_service.calls)
        assert not line.display and app.main.table.has_focus
        assert app.main.table.selected_key() == ("local", "beta")  # the box it named
        await pilot.press("colon", *"frobnicate web1", "enter")
        assert line.display  # still open, to fix the typo
        assert line.border_subtitle == "unknown command 'frobnicate'; tab lists what fits"
        line.value = "start nosuchbox"
        await pilot.press("enter")
        assert line.border_subtitle == "no box named 'nosuchbox' in the table"
        line.value = "[/]"  # typed, said back as text: as markup it ended the dashboard
        await pilot.press("enter")
        await settled(pilot)
        said = line.render_str(line.border_subtitle).plain
        assert app.is_running and "unknown command '[/]'" in said
        await pilot.press("escape")
        assert not line.display
        await pilot.press("colon", *"new", "enter")
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
        await pilot.press("escape")
        await pilot.press("colon", "q", "enter")
        await until(pilot, lambda: not app.is_running, what="quit by :q")


async def test_palette_shows_keys_and_no_textual_duplicates(static_service):
    static_service.config.keymap = {"new": "ctrl+n"}
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        commands = list(app.get_system_commands(app.main))
        titles = [c.title for c in commands]
        assert titles.count("Quit") == 1 and "Keys" not in titles
        helps = {c.title: c.help for c in commands}
        assert helps["New box"].startswith("key ^n · ")
        assert helps["Stop box"].startswith("key x · ")
        assert helps["Box details"].startswith("key i · ")


async def test_details_view_and_live_figures(static_service):
    static_service.usage = {"alpha": [(5.0, 200.0), (40.0, 260.0), (75.0, 310.0)]}
    app = make_app(static_service, refresh=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        # The table's CPU · Mem column: running boxes only.
        await until(pilot, lambda: "MiB" in rows(app)["local/alpha"].split("MiB", 1)[1])
        assert "%" not in rows(app)["local/beta"]  # stopped: no figures
        await pilot.press("i")
        assert isinstance(app.screen, DetailsScreen)
        screen = app.screen
        body = screen.query_one("#sections")
        await until(pilot, lambda: "Labels" in str(body.render()), what="the sections")
        text = str(body.render())
        assert "hbtui.port" in text and "4791" in text and "Last save" in text
        spark = screen.query_one("#cpu-spark", Sparkline)
        await until(pilot, lambda: len(set(spark.data or [])) >= 2, what="a moving sparkline")
        assert set(spark.data) <= {5.0, 40.0, 75.0}
        assert "peak" in str(screen.query_one("#cpu-label").render())
        raw = screen.query_one("#raw")
        assert not raw.display
        await pilot.press("y")
        assert raw.display and '"name": "alpha"' in str(raw.render())
        await pilot.press("escape")
        assert app.screen is app.main
        # A box that is gone says so in the view, not as a crash.
        await pilot.press("G")
        static_service.broken["details"] = "engine exploded"
        await pilot.press("i")
        await until(
            pilot, lambda: "engine exploded" in str(app.screen.query_one("#sections").render())
        )


async def test_live_figures_are_read_for_rows_on_screen_and_seldom_but_the_selected_box(
    monkeypatch,
):
    """30 running boxes, a few rows of them on screen: each listing reads the selected box's
    figures; the other rows on screen are read once per STATS_SECONDS (here longer than
    the test) and keep their figures meanwhile; the rows below the screen are not read."""
    from hbtui.tui.boxes import controller as boxes

    monkeypatch.setattr(boxes, "STATS_SECONDS", 3600.0)
    fake = FakeService([view(f"box{i:02d}", 4800 + i) for i in range(30)])
    app = make_app(fake, refresh=0.1)

    def asked() -> Counter[str]:
        return Counter(name for call in fake.calls if call[0] == "stats" for name in call[1])

    async with app.run_test(size=(120, 24)) as pilot:
        await until(pilot, lambda: asked()["box00"] >= 5, what="five reads of the selected box")
        on_screen = {name for _host, name in app.main.table.keys_on_screen()}
        assert "box00" in on_screen and 4 <= len(on_screen) < 30
        assert set(asked()) <= on_screen
        assert all(asked()[name] == 1 for name in on_screen - {"box00"}), asked()
        shown = rows(app)
        assert all("MiB" in shown[f"local/{name}"] for name in on_screen)


async def test_stats_asks_the_engine_a_few_boxes_at_a_time():
    """`Service.boxes.stats` of 30 boxes: at most STATS_CONCURRENCY engine calls at once (each is
    a process; all at once loaded a small machine)."""
    from hbtui.core.boxes.details import STATS_CONCURRENCY, stats

    class Engine:
        running = most = 0

        async def stats(self, name: str) -> dict[str, object]:
            self.running += 1
            self.most = max(self.most, self.running)
            await asyncio.sleep(0)  # every other call that may start, starts now
            self.running -= 1
            return {"cpu_percent": 1.0, "memory_mib": 10.0}

    engine = Engine()

    async def get(_host: str) -> SimpleNamespace:
        return SimpleNamespace(engine=engine)

    boxes = SimpleNamespace(hosts=SimpleNamespace(get=get))
    found = await stats(boxes, [f"b{i}" for i in range(30)])  # type: ignore[arg-type]
    assert len(found) == 30 and engine.most == STATS_CONCURRENCY


async def test_sort_toggles_direction_and_marks_the_header(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        assert "Box ▲" in header(app)
        assert order(app) == ["local/alpha", "local/beta", "lab/delta", "local/gamma"]
        await pilot.press("R")
        assert "Box ▼" in header(app)
        assert order(app) == ["local/gamma", "lab/delta", "local/beta", "local/alpha"]
        assert app.main.table.selected_key() == ("local", "alpha")  # the cursor kept its box
        await pilot.press("S")
        assert "Host ▲" in header(app) and "Box ▲" not in header(app)
        assert order(app)[0] == "lab/delta"
        assert "sort: host ▲" in app.main.sub_title
        # A click on a column's label sorts by it; a second click reverses.
        table = app.main.table
        await pilot.click(table, offset=(table._widths[0] + 4, 1))  # the Host label
        assert "Host ▼" in header(app)


async def test_marked_boxes_start_stop_and_save_together(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await pilot.press("space", "space")  # alpha, beta (space moves down)
        table = app.main.table
        assert [v.name for v in table.marked_views()] == ["alpha", "beta"]
        assert rows_text(app)[0].startswith("●") and rows_text(app)[1].startswith("●")
        assert "2 marked" in app.main.sub_title
        await pilot.press("x")
        await until(
            pilot,
            lambda: (
                {("stop", "alpha", "local"), ("stop", "beta", "local")} <= set(static_service.calls)
            ),
        )
        assert not table.marked  # done: the marks go
        await until(pilot, lambda: not any(a.running for a in app.activities.values()))
        await pilot.press("g", "space", "space", "w")
        assert isinstance(app.screen, BulkSaveDialog)
        dialog = app.screen
        dialog.query_one("#passphrase", Input).value = "hunter22"
        dialog.query_one("#passphrase2", Input).value = "hunter22"
        await pilot.pause(0.3)  # a button ignores a click within 0.2 s of the last one
        await pilot.click("#ok")
        await until(
            pilot,
            lambda: {c[1] for c in static_service.calls if c[0] == "save"} == {"alpha", "beta"},
        )
        saves = [c for c in static_service.calls if c[0] == "save"]
        assert all(b"hunter22" in c for c in saves) and all(None in c for c in saves)


def rows_text(app) -> list[str]:
    table = app.main.table
    return [table.render_line(y).text for y in range(1, table.row_count + 1)]


async def test_footer_refresh_feedback_toasts_and_empty_filter(static_service, monkeypatch):
    monkeypatch.setenv("TZ", "UTC")  # the status line says the local time
    time.tzset()
    app = make_app(static_service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        # The rows come before the footer's keys (the first listing goes first).
        await until(pilot, lambda: app.main.query(FooterKey), what="the footer's keys")
        footer = {k.key: k.description for k in app.main.query(FooterKey)}
        assert footer["enter"] == "Shell"
        assert {"e", "S", "t"} <= set(footer)
        status = app.main.query_one("#host-status")
        await until(pilot, lambda: "listed at 12:00:00" in str(status.render()))
        calls = static_service.list_calls
        app.main.action_refresh_now()
        assert "refreshing" in str(status.render())
        await until(pilot, lambda: static_service.list_calls > calls)
        await until(pilot, lambda: "listed at" in str(status.render()))
        for _ in range(3):
            app.notify("the same thing", severity="warning")
        await settled(pilot)
        same = [n.message for n in app._notifications if n.message.startswith("the same")]
        assert same == ["the same thing (×3)"]
        await pilot.press("slash", *"zzz")
        await settled(pilot)
        assert app.main.table.row_count == 0
        assert "no box matches 'zzz'" in app.main.table.render_line(1).text


def test_details_snapshot(snap_compare, monkeypatch):
    """The details view at 160x45 with two minutes of figures (docs/images/details.svg)."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    app = HbtuiApp(FakeService(), clock=frozen_clock, refresh_seconds=60)

    async def run_before(pilot):
        while app.main.table.row_count == 0:
            await pilot.pause(0.05)
        await settled(pilot)
        wave = [(8 + 30 * ((i * 7) % 11) / 10, 280 + 4 * i) for i in range(60)]
        app.boxes.usage_history[("local", "alpha")] = deque(
            BoxStats(cpu, memory, 4096.0) for cpu, memory in wave
        )
        await pilot.press("i")
        await pilot.pause(1.2)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


@sim
async def test_sim_live_column_and_details_view(sim_service, monkeypatch):
    """Against the simulator: the engine's real figures reach the column and the view."""
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))
    await sim_service.new(NewSpec("live1"))
    app = make_app(sim_service, refresh=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "local/live1" in rows(app), timeout=30, what="the row")
        await until(
            pilot,
            lambda: rows(app)["local/live1"].count("MiB") == 2,  # memory, then the figure
            timeout=30,
            what="the CPU · Mem figure",
        )
        await pilot.press("i")
        screen = app.screen
        assert isinstance(screen, DetailsScreen)
        body = screen.query_one("#sections")
        await until(pilot, lambda: "Recipe" in str(body.render()), timeout=30)
        assert "made with version" in str(body.render())
        await until(
            pilot,
            lambda: "MiB of 4096 MiB" in str(screen.query_one("#memory-label").render()),
            timeout=30,
        )


async def test_boxes_that_stop_do_not_move_the_columns(static_service):
    """The live figures keep their room: the last boxes with figures stopping shifts no
    column, and changes no scrollable size (which would lay the whole screen out again)."""
    app = make_app(static_service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot, app)
        await until(pilot, lambda: "MiB" in rows(app)["local/alpha"].split("4096 MiB")[1])
        table = app.main.table
        header, size = table.render_line(0).text, table.virtual_size
        static_service.views = [replace(b, state="stopped") for b in static_service.views]
        app.main.show_listing(await static_service.boxes.listing())
        await settled(pilot)
        assert "%" not in "".join(rows(app).values())
        assert table.render_line(0).text == header and table.virtual_size == size
