"""The dialogs checked as you type, the archive picker, `o` without a browser, the keymap.

Pilot tests over `FakeService` (tests/support/tui_fakes.py), and snapshots of the changed
dialogs (tests/tui/__snapshots__/test_tui_dialogs/).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Button, DataTable, Input

from hbtui.core.foundation.views import Busy
from hbtui.tui.app import HbtuiApp
from hbtui.tui.archives.dialogs import ExtractDialog, LoadDialog, SaveDialog
from hbtui.tui.boxes.cells import COLUMNS, cells
from hbtui.tui.boxes.new import NewBoxDialog
from hbtui.tui.boxes.port_grid import PortGrid
from hbtui.tui.boxes.remove import RemoveDialog
from hbtui.tui.dialogs.confirm import ConfirmDialog
from hbtui.tui.help import HelpScreen
from hbtui.tui.shell.url import UrlDialog
from hbtui.tui.system import open_in_browser

from support import SIM_RECIPE
from support.pilot import SIZE, make_app, notes, opened, operations_done, settled, text_of, until
from support.tui_fakes import NOW, FakeService, frozen_clock, view

# -- item 6: the recipe is a setting, shown and picked in the New dialog -----------------------


async def test_new_shows_the_configured_recipe_and_checks_a_typed_one(service, tmp_path):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        recipe = dialog.query_one("#recipe", Input)
        # Read after the dialog's first frame, in a worker.
        await until(pilot, lambda: recipe.value == "/opt/hbtui/recipe", what="the recipe read")
        await pilot.press(*"box1")
        ok = dialog.query_one("#ok", Button)
        await until(pilot, lambda: not ok.disabled, what="Create on")
        recipe.value = str(tmp_path)  # a folder, but no recipe
        await pilot.pause()
        assert f"not a recipe: {tmp_path} has no provision/provision.sh" in text_of(
            dialog, "#recipe-problem"
        )
        assert ok.disabled
        recipe.value = str(SIM_RECIPE)
        await pilot.pause()
        assert text_of(dialog, "#recipe-problem") == "" and not ok.disabled
        ok.press()
        await until(pilot, lambda: "box1" in service.new_specs, what="new called")
        assert service.new_specs["box1"].recipe == SIM_RECIPE.resolve()
        await operations_done(pilot, app)


# -- item 7: problems as you type, busy boxes refused before a dialog ---------------------------


async def test_new_refuses_a_name_that_exists_on_the_chosen_host(service):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        await pilot.press(*"alpha")
        assert text_of(dialog, "#name-problem") == "a box named alpha exists on local"
        assert dialog.query_one("#ok", Button).disabled
        await pilot.press("enter")  # refused: nothing is made
        assert isinstance(app.screen, NewBoxDialog)
        await pilot.press("2")
        assert text_of(dialog, "#name-problem") == ""
        ok = dialog.query_one("#ok", Button)
        await until(pilot, lambda: not ok.disabled, what="Create, once the dialog's reads are in")
        assert not any(c[0] == "new" for c in service.calls)


@pytest.mark.parametrize(
    "typed, problem",
    [
        ("4791", "port 4791 is used by box alpha"),
        ("4793", "port 4793 is busy: another program on local listens there"),
        ("5000", "port 5000 is outside local's range 4790-4999"),
        ("80a", "the port is 'auto' or a number"),
        ("4800", ""),
        ("auto", ""),
    ],
)
async def test_new_checks_the_port_as_you_type(service, typed, problem):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        await until(pilot, lambda: bool(dialog.query_one(PortGrid).slots), what="port map")
        await pilot.press(*"fresh")
        dialog.query_one("#port", Input).value = typed
        await pilot.pause()
        assert text_of(dialog, "#port-problem") == problem
        assert dialog.query_one("#ok", Button).disabled == bool(problem)


async def test_new_told_to_close_under_a_question_closes_alone_once_it_is_answered(service):
    """The App closes the New dialog once the box exists, maybe while a question covers it:
    it closes when the question is answered, and only it (the main screen stays)."""
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        question = ConfirmDialog("Quit", "Quit now?", yes="Quit", no="Stay")
        await app.push_screen(question)
        dialog.close()  # as the App does when the box it asked for is reserved
        assert app.screen is question and dialog in app.screen_stack
        await pilot.press("n")
        await until(pilot, lambda: dialog not in app.screen_stack, what="the dialog closed")
        await settled(pilot)
        assert app.screen is app.main


@pytest.mark.parametrize("key, kind", [("w", SaveDialog), ("d", RemoveDialog)])
async def test_save_and_delete_refuse_a_box_another_process_is_busy_with(service, key, kind):
    service.views[0] = replace(service.views[0], busy=Busy("save", 4242))
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await until(pilot, lambda: app.main.selected_view().busy)  # alpha, as listed
        await pilot.press(key)
        await until(
            pilot, lambda: any("alpha is busy with save (pid 4242)" in n for n in notes(app))
        )
        assert not isinstance(app.screen, kind)


async def test_save_refuses_a_box_busy_with_an_operation_of_this_dashboard(service):
    service.step_delay = 0.5
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("x")  # alpha: stop (one scripted step)
        service.step_delay = 0
        app.activities[("local", "alpha")].begin("stop")  # still running, as a slow stop is
        await pilot.press("w")
        await until(pilot, lambda: any("alpha is busy with stop" in n for n in notes(app)))
        assert not isinstance(app.screen, SaveDialog)


async def test_a_quiesced_box_can_still_be_saved(service):
    """What an interrupted save left (its quiesce lease, held by no process) is no
    operation running."""
    service.views[0] = replace(service.views[0], busy=Busy("save", lease_end=time.time() + 60))
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await until(pilot, lambda: app.main.selected_view().busy)
        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, SaveDialog))


async def test_load_checks_the_new_name_against_the_boxes_there_are(service):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "l", LoadDialog)
        dialog.query_one("#name", Input).value = "beta"
        await pilot.pause()
        assert text_of(dialog, "#name-problem") == "a box named beta exists on local"


# -- item 8: archives are picked, not typed -----------------------------------------------------


async def test_load_lists_the_backups_folder_and_remembers_the_choice(service):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "l", LoadDialog)
        table = dialog.query_one("#archives", DataTable)
        await until(pilot, lambda: table.row_count == 3, what="3 archives")
        first = [str(c) for c in table.get_row_at(0)]
        assert first == ["alpha", "2026-11-29 11:00", "700.0 MiB", ".hbx", "✓ verified"]
        assert [str(table.get_row_at(i)[4]) for i in (1, 2)] == ["not verified", "old gpg backup"]
        archive = dialog.query_one("#archive", Input)
        assert archive.value == "alpha-20261129T110000Z.hbx"  # the newest, by name
        assert table.has_focus
        await pilot.press("down")
        assert archive.value == "beta-20261127T090000Z.hbx"
        await pilot.press("enter")  # picked: on to the passphrase
        assert dialog.query_one("#passphrase", Input).has_focus
        await pilot.press(*"pw", "tab", *"restored", "enter")
        await until(pilot, lambda: any(c[0] == "load" for c in service.calls), what="load")
        load = next(c for c in service.calls if c[0] == "load")
        assert load[1:3] == (Path("/backups/beta-20261127T090000Z.hbx"), "restored")
        assert service.last == Path("/backups/beta-20261127T090000Z.hbx")
        await until(pilot, lambda: app.screen is app.main or not isinstance(app.screen, LoadDialog))
        while app.screen is not app.main:  # the progress window
            app.pop_screen()
            await pilot.pause()
        await pilot.press("e")  # the next pick starts from the last one
        extract = app.screen
        assert isinstance(extract, ExtractDialog)
        table = extract.query_one("#archives", DataTable)
        await until(pilot, lambda: table.row_count == 3)
        assert extract.query_one("#archive", Input).value == "beta-20261127T090000Z.hbx"
        assert table.cursor_row == 1
        await operations_done(pilot, app)


async def test_an_archive_elsewhere_is_typed_and_checked_as_you_type(service, tmp_path):
    elsewhere = tmp_path / "kept.hbx"
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "e", ExtractDialog)
        await until(pilot, lambda: dialog.query_one("#archives", DataTable).row_count == 3)
        archive = dialog.query_one("#archive", Input)
        archive.value = str(elsewhere)
        await pilot.pause()
        assert text_of(dialog, "#archive-problem") == f"no such archive: {elsewhere}"
        elsewhere.write_bytes(b"x")
        archive.value = ""
        archive.value = str(elsewhere)
        await pilot.pause()
        assert text_of(dialog, "#archive-problem") == ""
        dialog.query_one("#passphrase", Input).value = "pw"
        await pilot.click("#ok")
        await until(pilot, lambda: any(c[0] == "extract" for c in service.calls))
        assert next(c for c in service.calls if c[0] == "extract")[1] == elsewhere
        assert service.last == elsewhere
        await operations_done(pilot, app)


async def test_an_empty_backups_folder_says_so_and_the_path_field_takes_over(service):
    service.archive_list = []
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "l", LoadDialog)
        await until(pilot, lambda: "No archives" in text_of(dialog, "#archives-title"))
        assert text_of(dialog, "#archives-title") == "No archives in /backups yet: type a path"
        assert not dialog.query_one("#archives", DataTable).display
        assert dialog.query_one("#archive", Input).has_focus


# -- item 9: `o` says what happened ---------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["false", "raises"])
async def test_open_without_a_browser_offers_the_url_to_copy(service, outcome):
    def no_browser(url: str) -> bool:
        if outcome == "raises":
            raise OSError("no browser")
        return False

    app = make_app(service, opener=no_browser)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, UrlDialog), what="the URL dialog")
        dialog = app.screen
        assert dialog.query_one("#url", Input).value == "http://127.0.0.1:4791/"
        await pilot.click("#copy")
        # sent as OSC 52 by the driver, once the click has reached the button
        await until(pilot, lambda: app.clipboard == "http://127.0.0.1:4791/", what="the copy")
        await until(pilot, lambda: any("URL copied" in n for n in notes(app)))
        assert not isinstance(app.screen, UrlDialog)


def test_no_display_means_no_browser(monkeypatch):
    import webbrowser

    monkeypatch.setattr("sys.platform", "linux")
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    called = []
    monkeypatch.setattr(webbrowser, "open", lambda url: called.append(url) or True)
    assert open_in_browser("http://127.0.0.1:4791/") is False
    assert called == []  # a text browser would have taken over the terminal
    monkeypatch.setenv("DISPLAY", ":0")
    assert open_in_browser("http://127.0.0.1:4791/") is True
    monkeypatch.setattr(webbrowser, "open", lambda url: False)
    assert open_in_browser("http://127.0.0.1:4791/") is False


async def test_open_on_a_stopped_box_offers_to_start_it_first(service):
    browsed: list[str] = []
    app = make_app(service, opener=browsed.append)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("down")  # beta, stopped
        await pilot.press("o")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert "beta is stopped" in str(app.screen.query_one("#question").render())
        await pilot.press("y")
        await until(pilot, lambda: browsed, what="the browser")
        assert browsed == ["http://127.0.0.1:4795/"]
        started = service.calls.index(("start", "beta", "local"))
        assert started < service.calls.index(("web", "beta", "local"))
        await operations_done(pilot, app)


async def test_open_on_a_stopped_box_can_be_declined(service):
    browsed: list[str] = []
    app = make_app(service, opener=browsed.append)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("down", "o")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("n")
        await settled(pilot)
        assert browsed == [] and ("start", "beta", "local") not in service.calls


def test_a_stopped_boxs_url_is_dimmed():
    running, stopped = view("a", 4791), view("b", 4795, state="stopped")
    url = [ident for ident, _ in COLUMNS].index("url")
    assert cells(running, None, NOW)[url].style == "underline"
    assert cells(stopped, None, NOW)[url].style == "dim"


# -- item 12: the keymap is checked -----------------------------------------------------------------


async def test_a_bad_keymap_is_reported_at_start_and_the_defaults_kept(service):
    service.config.keymap = {"new": "s", "frobnicate": "z", "help": "f1"}
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        [note] = [n for n in notes(app) if "keymap" in n]
        assert "frobnicate: no such action" in note
        assert 'new = "s": s is also bound to start, which keeps it; ' in note
        assert app.keymap == {"help": "f1"}
        await pilot.press("n")  # new kept its key
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
        await pilot.press("escape", "f1")  # the good entry applies
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))


# -- snapshots of the changed dialogs -----------------------------------------------------------


def snap_app(service: FakeService, **kwargs) -> HbtuiApp:
    return HbtuiApp(service, clock=frozen_clock, refresh_seconds=60, **kwargs)


async def blink_off(pilot) -> None:
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    await settled(pilot)


def test_snapshot_new_with_problems_as_typed(snap_compare, service):
    async def run_before(pilot):
        dialog = await opened(pilot, pilot.app, "n", NewBoxDialog)
        await until(pilot, lambda: bool(dialog.query_one(PortGrid).slots))
        await pilot.press(*"alpha")
        dialog.query_one("#port", Input).value = "4793"
        dialog.query_one("#recipe", Input).value = "/nonexistent/recipe"
        await settled(pilot)
        await blink_off(pilot)

    assert snap_compare(snap_app(service), terminal_size=SIZE, run_before=run_before)


def test_snapshot_load_picks_from_the_backups_folder(snap_compare, service):
    async def run_before(pilot):
        dialog = await opened(pilot, pilot.app, "l", LoadDialog)
        await until(pilot, lambda: dialog.query_one("#archives", DataTable).row_count == 3)
        await settled(pilot)
        await blink_off(pilot)

    assert snap_compare(snap_app(service), terminal_size=SIZE, run_before=run_before)


def test_snapshot_open_without_a_browser(snap_compare, service, monkeypatch):
    monkeypatch.setattr("sys.platform", "linux")  # the reason shown: no display
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)

    async def run_before(pilot):
        await opened(pilot, pilot.app, "o", UrlDialog)
        await settled(pilot)
        await blink_off(pilot)

    app = snap_app(service, opener=lambda url: False)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
