"""Pilot tests of the dashboard's flows.

The first half runs against `FakeService` (tests/support/tui_fakes.py: fixed data,
instant); the `sim` half drives the real Service over the smolvm simulator.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widget import Widget
from textual.widgets import Button, Input, Label

from hbtui.core.foundation.specs import NewSpec
from hbtui.core.service import Service
from hbtui.events import LogLine, Phase
from hbtui.tui.actions import ACTIONS, MAIN
from hbtui.tui.app import HbtuiApp
from hbtui.tui.archives.dialogs import ExtractDialog, LoadDialog, SaveDialog
from hbtui.tui.archives.progress import ProgressScreen, TransferMeter
from hbtui.tui.boxes.new import NewBoxDialog
from hbtui.tui.boxes.port_grid import PortGrid
from hbtui.tui.boxes.remove import RemoveDialog
from hbtui.tui.help import HelpScreen

from support import SIM_RECIPE
from support.pilot import (
    SIZE,
    SuspendableDriver,
    column,
    log_text,
    make_app,
    notes,
    rows,
    settled,
    until,
)
from support.tui_fakes import FakeService

# -- the fake -------------------------------------------------------------------------------


def _public(cls: type) -> list[str]:
    return [n for n, m in inspect.getmembers(cls) if callable(m) and n[0] != "_"]


def test_the_fake_has_the_services_signatures(hbtui_home):
    """The fake stands in for Service only as long as it has its shape (the Service's own
    methods, the same feature objects) and takes the same arguments, feature by feature."""
    from hbtui.wiring import build_service

    real, fake = build_service(), FakeService()

    features = set(Service.FEATURES)
    assert all(type(getattr(real, n)).__module__.startswith("hbtui.core.") for n in features)
    found = vars(fake).items()
    faked = {n for n, v in found if n[0] != "_" and type(v).__module__.startswith("support.")}
    assert {"boxes", "archives", "agents", "work", "tries"} <= faked <= features
    shapes = [("", Service, FakeService)]
    shapes += [(f"{n}.", type(getattr(real, n)), type(getattr(fake, n))) for n in sorted(faked)]
    public = {where + name for where, _, fake_class in shapes for name in _public(fake_class)}
    assert {
        "boxes.listing", "new", "archives.save", "archives.load", "archives.extract",
        "boxes.web", "boxes.provision_log",
    } <= public  # fmt: skip
    for where, real_class, fake_class in shapes:
        for name in _public(fake_class):
            real_method, fake_method = getattr(real_class, name), getattr(fake_class, name)
            assert inspect.signature(fake_method) == inspect.signature(real_method), where + name
            assert inspect.iscoroutinefunction(fake_method) == inspect.iscoroutinefunction(
                real_method
            ), where + name


# -- with fixed data ------------------------------------------------------------------------


async def test_rows_update_in_place_and_keep_the_cursor(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
        await pilot.press("down")  # beta
        assert app.main.table.selected_key() == ("local", "beta")
        before = app.main.table.cursor_row
        boxes = static_service.views
        boxes[1] = replace(boxes[1], state="running")
        boxes.append(replace(boxes[0], name="aardvark", port=4799))
        calls = static_service.list_calls
        await pilot.press("r")
        await until(
            pilot,
            lambda: static_service.list_calls > calls and app.main.table.row_count == 5,
            what="refresh",
        )
        assert app.main.table.selected_key() == ("local", "beta")
        assert app.main.table.cursor_row == before + 1  # aardvark sorts above
        await pilot.pause()
        assert column(app, "local/beta", 2) == "running"
        assert "failed: step 3/6 agent-tools" in rows(app)["local/gamma"]
        assert column(app, "local/alpha", -1) == "2h"


async def test_refresh_ticks_call_list_boxes_once_each(static_service):
    """Ticks go on, and no tick lists twice (a loaded machine only delays them)."""
    app = make_app(static_service, refresh=0.2)
    async with app.run_test(size=SIZE) as pilot:
        began = time.monotonic()
        await until(pilot, lambda: static_service.list_calls >= 4, timeout=30)
        await pilot.pause(0.5)  # a measured stretch: the listings in it are counted
        ticks = (time.monotonic() - began) / 0.2
        assert static_service.list_calls <= ticks + 2  # the first listing, and one in flight


async def test_host_errors_show_in_the_status_line(static_service):
    static_service.host_errors = {"lab": "ssh: connection refused"}
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.listing is not None)
        await pilot.pause()
        status = str(app.main.query_one("#host-status").render())
        assert "host lab unreachable" in status and "connection refused" in status


async def test_filter_and_sort(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("slash", *"stopped")
        await pilot.pause()
        assert app.main.table.row_count == 1
        assert app.main.table.selected_key() == ("local", "beta")
        await pilot.press("enter")  # keeps the filter, back to the table
        assert app.main.table.has_focus and app.main.table.row_count == 1
        await pilot.press("escape")
        await pilot.pause()
        assert app.main.table.row_count == 4
        await pilot.press("S")  # sort by host: lab's delta goes last
        await pilot.pause()
        assert "sort: host" in app.main.sub_title
        assert next(iter(rows(app))) == "lab/delta"


async def test_new_box_streams_its_log_and_steps(static_service):
    static_service.step_delay = 0.4
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n")
        assert isinstance(app.screen, NewBoxDialog)
        await pilot.press(*"Echo")
        assert "lower-case" in str(app.screen.query_one("#name-problem").render())
        assert app.screen.query_one("#ok", Button).disabled
        await pilot.press("backspace", "backspace", "backspace", "backspace", *"echo", "enter")
        await until(pilot, lambda: app.main.log_pane.key == ("local", "echo"))
        activity = app.activities[("local", "echo")]
        await until(
            pilot,
            lambda: activity.step is not None and activity.running,
            what="a step while running",
        )
        await until(pilot, lambda: not activity.running, what="new to finish")
        await until(pilot, lambda: app.main.table.selected_key() == ("local", "echo"))
        assert activity.step.index == 3 and activity.failure is None
        assert "base line" in "\n".join(activity.lines)
        await until(pilot, lambda: "ok tools line" in log_text(app))
        assert any("new echo: done" in n for n in notes(app))
        await until(pilot, lambda: "ready" in rows(app)["local/echo"])


async def test_a_failed_creation_shows_in_row_pane_and_notification(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"fail-one", "enter")
        key = ("local", "fail-one")
        await until(
            pilot, lambda: key in app.activities and app.activities[key].failure is not None
        )
        await until(pilot, lambda: column(app, "local/fail-one", 2) == "failed")
        assert "failed at step 3/3" in rows(app)["local/fail-one"]
        header = app.main.log_pane.query_one("#log-header")
        await until(pilot, lambda: "failed" in str(header.render()))  # caught up every 50 ms
        assert any("new fail-one failed" in n for n in notes(app))
        app.main.table.select(key)
        await pilot.press("d")  # nothing was made: the row is just forgotten
        await until(pilot, lambda: app.main.table.row_count == 4)


async def test_picking_a_port_in_the_allocator(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n")
        dialog = app.screen
        grid = dialog.query_one(PortGrid)
        await until(pilot, lambda: bool(grid.slots), what="port map")
        assert grid.next_free == 4790
        # A new box on "auto" gets any free port, at random: the map names the first free
        # one without promising that auto takes it (it said "next free: 4790").
        said = grid.render().plain
        assert "next free" not in said and "first free: 4790" in said
        assert "auto: any free port" in str(dialog.query_one("#port-hint", Label).render())
        grid.focus()
        await pilot.press("right")  # 4791 is alpha's
        await pilot.press("enter")
        assert dialog.query_one("#port", Input).value == "auto"
        await pilot.press("right", "right", "enter")  # 4793 is busy
        await pilot.press("left", "enter")  # 4792
        assert dialog.query_one("#port", Input).value == "4792"
        dialog.query_one("#name", Input).focus()
        await pilot.press(*"ported", "enter")
        await until(pilot, lambda: ("new", "ported", "local", 4792) in static_service.calls)


async def test_port_allocator_panel_names_the_selected_box(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("p")
        grid = app.main.port_grid
        await until(pilot, lambda: bool(grid.slots))
        assert grid.highlight_box == "alpha"
        app.main.table.focus()
        await pilot.pause()
        assert "4791 used by alpha" in str(grid.render())
        await pilot.hover(grid, offset=(1 + 2 * 5, 0))  # port 4795 (beta)
        assert "used by box beta" in str(grid.render())


async def test_delete_needs_the_typed_name(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("d")
        assert isinstance(app.screen, RemoveDialog)
        await pilot.press(*"alp", "enter")
        assert isinstance(app.screen, RemoveDialog) and app.screen.query_one("#ok").disabled
        await pilot.press(*"ha", "enter")
        await until(pilot, lambda: app.main.table.row_count == 3)
        assert ("remove", "alpha", "local") in static_service.calls
        assert ("local", "alpha") not in app.activities  # its log went with it


async def test_start_and_stop(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("down", "s")
        await until(pilot, lambda: column(app, "local/beta", 2) == "running")
        await pilot.press("x")
        await until(pilot, lambda: column(app, "local/beta", 2) == "stopped")
        assert "stopping beta" in "\n".join(app.activities[("local", "beta")].lines)


async def test_a_busy_box_refuses_a_second_operation(static_service):
    static_service.stalled = True  # still making when `s` comes, however loaded the machine
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"slow", "enter")
        await until(pilot, lambda: app.main.table.selected_key() == ("local", "slow"))
        await pilot.press("s")
        await until(pilot, lambda: any("slow is busy with new" in n for n in notes(app)))
        assert not any(c[0] == "start" for c in static_service.calls)


async def test_enter_hands_the_terminal_to_the_shell(static_service):
    launched = []

    async def launcher(argv):
        launched.append((argv, app.paused, app._batch_count))
        return 0

    app = make_app(static_service, launcher=launcher, driver_class=SuspendableDriver)
    suspended, resumed = [], []
    async with app.run_test(size=SIZE, headless=False) as pilot:
        app.app_suspend_signal.subscribe(app, lambda _a: suspended.append(1))
        app.app_resume_signal.subscribe(app, lambda _a: resumed.append(1))
        await until(pilot, lambda: app.main.table.row_count == 4)
        calls = static_service.list_calls
        await pilot.press("enter")
        await until(pilot, lambda: launched and static_service.list_calls > calls)
        argv, paused, batching = launched[0]
        assert argv[-2:] == ["/opt/hermes-box/bin/hb-as-agent", "--tmux"] and "alpha" in argv
        assert paused and batching  # no refresh and no painting while the shell runs
        assert suspended and resumed and not app.paused


async def test_enter_without_a_suspendable_terminal_shows_the_command(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("enter")
        await until(pilot, lambda: any("cannot be handed over" in n for n in notes(app)))
        assert any("hb-as-agent --tmux" in n for n in notes(app))


async def test_open_web_ui(static_service):
    opened = []
    app = make_app(static_service, opener=opened.append)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("o")
        await until(pilot, lambda: opened)
        assert opened == ["http://127.0.0.1:4791/"]
        assert ("web", "alpha", "local") in static_service.calls
        await until(pilot, lambda: any("http://127.0.0.1:4791/" in n for n in notes(app)))


async def test_save_to_a_missing_folder_is_refused_in_the_dialog(static_service, tmp_path):
    """The dialog closed and the progress window said "folder ... does not exist": it
    says so itself, open, with everything typed kept."""
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("w")
        dialog = app.screen
        assert isinstance(dialog, SaveDialog)
        dialog.query_one("#output", Input).value = str(tmp_path / "nowhere" / "a.hbx")
        dialog.query_one("#passphrase", Input).value = "pw"
        dialog.query_one("#passphrase2", Input).value = "pw"
        await pilot.click("#ok")
        await pilot.pause()
        error = str(dialog.query_one("#error").render())
        assert f"folder {tmp_path / 'nowhere'} does not exist" in error, error
        assert app.screen is dialog and dialog.query_one("#passphrase", Input).value == "pw"
        (tmp_path / "a.hbx").write_text("x")
        dialog.query_one("#output", Input).value = str(tmp_path / "a.hbx")
        dialog.query_one("#passphrase2", Input).focus()
        await pilot.press("enter")
        exists = f"{tmp_path / 'a.hbx'} already exists"
        await until(pilot, lambda: exists in str(dialog.query_one("#error").render()))
        assert app.screen is dialog
        assert not any(c[0] == "save" for c in static_service.calls), static_service.calls


async def test_save_dialog_returns_a_request_and_progress_shows_bytes(static_service, tmp_path):
    static_service.step_delay = 0.2
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("w")
        dialog = app.screen
        assert isinstance(dialog, SaveDialog)
        await pilot.press("tab", *"pw1", "tab", *"pw2", "enter")
        assert "differ" in str(dialog.query_one("#error").render())
        secrets = list(dialog.query(".secret").results(Input))
        dialog.query_one("#output", Input).value = str(tmp_path / "a.hbx")
        dialog.query_one("#passphrase2", Input).value = "pw1"
        dialog.query_one("#passphrase2", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen), what="progress")
        progress = app.screen
        assert all(w.value == "" for w in secrets)  # wiped once used
        await until(
            pilot, lambda: "MiB" in str(progress.query_one("#rate").render()), what="byte counts"
        )
        assert "writing archive" in str(progress.query_one("#rate").render())
        await until(pilot, lambda: app.screen is not progress, what="progress to close")
        assert ("save", "alpha", "local", tmp_path / "a.hbx", b"pw1", True) in static_service.calls
        assert "save done" in app.activities[("local", "alpha")].lines[-1]
        await until(pilot, lambda: any(f"saved to {tmp_path / 'a.hbx'}" in n for n in notes(app)))


async def test_cancelling_an_archive_operation_cancels_its_worker(static_service):
    static_service.step_delay = 0.3
    static_service.stalled = True  # still saving when Cancel is clicked, however loaded
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("w")
        app.screen.query_one("#passphrase", Input).value = "pw"
        app.screen.query_one("#passphrase2", Input).value = "pw"
        await pilot.click("#ok")
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen), what="progress")
        progress = app.screen
        await until(pilot, lambda: "MiB" in str(progress.query_one("#rate").render()))
        await pilot.click("#cancel")
        await until(pilot, lambda: app.screen is not progress, what="progress to close")
        activity = app.activities[("local", "alpha")]
        await until(pilot, lambda: not activity.running)
        assert activity.failure is None  # a cancellation is a notice, not a failure
        assert "cancelled" in activity.lines[-1]
        assert not app._running_operations()
        assert not any("saved to" in n for n in notes(app))


async def test_a_failed_archive_operation_stays_on_screen(static_service, tmp_path):
    static_service.broken = {"save": "disk full"}
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("w")
        app.screen.query_one("#passphrase", Input).value = "pw"
        app.screen.query_one("#passphrase2", Input).value = "pw"
        await pilot.click("#ok")
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        await until(pilot, lambda: "disk full" in str(progress.query_one("#error").render()))
        assert str(progress.query_one("#cancel", Button).label) == "Close"
        await pilot.click("#cancel")
        await until(pilot, lambda: app.screen is app.main)


async def test_load_dialog_checks_the_archive_then_the_box_follows(static_service, short_tmp_path):
    static_service.step_delay = 0.1
    archive = short_tmp_path / "orig.hbx"
    archive.write_bytes(b"not really an archive")
    other = short_tmp_path / "notes.txt"
    other.write_text("hello")
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("l")
        dialog = app.screen
        assert isinstance(dialog, LoadDialog)
        await pilot.press(*str(short_tmp_path / "missing.hbx"), "enter")
        assert "no such archive" in str(dialog.query_one("#error").render())
        dialog.query_one("#archive", Input).value = str(other)
        await pilot.click("#ok")
        assert "neither an hbtui archive" in str(dialog.query_one("#error").render())
        dialog.query_one("#archive", Input).value = str(archive)
        secret = dialog.query_one("#passphrase", Input)
        secret.value = "correct horse"
        dialog.query_one("#name", Input).value = "copy"
        await pilot.pause(0.3)  # a button ignores a click within 0.2 s of the last one
        await pilot.click("#ok")
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen), what="progress")
        progress = app.screen
        assert secret.value == ""  # wiped once used
        await until(
            pilot, lambda: "MiB" in str(progress.query_one("#rate").render()), what="byte counts"
        )
        await until(pilot, lambda: app.screen is not progress, what="progress to close")
        assert ("load", archive, "copy", "local", b"correct horse", None) in static_service.calls
        await until(
            pilot,
            lambda: app.main.table.selected_key() == ("local", "copy"),
            what="the new box selected",
        )
        assert app.main.log_pane.key == ("local", "copy")
        assert "load done" in app.activities[("local", "copy")].lines[-1]
        await until(
            pilot,
            lambda: any("load copy: done" in n for n in notes(app)),
            what="the done notification",
        )


async def test_extract_dialog_unpacks_and_says_where(static_service, short_tmp_path):
    static_service.step_delay = 0.1
    archive = short_tmp_path / "orig.hbx"
    archive.write_bytes(b"not really an archive")
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("e")
        dialog = app.screen
        assert isinstance(dialog, ExtractDialog)
        await pilot.press(*str(archive), "tab", *"~/unpacked", "enter")
        assert "passphrase" in str(dialog.query_one("#error").render())
        dialog.query_one("#passphrase", Input).value = "pw"
        dialog.query_one("#passphrase", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen), what="progress")
        progress = app.screen
        await until(
            pilot, lambda: "MiB" in str(progress.query_one("#rate").render()), what="byte counts"
        )
        assert "unpacking" in str(progress.query_one("#rate").render())
        await until(pilot, lambda: app.screen is not progress, what="progress to close")
        dest = Path("~/unpacked").expanduser()
        assert ("extract", archive, dest, b"pw") in static_service.calls
        await until(
            pilot,
            lambda: any(f"extracted into {dest}" in n for n in notes(app)),
            what="where it went",
        )
        assert app.main.table.row_count == 4  # no box made


def test_transfer_meter_says_bytes_rate_and_eta():
    from hbtui.events import Transfer

    now = [0.0]
    meter = TransferMeter(clock=lambda: now[0])
    mib = 1024 * 1024
    assert meter.add(Transfer(0, 8 * mib)) == "0 B / 8.0 MiB"
    now[0] = 2.0
    assert meter.add(Transfer(2 * mib, 8 * mib)) == "2.0 MiB / 8.0 MiB · 1.0 MiB/s · ETA 0:06"


async def test_quitting_cancels_operations_and_waits_for_their_rollback(static_service):
    static_service.step_delay = 1.0
    static_service.stalled = True
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"half", "enter")
        await until(
            pilot,
            lambda: (
                ("local", "half") in app.activities
                and app.activities[("local", "half")].step is not None
            ),
            what="half's first step",
        )
        static_service.rollback_gate = asyncio.Event()
        await pilot.press("q", "y")  # asked first (tests/tui/test_tui_operations.py)
        half = app.activities[("local", "half")]
        await until(pilot, lambda: any("rolling back half" in line for line in half.lines))
        await settled(pilot)
        assert app.is_running  # still rolling back
        static_service.rollback_gate.set()
        await until(pilot, lambda: not app.is_running, what="the app to quit after the rollback")
    assert ("rolled back", "half", "local") in static_service.calls
    assert all(b.name != "half" for b in static_service.views)


async def test_quitting_without_operations_is_immediate(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)


async def test_a_box_first_seen_shows_its_last_provisioning_log(static_service):
    static_service.provision_logs[("local", "beta")] = [
        "::hbtui:: step 1/2 base",
        "apt-get install tmux",
        "::hbtui:: step 2/2 agent-user",
        "user agent exists",
    ]
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("down")
        await until(pilot, lambda: "user agent exists" in log_text(app), what="the old log")
        text = log_text(app)
        assert "last provisioning log: /logs/beta-" in text
        assert "▶ step 2/2 agent-user" in text and "::hbtui::" not in text
        assert ("provision_log", "alpha", "local") in static_service.calls


async def test_events_reported_from_a_thread_arrive_in_order(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)

        async def threaded(report):
            def work() -> str:
                report(Phase("hashing"))
                for i in range(500):
                    report(LogLine(f"chunk {i}"))
                return "hashed"

            return await asyncio.to_thread(work)

        operation = app.run_operation(("local", "alpha"), "hash", threaded)
        await operation.worker.wait()
        activity = app.activities[("local", "alpha")]
        await until(pilot, lambda: not activity.running)
        lines = list(activity.lines)
        chunks = [line for line in lines if line.startswith("chunk ")]
        assert chunks == [f"chunk {i}" for i in range(500)]
        assert "hash done" in lines[-1]  # the end came after every event


async def test_log_follow_pauses_when_scrolled_up(static_service, monkeypatch):
    """Paused, the header says so, and as a line whatever it says it asks for no layout
    (each did, on every selection and every search key: the whole screen laid out)."""
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await settled(pilot)
        key = ("local", "alpha")
        activity = app.activities[key]
        for i in range(300):
            activity.append(f"\x1b[33mline {i}\x1b[0m")
        app.main.box_changed(key)
        log = app.main.log_pane.log_view
        await until(pilot, lambda: log.auto_scroll and log.scroll_y == log.max_scroll_y > 0)
        header = app.main.log_pane.query_one("#log-header")
        layouts, refresh = [], Widget.refresh

        def asked(widget, *regions, layout=False, **kwargs):
            if layout:
                layouts.append(widget)
            return refresh(widget, *regions, layout=layout, **kwargs)

        monkeypatch.setattr(Widget, "refresh", asked)
        log.scroll_to(y=0, animate=False)
        await pilot.pause()
        assert not log.auto_scroll
        assert "paused" in str(header.render())
        assert header not in layouts
        monkeypatch.undo()
        activity.append("more")
        app.main.box_changed(key)
        await settled(pilot)
        assert log.scroll_y == 0  # did not jump while paused
        log.focus()
        await pilot.press("end")
        await until(pilot, lambda: log.auto_scroll)


async def test_log_flood_is_bounded(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        key = ("local", "alpha")
        activity = app.activities[key]
        for i in range(20000):
            activity.append(f"line {i}")
        app.main.box_changed(key)
        log = app.main.log_pane.log_view
        await until(pilot, lambda: bool(log.lines) and log.lines[-1] == "line 19999")
        assert len(activity.lines) <= 5000 and len(log.lines) <= 5000


async def test_workload_log_tab(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("t")
        log = app.main.log_pane.query_one("#workload-log")
        await until(pilot, lambda: any("listening" in line for line in log.lines))


async def test_keymap_remaps_and_palette_lists_every_action(static_service):
    static_service.config.keymap = {"new": "ctrl+n", "quit": "ctrl+q"}
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n")
        assert not isinstance(app.screen, NewBoxDialog)
        await pilot.press("ctrl+n")
        assert isinstance(app.screen, NewBoxDialog)
        await pilot.press("escape")
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {a.title for a in ACTIONS if a.scope == MAIN and a.title} <= titles
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("#keys")
        rows_ = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows_[2][:2] == ["new", "^n"] or rows_[2][1] in ("ctrl+n", "^n")
        assert {r[0] for r in rows_} == {a.id for a in ACTIONS}  # every key, each remappable


async def test_keymap_remaps_the_tables_and_the_logs_keys_too(static_service):
    static_service.config.keymap = {"down": "ctrl+n", "log-wrap": "ctrl+w"}
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        first = app.main.table.selected_key()
        await pilot.press("j")  # down's old keys are gone
        assert app.main.table.selected_key() == first
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.main.table.selected_key() != first)
        log = app.main.log_pane.visible_view
        log.focus()
        await pilot.press("W")
        assert not log.wrap
        await pilot.press("ctrl+w")
        await until(pilot, lambda: log.wrap)


async def test_palette_commands_run_app_and_screen_actions(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        commands = {c.title: c.callback for c in app.get_system_commands(app.main)}
        app.call_later(commands["Port allocator"])  # the screen's
        await until(pilot, lambda: app.main.ports_visible)
        app.call_later(commands["New box"])  # the App's
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))


async def test_errors_never_crash(static_service):
    static_service.broken = {"list_boxes": "engine exploded", "start": "engine exploded"}
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        status = app.main.query_one("#host-status")
        await until(pilot, lambda: "engine exploded" in str(status.render()))
        assert app.is_running


# -- against the simulator ----------------------------------------------------------------------

sim = pytest.mark.sim


async def wait_ready(pilot, app, key: str, timeout: float = 180) -> None:
    await until(
        pilot,
        lambda: key in app.main.table.views and app.main.table.views[key].provisioning == "ready",
        timeout=timeout,
        what=f"{key} ready",
    )


@sim
async def test_sim_new_with_live_log_then_stop_start_enter_delete(sim_service, monkeypatch):
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))  # the core reads it, as for the CLI
    launched = []

    async def launcher(argv):
        launched.append(argv)
        return 0

    app = HbtuiApp(
        sim_service,
        launcher=launcher,
        refresh_seconds=0.5,
        driver_class=SuspendableDriver,
    )
    async with app.run_test(size=SIZE, headless=False) as pilot:
        await until(pilot, lambda: app.main.listing is not None, timeout=30)
        await pilot.press("n")
        grid = app.screen.query_one(PortGrid)
        await until(pilot, lambda: bool(grid.slots), timeout=30)
        pick = grid.next_free
        grid.focus()
        grid.move_to(pick)
        await pilot.press("enter")
        app.screen.query_one("#name", Input).focus()
        await pilot.press(*"s1", "enter")
        key = ("local", "s1")
        await until(pilot, lambda: key in app.activities, timeout=30, what="the box reserved")
        activity = app.activities[key]
        await until(pilot, lambda: activity.step is not None, timeout=60, what="first step")
        assert activity.running  # the step arrived live, before the end
        assert app.main.log_pane.key == key
        await wait_ready(pilot, app, "local/s1")
        # The row says ready a moment before the operation has wound up; a key
        # pressed in between is refused as "busy" (by design), so wait for it.
        await until(pilot, lambda: not activity.running, timeout=30, what="new to finish")
        assert activity.failure is None, "\n".join(activity.lines)
        assert app.main.table.views["local/s1"].port == pick
        assert activity.step.index == activity.step.total
        assert len(app.main.log_pane.log_view.lines) > 5
        app.main.table.select(key)
        await pilot.press("x")
        await until(
            pilot,
            lambda: app.main.table.views["local/s1"].state == "stopped" and not activity.running,
            timeout=60,
            what=lambda: (
                "the box to stop; its log:\n"
                + "\n".join(list(activity.lines)[-30:])
                + f"\nnotes: {notes(app)}"
            ),
        )
        await pilot.press("s")
        await until(
            pilot,
            lambda: app.main.table.views["local/s1"].state == "running" and not activity.running,
            timeout=120,
            what=lambda: "the box to start; its log:\n" + "\n".join(list(activity.lines)[-30:]),
        )
        await pilot.press("enter")
        await until(pilot, lambda: launched, timeout=60)
        assert "hb-as-agent" in " ".join(launched[0]) and "--tmux" in launched[0]
        # Back from the shell, a listing taken while the start wound up may still call
        # the box busy, and `d` would be refused (by design): wait for a fresh row.
        await until(
            pilot,
            lambda: not app.main.table.views["local/s1"].busy and not activity.running,
            timeout=30,
            what=lambda: f"the row to be idle; notes: {notes(app)}",
        )
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, RemoveDialog), timeout=10)
        await pilot.press(*"s1", "enter")
        await until(
            pilot,
            lambda: "local/s1" not in app.main.table.views,
            timeout=60,
            what=lambda: (
                "the box deleted; its log:\n"
                + "\n".join(list(activity.lines)[-30:])
                + f"\nnotes: {notes(app)}"
            ),
        )
        assert (await sim_service.boxes.listing()).boxes == []


@sim
async def test_sim_save_and_load_round_trip(sim_service, tmp_path, monkeypatch):
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))
    await sim_service.new(NewSpec("orig"))
    archive = tmp_path / "orig.hbx"
    app = HbtuiApp(sim_service, refresh_seconds=0.5)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, app, "local/orig", timeout=30)
        await pilot.press("w")
        dialog = app.screen
        dialog.query_one("#output", Input).value = str(archive)
        dialog.query_one("#passphrase", Input).value = "correct horse"
        dialog.query_one("#passphrase2", Input).value = "correct horse"
        await pilot.click("#ok")
        activity = app.activities[("local", "orig")]
        await until(pilot, lambda: not activity.running, timeout=240, what="save")
        assert archive.is_file(), "\n".join(activity.lines)
        await until(pilot, lambda: app.screen is app.main, what="the progress screen to close")
        await pilot.press("l")
        dialog = app.screen
        dialog.query_one("#archive", Input).value = str(archive)
        dialog.query_one("#passphrase", Input).value = "correct horse"
        dialog.query_one("#name", Input).value = "copy"
        await pilot.click("#ok")
        await until(pilot, lambda: ("local", "copy") in app.activities, what="load to start")
        copy = app.activities[("local", "copy")]
        await until(pilot, lambda: not copy.running, timeout=300, what="load")
        assert copy.failure is None, "\n".join(copy.lines)
        await until(pilot, lambda: app.screen is app.main, what="the progress screen to close")
        await wait_ready(pilot, app, "local/copy", timeout=60)
        assert app.main.table.selected_key() == ("local", "copy")


async def test_a_box_another_process_holds_says_so_in_its_row(static_service):
    """A save run by `hbtui save` in another terminal shows in the dashboard's row."""
    from dataclasses import replace

    from hbtui.core.foundation.views import Busy

    static_service.views[0] = replace(static_service.views[0], busy=Busy("save", 4242))
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await until(pilot, lambda: "save (pid 4242)" in rows(app)["local/alpha"])


async def test_one_box_is_counted_as_one_box(static_service):
    """The status line and the title said "1 boxes" (and "1 of 1 boxes")."""
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("slash", *"stopped")
        await until(pilot, lambda: app.main.table.row_count == 1)
        assert app.main.sub_title.startswith("1 of 4 boxes · sort:"), app.main.sub_title
        del static_service.views[1:]
        await pilot.press("escape")
        await until(pilot, lambda: len(app.main.table.views) == 1)
        assert app.main.sub_title.startswith("1 of 1 box · sort:"), app.main.sub_title
        status = str(app.main.query_one("#host-status").render())
        assert " 1 box · refresh" in status, status


@pytest.mark.parametrize("key", ["end", "G"])
async def test_end_reaches_the_end_of_the_help_and_home_its_top(static_service, key: str):
    app = make_app(static_service)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one("#keys")
        await until(pilot, lambda: table.max_scroll_y > 0)
        await pilot.press(key)
        await until(pilot, lambda: table.scroll_y == table.max_scroll_y)
        await pilot.press("g")
        await until(pilot, lambda: table.scroll_y == 0)
