"""The dashboard tells the truth: what a row, a dialog, the filter and
the footer show is what is so, at any terminal size and whatever a box's log text says."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input
from textual.widgets._footer import FooterKey

from hbtui.core.archives.backups import ArchiveEntry
from hbtui.core.foundation.views import MISSING
from hbtui.tui.archives.dialogs import ExtractDialog
from hbtui.tui.archives.progress import ProgressScreen
from hbtui.tui.help import HelpScreen
from hbtui.tui.widgets.command_line import CommandLine, listing
from hbtui.tui.widgets.key_footer import KeyFooter

from support.pilot import column, make_app, rows, settled, until
from support.tui_fakes import FakeService, sample_boxes, view

SMALL = (80, 24)
LONG_ERROR = "step 4/6 agent-tools: curl: (28) Failed to connect to registry.npmjs.org port 443"


def drawn_rows(app) -> list[str]:
    table = app.main.table
    return [table.render_line(y).text for y in range(1, table.row_count + 1)]


async def test_a_long_provisioning_text_leaves_name_state_and_port_at_80x24():
    boxes = sample_boxes()
    boxes[2] = replace(boxes[2], error=LONG_ERROR)  # gamma: "failed: step 4/6 ..." (~90 cells)
    service = FakeService(boxes)
    app = make_app(service, refresh=60)
    async with app.run_test(size=SMALL) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        table = app.main.table
        head = table.render_line(0).text
        assert {"Box", "State", "Port"} <= set(head.split())
        for box, line in zip(sorted(boxes, key=lambda b: b.name), drawn_rows(app), strict=True):
            assert len(line.rstrip()) <= table.size.width
            assert box.name in line and box.state in line and str(box.port) in line, line
        assert "…" in next(line for line in drawn_rows(app) if "gamma" in line)


async def test_columns_give_room_back_when_the_text_shrinks():
    service = FakeService()
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        table = app.main.table
        before = table.render_line(0).text
        assert {"URL", "Image", "Age"} <= set(before.split())
        service.views[2] = replace(service.views[2], error=LONG_ERROR)
        app.main.action_refresh_now()
        await until(pilot, lambda: any("curl" in line for line in drawn_rows(app)))
        assert {"URL", "Image", "Age"} <= set(table.render_line(0).text.split())
        service.views[2] = sample_boxes()[2]
        app.main.action_refresh_now()
        await until(pilot, lambda: not any("curl" in line for line in drawn_rows(app)))
        await until(pilot, lambda: table.render_line(0).text == before)


async def test_a_failure_mark_goes_once_the_box_is_listed_otherwise():
    service = FakeService()
    service.broken["start"] = "the engine said no"
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.main.table.select(("local", "beta"))
        await pilot.press("s")
        await until(pilot, lambda: "✗" in rows(app)["local/beta"])
        calls = service.list_calls
        app.main.action_refresh_now()  # the listing after the failure: still stopped
        await until(pilot, lambda: service.list_calls > calls and not app.boxes._listing)
        await settled(pilot)
        assert "✗ start: RuntimeError" in rows(app)["local/beta"]
        del service.broken["start"]
        service.views[1] = replace(service.views[1], state="running")  # started elsewhere
        app.main.action_refresh_now()
        await until(pilot, lambda: column(app, "local/beta", 2) == "running")
        assert "✗" not in rows(app)["local/beta"]


async def test_a_box_being_stopped_says_stopping():
    service = FakeService()
    gate = asyncio.Event()
    stop = service.boxes.stop

    async def slow_stop(name, host="local", *, report):
        await gate.wait()
        return await stop(name, host, report=report)

    service.boxes.stop = slow_stop
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.main.table.select(("local", "alpha"))
        await pilot.press("x")
        await until(pilot, lambda: column(app, "local/alpha", 2) == "stopping")
        gate.set()
        await until(pilot, lambda: column(app, "local/alpha", 2) == "stopped")


async def test_a_box_listed_while_it_is_made_says_creating():
    """A branch (or new, or load) is listed from its reservation before its machine
    exists: by another hbtui, or by this one before the Reserved event arrives."""
    making = replace(view("twig", 4820, provisioning="provisioning"), kind=MISSING, state="missing")
    app = make_app(FakeService([*sample_boxes(), making]), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 5)
        assert column(app, "local/twig", 2) == "creating"


async def test_enter_on_a_save_in_progress_cancels_nothing():
    service = FakeService()
    service.stalled = True  # still saving when Enter is pressed, however loaded
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("w")
        app.screen.query_one("#passphrase", Input).value = "pw"
        app.screen.query_one("#passphrase2", Input).value = "pw"
        await pilot.click("#ok")
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        await until(pilot, lambda: "MiB" in str(progress.query_one("#rate").render()))
        await pilot.press("enter", "enter")
        await settled(pilot)
        assert app.screen is progress and not progress.cancelling
        assert app.activities[("local", "alpha")].running
        await pilot.press("escape")  # esc still cancels
        await until(pilot, lambda: app.screen is not progress)


async def test_extract_goes_from_the_picked_archive_to_its_folder_field():
    service = FakeService()
    service.archive_list = [
        ArchiveEntry(Path("/backups/alpha-1.hbx"), "alpha", "2026-11-29T11:00:05Z", 1, "hbx", True)
    ]
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("e")
        dialog = app.screen
        assert isinstance(dialog, ExtractDialog)
        await until(pilot, lambda: dialog.query_one("#archives", DataTable).has_focus)
        await pilot.press("enter", *"/tmp/out")
        assert dialog.query_one("#dest", Input).value == "/tmp/out"
        assert dialog.query_one("#passphrase", Input).value == ""


async def test_the_empty_filter_line_follows_what_is_typed():
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("slash", "z", "z")
        await until(pilot, lambda: "'zz'" in app.main.table.render_line(1).text)
        await pilot.press("z")
        # What the terminal shows (the line as last painted), not what it would draw now.
        await until(pilot, lambda: "matches&#160;&#x27;zzz&#x27;" in app.export_screenshot())


async def test_help_lists_j_k_g_and_G_and_the_cursor_starts_at_the_top():
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        assert app.main.table.selected_key() == ("local", "alpha")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one("#keys", DataTable)
        keys = {
            table.get_row_at(r)[0]: str(table.get_row_at(r)[1]).split(", ")
            for r in range(table.row_count)
        }
        assert "k" in keys["up"] and "j" in keys["down"]
        assert "g" in keys["first"] and "G" in keys["last"]


async def test_tab_on_the_command_line_lists_what_fits():
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("colon")
        line = app.main.query_one(CommandLine)
        await until(pilot, lambda: line.has_focus)
        await pilot.press("s")
        fits = sorted(c for c in line.commands if c.startswith("s"))
        assert len(fits) > 1  # nothing to complete: tab must list them
        await pilot.press("tab")
        await until(pilot, lambda: line.border_subtitle)
        assert str(line.border_subtitle).split() == fits and line.value == "s"
        assert not line.has_class("-error")
        await pilot.press("backspace", *"start ", "tab")  # the boxes, after the command
        await until(pilot, lambda: "alpha" in str(line.border_subtitle))
        assert {"alpha", "beta", "gamma", "delta"} <= set(str(line.border_subtitle).split())
        await pilot.press(*"zz", "tab")
        await until(pilot, lambda: str(line.border_subtitle) == "nothing fits")


def test_the_list_of_what_fits_says_how_many_more():
    assert listing(["alpha", "beta", "gamma"], 80) == "alpha beta gamma"
    assert listing(["alpha", "beta", "gamma"], 15) == "alpha +2 more"
    assert listing([], 80) == "nothing fits"


@pytest.mark.parametrize("key", ["n", "w", "question_mark", "d"])
async def test_under_a_dialog_the_footer_shows_the_dialogs_keys(key):
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press(key)
        await until(pilot, lambda: app.screen is not app.main)
        await settled(pilot)
        bottom, _ = app.screen.get_widget_at(1, 44)  # what the terminal's last row shows
        assert bottom.screen is app.screen and isinstance(bottom, (KeyFooter, FooterKey))
        shown = {k.key for k in app.screen.query(FooterKey)}
        assert "escape" in shown
        assert not shown & {"s", "x", "enter"}  # the main screen's keys are not the dialog's


async def test_remapped_keys_keep_their_labels_in_the_footer():
    service = FakeService()
    service.config.keymap = {"new": "ctrl+n", "save": "W"}
    app = make_app(service, refresh=60)
    async with app.run_test(size=(200, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("ctrl+n")
        await until(pilot, lambda: app.screen is not app.main)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)
        await settled(pilot)
        footer = {k.key: k.description for k in app.main.query(FooterKey)}
        assert footer["ctrl+n"] == "New" and footer["W"] == "Save"
        assert "n" not in footer and "w" not in footer
