"""Pilot tests of the dashboard's operations: quitting, cancelling, keys in their place,
requests as submitted, rows only for what an operation made, and the states shown.

Over `FakeService` (tests/support/tui_fakes.py); the last tests check, against the simulator,
the core's phases the dashboard reads (a box reserved, a load's stages).
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Input, ProgressBar

from hbtui.core.foundation.specs import LoadSpec, NewSpec, SaveSpec
from hbtui.core.foundation.views import BOX, MISSING, BoxView
from hbtui.events import Phase, Reserved, Stage, Step
from hbtui.tui.actions import BY_ID, MAIN
from hbtui.tui.activity import Activity
from hbtui.tui.archives.dialogs import LoadRequest, SaveDialog, SaveRequest
from hbtui.tui.archives.progress import LOAD_STAGES, ProgressScreen, load_stage, stages_text
from hbtui.tui.boxes.cells import cells
from hbtui.tui.boxes.new import NewBoxDialog
from hbtui.tui.boxes.port_grid import PortGrid
from hbtui.tui.dialogs.confirm import ConfirmDialog, QuitScreen

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
from support.tui_fakes import NOW, FakeService, view


@pytest.fixture
def service() -> FakeService:
    fake = FakeService()
    fake.recipe = SIM_RECIPE  # a real recipe folder, so the new-box dialog accepts it
    return fake


async def started(pilot, app, name: str) -> Activity:
    """Type `name` into the open new-box dialog, create, and wait for its row's activity."""
    await pilot.press(*name, "enter")
    key = ("local", name)
    await until(pilot, lambda: key in app.activities and app.activities[key].running)
    return app.activities[key]


def toasts(app) -> list[tuple[str, str, str]]:
    return [(n.title, n.message, n.severity) for n in app._notifications]


# -- 1. quitting with operations running --------------------------------------------------


async def test_quit_asks_then_cancels_and_waits_for_the_rollback(service):
    service.step_delay = 1.0
    service.stalled = True
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n")
        activity = await started(pilot, app, "half")
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmDialog)
        assert "new half" in str(app.screen.query_one("#question").render())
        await pilot.press("n")  # keep working: nothing was cancelled
        assert app.screen is app.main and app.is_running and activity.running
        service.rollback_gate = asyncio.Event()
        await pilot.press("q", "y")
        assert isinstance(app.screen, QuitScreen)
        await until(
            pilot, lambda: "⟳ new half" in str(app.screen.query_one("#operations").render())
        )
        await settled(pilot)
        assert app.is_running  # still rolling back
        service.rollback_gate.set()
        await until(pilot, lambda: not app.is_running, what="the app to quit after the rollback")
    assert ("rolled back", "half", "local") in service.calls
    assert all(b.name != "half" for b in service.views)
    assert app.return_code == 0


async def test_a_terminating_signal_quits_without_asking(service):
    service.step_delay = 1.0
    service.stalled = True
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n")
        await started(pilot, app, "sig")
        app._terminate(signal.SIGTERM)
        await until(pilot, lambda: isinstance(app.screen, QuitScreen))
        await until(pilot, lambda: not app.is_running)
    assert ("rolled back", "sig", "local") in service.calls
    assert app.return_code == 143


# -- 2. a key means one thing in one place ----------------------------------------------------


def shell_app(service: FakeService):
    launched: list[list[str]] = []

    async def launcher(argv: list[str]) -> int:
        launched.append(argv)
        return 0

    return make_app(service, launcher=launcher, driver_class=SuspendableDriver), launched


async def test_enter_on_the_table_opens_a_shell(service):
    app, launched = shell_app(service)
    async with app.run_test(size=SIZE, headless=False) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("enter")
        await until(pilot, lambda: launched)


async def test_enter_in_the_port_allocator_uses_the_port_not_a_shell(service):
    app, launched = shell_app(service)
    async with app.run_test(size=SIZE, headless=False) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("p")
        grid = app.main.port_grid
        await until(pilot, lambda: bool(grid.slots) and grid.has_focus)
        grid.move_to(4791)  # alpha's: used
        await pilot.press("enter")
        assert app.screen is app.main
        assert any("used by box alpha" in n for n in notes(app))
        grid.move_to(4800)  # free
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
        assert app.screen.query_one("#port", Input).value == "4800"
        await settled(pilot)
        assert not launched and not any(c[0] == "enter_argv" for c in service.calls)


async def test_keys_in_the_filter_box_are_the_filters(service):
    app, launched = shell_app(service)
    async with app.run_test(size=SIZE, headless=False) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("slash", *"stx", "backspace", "backspace", "backspace", *"alp")
        await pilot.press("enter")  # keeps the filter
        await until(pilot, lambda: app.main.table.has_focus)
        assert app.main.table.row_count == 1 and app.main.table.filter_text == "alp"
        await settled(pilot)
        assert not launched
        assert not [c for c in service.calls if c[0] in ("enter_argv", "start", "stop")]


async def test_keys_in_a_dialog_are_the_dialogs(service):
    app, launched = shell_app(service)
    async with app.run_test(size=SIZE, headless=False) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"qsxdc")  # quit, start, stop, delete, cancel on the main screen
        assert isinstance(app.screen, NewBoxDialog) and app.is_running
        assert app.screen.query_one("#name", Input).value == "qsxdc"
        grid = app.screen.query_one(PortGrid)
        await until(pilot, lambda: bool(grid.slots))
        grid.focus()
        grid.move_to(4800)
        await pilot.press("enter")  # the grid's: picks the port
        assert app.screen.query_one("#port", Input).value == "4800"
        assert isinstance(app.screen, NewBoxDialog)
        await settled(pilot)
        assert not launched
        assert not [c for c in service.calls if c[0] in ("enter_argv", "start", "stop", "new")]


# -- 3. a request is what was submitted ------------------------------------------------------


async def test_keys_typed_right_after_create_do_not_change_the_name(service):
    service.step_delay = 0.2
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"rr2")
        # Enter and the next key queued together, as a fast typist sends them.
        app.post_message(events.Key("enter", "\r"))
        app.post_message(events.Key("z", "z"))
        await until(pilot, lambda: any(c[0] == "new" for c in service.calls))
        await pilot.press("z", "z")  # while the dialog waits for the box: ignored
        await until(pilot, lambda: app.screen is app.main)
    assert [c[1] for c in service.calls if c[0] == "new"] == ["rr2"]


async def test_a_form_keeps_the_value_it_was_submitted_with(service, short_tmp_path):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("w")
        dialog = app.screen
        assert isinstance(dialog, SaveDialog)
        dialog.query_one("#passphrase", Input).value = "pw"
        dialog.query_one("#passphrase2", Input).value = "pw"
        dialog.query_one("#output", Input).focus()
        await pilot.press(*str(short_tmp_path / "a.hbx"))
        app.post_message(events.Key("enter", "\r"))
        app.post_message(events.Key("z", "z"))
        await until(pilot, lambda: any(c[0] == "save" for c in service.calls))
    save = next(c for c in service.calls if c[0] == "save")
    assert save[3] == short_tmp_path / "a.hbx"


# -- 4. an operation owns only the row of what it made ---------------------------------------


async def test_a_name_taken_meanwhile_never_touches_that_box(service):
    """The box appears (another process made it) after the dialog opened: the core
    refuses the name, the error stays in the dialog, the box's row and log are its own."""
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"late")
        service.views.append(view("late", 4799))
        app.boxes.refresh_listing()
        await until(pilot, lambda: app.main.listed(("local", "late")))
        # Its usage comes after its row (the fake's steady 300 MiB): the row whole.
        await until(pilot, lambda: "300 MiB" in rows(app)["local/late"], what="late's usage")
        before = rows(app)["local/late"]
        await pilot.press("enter")
        dialog = app.screen
        status = dialog.query_one("#request-status")
        await until(pilot, lambda: "already exists" in str(status.render()))
        assert isinstance(app.screen, NewBoxDialog)  # still open, and usable again
        assert not dialog.query_one("#name", Input).disabled
        assert rows(app)["local/late"] == before
        assert column(app, "local/late", 2) == "running"
        late = app.activities.get(("local", "late"))
        assert late is None or ("new" not in late.operation and late.failure is None)
        assert not any("failed" in n for n in notes(app))


async def test_a_refusal_before_anything_is_made_stays_in_the_dialog(service):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        service.broken["new"] = "the engine is not answering"
        await pilot.press("n", *"nope", "enter")
        status = app.screen.query_one("#request-status")
        await until(pilot, lambda: "not answering" in str(status.render()))
        assert isinstance(app.screen, NewBoxDialog)
        assert ("local", "nope") not in app.activities
        assert "local/nope" not in app.main.table.views
        del service.broken["new"]
        await pilot.press("enter")  # the same dialog, again: now it is made
        await until(pilot, lambda: app.screen is app.main)
        await until(pilot, lambda: "local/nope" in rows(app))
        assert app.main.table.selected_key() == ("local", "nope")


async def test_the_dialog_closes_once_the_box_exists_and_escape_cancels_before(service):
    service.step_delay = 0.5
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"made", "enter")
        await until(pilot, lambda: app.screen is app.main, what="the dialog to close")
        await until(pilot, lambda: app.main.log_pane.key == ("local", "made"))
        await until(pilot, lambda: "local/made" in rows(app))


# -- 10. states say what is happening ----------------------------------------------------------


def test_a_box_being_made_is_creating_not_missing():
    listed = BoxView(name="m", host="local", kind=MISSING, state="missing", provisioning="p")
    making = Activity(("local", "m"))
    making.begin("new", makes=True)
    assert cells(listed, making, NOW)[2].plain == "creating"
    making.finish()
    assert cells(listed, making, NOW)[2].plain == "missing"  # made, and then lost its machine
    saving = Activity(("local", "m"))
    saving.begin("save")
    running = BoxView(name="m", host="local", kind=BOX, state="running")
    assert cells(running, saving, NOW)[2].plain == "running"


async def test_the_row_of_a_box_being_made_says_creating(service):
    service.step_delay = 1.0
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n")
        activity = await started(pilot, app, "fresh")
        await until(pilot, lambda: "local/fresh" in rows(app))
        assert column(app, "local/fresh", 2) == "creating"
        await until(pilot, lambda: not activity.running)
        await until(pilot, lambda: column(app, "local/fresh", 2) == "running")


async def test_load_progress_shows_its_stages_and_stops_on_failure(service, tmp_path):
    archive = tmp_path / "box.hbx"
    archive.write_bytes(b"x")
    service.broken["load"] = "wrong passphrase"
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.archives.load(LoadRequest(LoadSpec(archive, "copy"), passphrase=b"pw"))
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen))
        screen = app.screen
        await until(pilot, lambda: "✗ decrypt+check" in str(screen.query_one("#stages").render()))
        assert "wrong passphrase" in str(screen.query_one("#error").render())
        assert not screen.query_one("#bytes", ProgressBar).display  # no animation left
        assert ("local", "copy") not in app.activities  # nothing made: no row
        assert "local/copy" not in app.main.table.views


async def test_events_arriving_while_the_dashboard_closes_draw_nothing(service, tmp_path):
    """Quitting prunes the screens while operations may still report: a progress dialog
    whose widgets were gone raised NoMatches (seen under load)."""
    service.step_delay = 0.3
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.archives.save(SaveRequest(SaveSpec("alpha", output=tmp_path / "a.hbx"), b"pw"))
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        await until(pilot, lambda: progress.query_one("#bytes", ProgressBar).progress > 0)
        app._running = False  # as in App._shutdown, which then prunes the screens
        try:
            await progress.remove_children()
            await until(pilot, lambda: any(c[0] == "save" for c in service.calls))
            await pilot.pause(1.0)  # the save reports (and ends) meanwhile
        finally:
            app._running = True
        assert not progress.query("#bytes")


def test_load_stages_follow_the_cores_stages_not_its_words():
    seen = [
        load_stage(e)
        for e in (
            Phase("any words at all", Stage.CHECK),
            Phase("reserving a port"),
            Reserved("local", "copy", 4791),
            Phase("creating machine copy (port 4791)"),  # no stage: the words mean nothing
            Phase("reworded", Stage.CREATE),
            Step(1, 6, "base"),
            Phase("reworded", Stage.RESTORE),
            Phase("reworded", Stage.DONE),
        )
    ]
    assert seen == [0, None, None, None, 1, 2, 3, 4]
    assert stages_text(2, failed=False).plain == (
        "✓ decrypt+check › ✓ create › ▶ provision › restore › ready"
    )
    assert stages_text(1, failed=True).plain.split(" › ")[1] == "✗ create"
    assert len(LOAD_STAGES) == 5


# -- 10 and 11. cancelling is a notice -------------------------------------------------------


async def test_cancel_key_asks_then_rolls_back_as_a_notice(service):
    service.step_delay = 1.0
    service.stalled = True
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("c")  # alpha: nothing running
        assert any("nothing is running on alpha" in n for n in notes(app))
        await pilot.press("n")
        activity = await started(pilot, app, "undo")
        await until(pilot, lambda: app.main.table.selected_key() == ("local", "undo"))
        await pilot.press("c")
        assert isinstance(app.screen, ConfirmDialog)
        assert "new undo" in str(app.screen.query_one("#question").render())
        await pilot.press("escape")  # keep going
        assert activity.running and app.screen is app.main
        await pilot.press("c", "y")
        await until(pilot, lambda: not activity.running, what="the rollback")
        assert ("rolled back", "undo", "local") in service.calls
        assert activity.failure is None  # no red failure
        await until(pilot, lambda: "local/undo" not in app.main.table.views)
        cancelled = [t for t in toasts(app) if "cancelled" in t[0]]
        assert cancelled and cancelled[-1][2] == "information"
        assert not [t for t in toasts(app) if t[2] == "error"]
        assert "⊘ new" in log_text(app) or "⊘ new" in "\n".join(activity.lines)


def test_cancel_is_a_key_in_the_keymap():
    cancel = BY_ID["cancel"]
    assert (cancel.keys, cancel.action, cancel.scope) == ("c", "boxes.cancel", MAIN)


# -- against the simulator: the phases the dashboard reads ------------------------------------


@pytest.mark.sim
async def test_the_cores_phases_are_the_ones_the_dashboard_reads(
    sim_service, tmp_path, monkeypatch
):
    """The core says when a box is reserved (`Reserved`, with its host, name and port),
    before anything is made; a load passes through every stage the progress window
    names, in order."""
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))
    made: list = []
    view = await sim_service.new(NewSpec("orig"), report=made.append)
    reserved = [i for i, e in enumerate(made) if isinstance(e, Reserved)]
    assert len(reserved) == 1
    assert made[reserved[0]] == Reserved("local", "orig", view.port)
    assert not any(isinstance(e, Step) for e in made[: reserved[0]])  # nothing provisioned before
    archive = tmp_path / "orig.hbx"
    await sim_service.archives.save(
        SaveSpec("orig", output=archive, verify=False), passphrase=b"pw"
    )
    loaded: list = []
    await sim_service.archives.load(
        LoadSpec(archive, "copy"), passphrase=b"pw", report=loaded.append
    )
    stages = [s for s in map(load_stage, loaded) if s is not None]
    assert sorted(set(stages)) == list(range(len(LOAD_STAGES)))
    assert stages == sorted(stages)  # never back to an earlier stage


# -- snapshots (160x45, fixed data and clock) -------------------------------------------------


async def forever(_report) -> None:
    await asyncio.Event().wait()  # cancelled when the app closes


def test_snapshot_quit_asks_with_operations_running(snap_compare, service):
    app = make_app(service, refresh=60)

    async def run_before(pilot):
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.run_operation(("local", "half"), "new", forever)
        app.run_operation(("local", "alpha"), "save", forever)
        await pilot.press("q")
        await settled(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_new_box_refused_stays_open(snap_compare, service):
    service.broken["new"] = "the engine did not answer within 30 s"
    service.boxes.recipe_dir = lambda recipe=None: Path(
        "/opt/hbtui/recipe"
    )  # the same on any machine
    app = make_app(service, refresh=60)

    async def run_before(pilot):
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n", *"web2", "enter")
        status = app.screen.query_one("#request-status")
        await until(pilot, lambda: "did not answer" in str(status.render()))
        for widget in app.screen.query(Input):
            widget.cursor_blink = False
        await settled(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
