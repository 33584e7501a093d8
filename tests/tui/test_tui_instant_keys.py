"""The dashboard's side of bases, branches and keys: the New dialog says how a box will be
made (from a base, fast, or with the whole recipe, and why) and takes credentials and an
egress policy, checked as typed; `b` branches the selected box. Pilot tests over
FakeService."""

from __future__ import annotations

import threading

from textual.widgets import Button, Checkbox, Input, Label, Select

from hbtui.core.foundation.basebook import Base, NewPlan
from hbtui.tui.boxes.branch import BranchDialog
from hbtui.tui.boxes.new import NewBoxDialog

from support.pilot import (
    SIZE,
    make_app,
    notes,
    open_section,
    opened,
    operations_done,
    rows,
    settled,
    text_of,
    until,
)

BASE = Base(
    id="ubuntu-24.04-5699fbee178d",
    host="local",
    image="ubuntu:24.04",
    recipe="5699fbee178d",
    recipe_dir="/opt/hbtui/recipe",
    versions="",
    engine="1.32.2",
    pack="/bases/base.smolmachine",
    size=4_000_000,
    sha256="0" * 64,
    created="2026-11-29T12:00:00Z",
)


def plan_text(dialog) -> str:
    return str(dialog.query_one("#plan", Label).render())


async def test_new_says_whether_the_box_comes_from_a_base(service):
    service.plan = NewPlan(BASE, f"from the base {BASE.id} (fast: only the per-box step)")
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        fast = f"⚡ from the base {BASE.id} (fast: only the per-box step)"
        await until(pilot, lambda: plan_text(dialog) == fast, what="the plan (read after paint)")
        await open_section(pilot, dialog, "options")
        dialog.query_one("#use-base", Checkbox).value = False
        await until(pilot, lambda: "bases are not used" in plan_text(dialog), what="plan")

        service.plan = NewPlan(
            None, "the base X was built from an older recipe", "rebuild it", stale=True
        )
        dialog.query_one("#use-base", Checkbox).value = True
        await until(pilot, lambda: plan_text(dialog).startswith("⚠"), what="stale plan")
        assert "untick 'From a base'" in plan_text(dialog)

        dialog.query_one("#name", Input).focus()
        await pilot.press(*"fresh", "enter")
        await until(pilot, lambda: "fresh" in service.new_specs, what="new called")
        assert service.new_specs["fresh"].use_base is True
        await operations_done(pilot, app)


async def test_new_takes_credentials_and_an_egress_policy_checked_as_typed(service):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        await pilot.press(*"k1")
        await open_section(pilot, dialog, "options")
        creds = dialog.query_one("#credentials", Input)
        creds.value = "nosuch"
        await until(pilot, lambda: "no preset 'nosuch'" in text_of(dialog, "#credentials-problem"))
        assert dialog.query_one("#ok", Button).disabled
        creds.value = "anthropic,openai"
        await until(
            pilot, lambda: "no secret 'openai' stored" in text_of(dialog, "#credentials-problem")
        )
        creds.value = "anthropic"
        await until(pilot, lambda: text_of(dialog, "#credentials-problem") == "")

        assert dialog.query_one("#egress", Select).value == "private-blocked"
        assert not dialog.query_one("#allow", Input).display
        dialog.query_one("#egress", Select).value = "allow-list"
        await until(pilot, lambda: dialog.query_one("#allow", Input).display, what="allow field")
        dialog.query_one("#allow", Input).value = "https://pypi.org"
        await until(pilot, lambda: "'https://pypi.org'" in text_of(dialog, "#allow-problem"))
        dialog.query_one("#allow", Input).value = "pypi.org"
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled, what="Create")
        dialog.query_one("#name", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: "k1" in service.new_specs, what="new called")
        asked = service.new_specs["k1"]
        assert (asked.use_base, asked.branchable) == (True, False)
        assert asked.credentials == ("anthropic",)
        assert (asked.egress, asked.allow) == ("allow-list", ("pypi.org",))
        assert asked.agent_permissions is None  # the dialog leaves it to the config (ask)
        await operations_done(pilot, app)


async def test_b_branches_the_selected_box_into_a_new_one(service):
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "b", BranchDialog)
        source = dialog.view.name
        assert dialog.query_one("#name", Input).value == f"{source}-b"
        assert "not branchable" in str(dialog.query_one(".hint").render())
        dialog.query_one("#name", Input).value = "beta"
        await until(pilot, lambda: "a box named beta exists" in text_of(dialog, "#name-problem"))
        assert dialog.query_one("#ok", Button).disabled
        dialog.query_one("#name", Input).value = "copy1"
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled, what="Branch")
        await pilot.press("enter")
        await until(pilot, lambda: any(b.name == "copy1" for b in service.views), what="branch")
        assert ("branch", source, "copy1", "local", None) in service.calls
        child = next(b for b in service.views if b.name == "copy1")
        assert child.parent == source
        await operations_done(pilot, app)
        await until(pilot, lambda: app.main.table.row_count == 5, what="the new row")


async def test_the_source_of_a_branch_says_it_is_being_branched(service):
    """While a branch runs, its source's row says so (the source is stopped and packed, or
    branched live): it said "running · ready" then "stopped · ready" as if nothing held it,
    and a start or a save of it was refused only by the core, after its dialog."""
    service.step_delay = 1.0  # the branch lasts long enough to be seen
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "b", BranchDialog)
        source = dialog.view
        key = f"{source.host}/{source.name}"
        dialog.query_one("#name", Input).value = "copy2"
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled, what="Branch")
        await pilot.press("enter")
        await until(pilot, lambda: "branch → copy2" in rows(app)[key], what=lambda: rows(app)[key])
        app.main.table.select((source.host, source.name))
        await pilot.press("w")  # busy: refused before any dialog
        await until(pilot, lambda: any("busy with branch" in n for n in notes(app)))
        assert app.screen is app.main
        await operations_done(pilot, app)
        await until(pilot, lambda: "branch" not in rows(app)[key], what="the source let go")
        assert "✗" not in rows(app)[key]


async def test_the_status_line_counts_the_bases_and_the_keys_column_says_who_holds_keys(
    service,
):
    from dataclasses import replace

    service.base_list = [BASE]
    service.views[0] = replace(service.views[0], credentials=("anthropic", "github"))
    service.views[1] = replace(service.views[1], credentials=("openai",), keys_missing=("openai",))
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
        status = str(app.main.query_one("#host-status").render())
        assert "4 boxes · 1 base · refresh" in status
        drawn = rows(app)
        first, second = service.views[0], service.views[1]
        assert "🔒 2" in drawn[f"{first.host}/{first.name}"]
        assert "⚠ openai" in drawn[f"{second.host}/{second.name}"]
        assert not any(
            mark in drawn[f"{b.host}/{b.name}"] for b in service.views[2:] for mark in ("🔒", "⚠")
        )


async def test_the_new_dialog_makes_its_options_and_work_fields_when_they_are_opened(service):
    """A dialog pays for the fields it shows: the options and the work fields are made when
    their section is opened; until then Create sends the configured defaults."""
    defaults = service.config.defaults
    defaults.cpus, defaults.memory_mib, defaults.branchable = 3, 2048, True
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        assert not dialog.query("#credentials, #egress, #cpus, #use-base, #repo, #agent")
        await pilot.press(*"lazy", "enter")
        await until(pilot, lambda: "lazy" in service.new_specs, what="new called")
        asked = service.new_specs["lazy"]
        assert (asked.cpus, asked.memory_mib, asked.branchable, asked.use_base) == (
            3,
            2048,
            True,
            True,
        )
        assert (asked.credentials, asked.egress, asked.work) == ((), "private-blocked", None)
        await operations_done(pilot, app)

        await until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        await pilot.press("n")  # opened again (the same dialog, as new)
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog), what="the New dialog")
        dialog = app.screen
        await open_section(pilot, dialog, "options")
        assert dialog.query_one("#cpus", Input).value == "3"
        assert dialog.query_one("#branchable", Checkbox).value is True
        assert not dialog.query("#repo")  # the other section stays folded


async def test_a_folded_default_with_a_problem_opens_its_section(service):
    """A configured credential with no secret stored: Create stays off, and the section
    that says why opens by itself instead of hiding the reason."""
    service.config.defaults.credentials = "openai"
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        await until(
            pilot, lambda: "no secret 'openai' stored" in text_of(dialog, "#credentials-problem")
        )
        assert not dialog.query_one("#options").collapsed
        assert dialog.query_one("#work").collapsed
        await pilot.press(*"k2")
        assert dialog.query_one("#ok", Button).disabled


def slow_presets(service) -> threading.Event:
    """The dialog's reads held until the Event is set."""
    release = threading.Event()
    presets = service.secrets.presets

    def held():
        release.wait(30)
        return presets()

    service.secrets.presets = held
    return release


async def test_enter_typed_before_the_dialog_has_read_its_context_still_creates(service):
    """A user who types a name and Enter at once (as the tmux tests do) had the Enter
    dropped while the recipe and presets were still being read: nothing was made."""
    release = slow_presets(service)
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        await pilot.press(*"quick", "enter")
        await pilot.pause()
        assert "quick" not in service.new_specs and app.screen is dialog
        release.set()
        await until(pilot, lambda: "quick" in service.new_specs, what="new called")
        await operations_done(pilot, app)


async def test_an_enter_before_the_reads_on_a_wrong_form_makes_nothing(service):
    """An Enter typed ahead of the reads stood for whatever the form said when they came
    in: a taken name, refused, then changed, made a box of the new name (alpha2) that
    nobody asked to make."""
    release = slow_presets(service)
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        await pilot.press(*"alpha", "enter", "2")
        await settled(pilot)
        assert text_of(dialog, "#name-problem") == ""
        release.set()
        await until(pilot, lambda: dialog._presets is not None, what="the dialog's reads")
        await settled(pilot)
        assert app.screen is dialog and service.new_specs == {}
        assert not dialog.query_one("#ok", Button).disabled  # Create it is, when asked
        await pilot.press("enter")
        await until(pilot, lambda: "alpha2" in service.new_specs, what="new called")
        await operations_done(pilot, app)


async def test_keys_after_an_enter_before_the_reads_change_nothing(service):
    """Typed ahead of the reads, the Enter makes the box the form said then, as it does
    once they are in: the form is locked until they are, and what is typed meanwhile
    changes neither the name nor anything else."""
    release = slow_presets(service)
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await opened(pilot, app, "n", NewBoxDialog)
        await pilot.press(*"quick", "enter", *"er")
        await settled(pilot)
        assert dialog.query_one("#name", Input).value == "quick"
        assert dialog.query_one("#name", Input).disabled and service.new_specs == {}
        release.set()
        await until(pilot, lambda: "quick" in service.new_specs, what="new called")
        assert list(service.new_specs) == ["quick"]
        await operations_done(pilot, app)
