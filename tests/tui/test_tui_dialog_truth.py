"""The dialogs tell the truth, whole and at once: the New
dialog's plan is read whole at any width, a port typed costs no plan and no recipe check,
dialogs show before the Service has answered, the load window's bar follows the stage it is
in, and a wrong passphrase asks again for the passphrase only."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widget import Widget
from textual.widgets import Button, DataTable, Input, Label, ProgressBar
from textual.widgets._footer import FooterKey

from hbtui.core.archives.backups import ArchiveEntry
from hbtui.core.foundation.basebook import NewPlan
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import Phase, Reserved, Stage, Step, Transfer
from hbtui.tui.archives.dialogs import ExtractDialog, LoadDialog
from hbtui.tui.archives.progress import ProgressScreen
from hbtui.tui.boxes.new import NewBoxDialog
from hbtui.tui.boxes.port_grid import PortGrid
from hbtui.tui.failure import Failure
from hbtui.tui.operations import Operation

from support.pilot import make_app, notes, settled, until
from support.tui_fakes import FakeService

LONG_PLAN = NewPlan(
    None,
    "full provisioning: no base of registry.example.com/team/agents:2026-11-29 for this recipe",
    "build one: hbtui base build --image registry.example.com/team/agents:2026-11-29 "
    "--recipe /srv/recipes/agents-with-a-long-name",
)


def drawn(widget) -> str:
    """The widget's text as painted, its lines joined."""
    return " ".join(widget.render_line(y).text.strip() for y in range(widget.size.height)).strip()


async def new_dialog(pilot, app) -> NewBoxDialog:
    await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
    await pilot.press("n")
    await until(pilot, lambda: isinstance(app.screen, NewBoxDialog), what="the New dialog")
    return app.screen


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
async def test_the_new_dialogs_plan_is_whole_at_every_width(size):
    service = FakeService()
    service.plan = LONG_PLAN
    app = make_app(service, refresh=60)
    async with app.run_test(size=size) as pilot:
        dialog = await new_dialog(pilot, app)
        plan = dialog.query_one("#plan", Label)
        await until(pilot, lambda: "hbtui base build" in str(plan.render()), what="the plan")
        await pilot.pause()
        form = dialog.query_one(".dialog").content_region
        assert form.x <= plan.region.x and plan.region.right <= form.right  # none of it cut off
        assert drawn(plan).split() == f"{LONG_PLAN.why}; {LONG_PLAN.hint}".split()


async def test_the_footer_is_rebuilt_only_when_its_keys_change():
    """Rebuilding the footer's ~25 keys on every focus change and screen switch was a good
    part of what opening and closing a dialog cost."""
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await settled(pilot)
        keys = list(app.main.query(FooterKey))
        await pilot.press("w")
        await until(pilot, lambda: app.screen is not app.main and app.screen.query(FooterKey))
        save_keys = list(app.screen.query(FooterKey))
        await pilot.press("tab", "tab")  # focus moves; the dialog's keys stay the same
        await settled(pilot)
        assert list(app.screen.query(FooterKey)) == save_keys
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)
        await settled(pilot)
        assert list(app.main.query(FooterKey)) == keys


async def test_the_load_windows_bar_follows_the_stage_it_is_in():
    """The bar and the rate belong to the pass under way: after decrypt+check they no longer
    show its full bar and its last rate through create and provision, the steps move the
    bar, and the restore's rate is its own (not reckoned from the check's last figure)."""
    mib = 2**20
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        screen = ProgressScreen(Operation("load", ("local", "copy"), app, makes=True), "Loading")
        await app.push_screen(screen)
        bar, rate = screen.query_one("#bytes", ProgressBar), screen.query_one("#rate", Label)
        screen.show(Phase("decrypting and checking", Stage.CHECK))
        screen.show(Transfer(0, 8 * mib, "checking"))
        screen.show(Transfer(8 * mib, 8 * mib, "checking"))
        assert bar.percentage == 1 and "checking" in str(rate.render())
        screen.show(Reserved("local", "copy", 4820))
        screen.show(Phase("creating machine copy", Stage.CREATE))
        assert bar.total is None and str(rate.render()) == ""
        screen.show(Step(2, 4, "agent-user"))
        assert (bar.progress, bar.total) == (2, 4)
        screen.show(Phase("copying /data into the box part by part", Stage.RESTORE))
        screen.show(Transfer(64 * mib, 640 * mib, "restoring"))
        assert bar.percentage == pytest.approx(0.1)
        assert str(rate.render()) == "restoring  64.0 MiB / 640.0 MiB"  # no rate from one figure


@pytest.mark.parametrize("key", ["l", "e"])
async def test_a_wrong_passphrase_asks_again_for_the_passphrase_only(key):
    service = FakeService()
    service.passphrase = b"right"
    service.archive_list = [
        ArchiveEntry(Path("/backups/alpha-1.hbx"), "alpha", "2026-11-29T11:00:05Z", 1, "hbx", True),
        ArchiveEntry(Path("/backups/beta-1.hbx"), "beta", "2026-11-28T11:00:05Z", 1, "hbx", True),
    ]
    kind = LoadDialog if key == "l" else ExtractDialog
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press(key)
        await until(pilot, lambda: isinstance(app.screen, kind))
        first = app.screen
        await until(pilot, lambda: first.query_one("#archives", DataTable).row_count == 2)
        first.query_one("#archive", Input).value = "beta-1.hbx"  # not the one offered first
        first.query_one("#passphrase", Input).value = "wrong"
        second = "#name" if key == "l" else "#dest"
        first.query_one(second, Input).value = "copy" if key == "l" else "/tmp/out"
        await settled(pilot)  # the form as the values laid it out: a user clicks what they see
        await pilot.click("#ok")
        await until(pilot, lambda: isinstance(app.screen, kind) and app.screen is not first)
        again = app.screen
        await settled(pilot)  # the archive list filled in meanwhile, the choice kept
        assert again.query_one("#archive", Input).value == "beta-1.hbx"
        assert again.query_one(second, Input).value == ("copy" if key == "l" else "/tmp/out")
        assert again.query_one("#passphrase", Input).value == ""
        assert again.query_one("#passphrase", Input).has_focus, again.focused
        assert "wrong passphrase" in str(again.query_one("#error", Label).render())
        await pilot.press(*"right", "enter")
        await until(pilot, lambda: app.screen is app.main)
        made = [c for c in service.calls if c[0] in ("load", "extract")]
        assert [c[1] for c in made] == [Path("/backups/beta-1.hbx")] * 2
        assert made[-1][-2 if key == "l" else -1] == b"right"


async def test_the_new_dialog_shows_before_it_reads_anything():
    """The recipe, the presets, the secrets and the plan are read in workers after the
    first paint (the secrets read the registry and the secrets file, the plan hashes the
    recipe and reads the bases); Create waits for them."""
    service = FakeService()
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
        dialog = app.screen
        plan = dialog.query_one("#plan", Label)
        await until(pilot, lambda: "full provisioning" in str(plan.render()), what="the plan")
        assert dialog.query_one("#recipe", Input).value == "/opt/hbtui/recipe"
        read = {method for method, _ in service.reads}
        assert {"new_plan", "secrets", "credential_presets", "recipe_dir"} <= read
        assert [m for m, on_loop in service.reads if on_loop] == []
        await pilot.press(*"box1")
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled)


async def test_a_port_key_reads_nothing_and_lays_out_nothing(monkeypatch):
    """A key in the port field checks the port against the map in memory: no plan (the
    recipe hashed, the bases read), no recipe check, and no widget asks for a layout while
    the problem line only changes its words (every problem line and the plan did, on every
    key: 0.4-0.7 s a key in a terminal; then the field itself, as its text grew)."""
    service = FakeService()
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        dialog = await new_dialog(pilot, app)
        grid = dialog.query_one(PortGrid)
        await until(
            pilot,
            lambda: (
                grid.slots and "full provisioning" in str(dialog.query_one("#plan", Label).render())
            ),
        )
        port = dialog.query_one("#port", Input)
        port.value = ""
        port.focus()
        await pilot.press("5")
        problem = dialog.query_one("#port-problem", Label)
        await until(pilot, lambda: "port 5 is outside" in str(problem.render()))
        await settled(pilot)
        reads, layouts = len(service.reads), []
        refresh = Widget.refresh

        def asked(widget, *regions, layout=False, **kwargs):
            if layout:
                layouts.append(widget)
            return refresh(widget, *regions, layout=layout, **kwargs)

        monkeypatch.setattr(Widget, "refresh", asked)
        for typed in ("50", "500", "5000"):  # the range is 4790-4999
            await pilot.press(typed[-1])
            await until(pilot, lambda t=typed: f"port {t} is outside" in str(problem.render()))
        await settled(pilot)
        assert service.reads[reads:] == []
        assert layouts == []  # the field's text scrolls inside its box, which stays
        await pilot.press(*["backspace"] * 4, *"4820")  # free: the line goes
        await until(pilot, lambda: not problem.display)
        assert grid.picked == 4820 and service.reads[reads:] == []


async def test_unreadable_secrets_say_so_and_leave_create_usable(monkeypatch):
    """Read after the first paint, a secrets file that cannot be read must not leave the
    dialog waiting for ever: a box without credentials can still be made."""
    service = FakeService()

    def unreadable():
        raise HbtuiError("/home/u/.config/hbtui/secrets.json is not a regular file (a FIFO?)")

    monkeypatch.setattr(service.secrets, "listing", unreadable)
    app = make_app(service, refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        dialog = await new_dialog(pilot, app)
        await pilot.press(*"box1")
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled)
        assert any("not a regular file" in note for note in notes(app))


@pytest.mark.parametrize("back", [False, True])
async def test_keys_typed_right_after_tab_go_to_the_next_field(back):
    """Tab, then the next field's text, all at once (a fast typist, a loaded machine):
    every key after the tab lands in the field it moves to, none in the one it leaves
    (the Save dialog's passphrase went into its path field, shown in clear)."""
    from textual import events

    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
        await pilot.press("w")
        await until(pilot, lambda: app.screen is not app.main, what="the Save dialog")
        dialog = app.screen
        output, passphrase = (
            dialog.query_one("#output", Input),
            dialog.query_one("#passphrase", Input),
        )
        await until(pilot, lambda: output.has_focus, what="the path field focused")
        if back:  # shift+tab from the passphrase back to the path
            passphrase.focus()
            await until(pilot, lambda: passphrase.has_focus, what="the passphrase focused")
        typed = [("shift+tab", None) if back else ("tab", "\t")]
        typed += [(ch, ch) for ch in "s3cret"]
        for key, char in typed:  # posted at once: none waits for the one before
            app.post_message(events.Key(key, char))
        await settled(pilot)
        field, left = (output, passphrase) if back else (passphrase, output)
        assert field.value == "s3cret"
        assert left.value == ""


async def test_a_failed_operations_window_offers_close_not_cancel():
    """Once its operation has failed there is nothing left to cancel: the window's footer
    says esc closes it, as its button does (it said "esc Cancel" beside a Close button)."""
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        screen = ProgressScreen(Operation("save", ("local", "alpha"), app), "Saving alpha")
        await app.push_screen(screen)

        def footer() -> list[str]:
            return [k.description for k in screen.query(FooterKey)]

        await until(pilot, lambda: footer() == ["Cancel"], what="esc Cancel while it runs")
        screen.finished(Failure.of(UsageError("folder /nope does not exist")))
        await until(pilot, lambda: footer() == ["Close"], what=lambda: f"esc Close: {footer()}")
        assert str(screen.query_one("#cancel", Button).label) == "Close"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, what="the window closed")


async def test_the_footer_offers_no_key_a_text_field_would_type():
    """In the `:` line (and the filter) the footer still showed the main screen's "/ Filter"
    and "q Quit": typed there, they go into the field."""
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await settled(pilot)

        def shown() -> set[str]:
            return {str(k.key_display) for k in app.main.query(FooterKey)}

        assert {"/", "q"} <= shown()
        for opening in ("colon", "slash"):
            await pilot.press(opening)
            await until(pilot, lambda: isinstance(app.main.focused, Input))
            await until(pilot, lambda: not {"/", "q", "?"} & shown(), what="typed keys gone")
            await pilot.press("escape")
            await until(pilot, lambda: {"/", "q"} <= shown(), what="the keys back")
