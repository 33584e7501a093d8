"""What opening dialogs costs over a session: a closed dialog leaves nothing alive behind it,
and the New dialog, composed once and opened again, shows what a new one would."""

from __future__ import annotations

import gc
import weakref

import pytest
from textual._styles_cache import StylesCache
from textual.widgets import Button, Checkbox, Input, Label, Select

from hbtui.tui.app import HbtuiApp
from hbtui.tui.boxes.new import NewBoxDialog
from hbtui.tui.boxes.port_grid import PortGrid
from hbtui.tui.dialogs.base import LazySection

from support.pilot import make_app, open_section, rows, settled, until
from support.tui_fakes import FakeService


def live_styles_caches() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, StylesCache))


async def open_and_close(pilot, app: HbtuiApp, key: str) -> None:
    await pilot.press(key)
    await until(pilot, lambda: app.screen is not app.main, what=f"the screen of {key}")
    await settled(pilot)
    closed = weakref.ref(app.screen)
    await pilot.press("escape")
    await until(pilot, lambda: app.screen is app.main, what="the main screen again")
    await until(pilot, lambda: freed_or_kept(app, closed), what=f"the screen of {key} freed")
    await settled(pilot)


def freed_or_kept(app: HbtuiApp, closed: weakref.ref) -> bool:
    """A closed screen is taken apart after the main screen shows again, and freed once
    nothing holds it (a read it started runs on to its end in a thread); one the App keeps
    to open again (the New dialog) stays."""
    gc.collect()
    screen = closed()
    return screen is None or app.is_screen_installed(screen)


@pytest.mark.parametrize("key", ["n", "w", "question_mark"])
async def test_a_closed_dialog_keeps_nothing_alive(key):
    """Textual keeps every widget's render cache (its drawn lines) in a class-wide cache of
    1,024 entries (Textualize/textual#6665): each dialog opened left ~4,000 objects alive,
    and the garbage collector's full passes, which walk them all, grew to 200+ ms that
    landed on whatever key came next. Closed, a dialog leaves none of them."""
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
        await open_and_close(pilot, app, key)  # the first: imports, the stylesheet
        before = live_styles_caches()
        for _ in range(3):
            await open_and_close(pilot, app, key)
        # A dialog has 10 to 40 widgets: three of them kept would be 30 or more.
        assert live_styles_caches() - before < 10


def form_state(dialog: NewBoxDialog) -> dict[str, object]:
    """Everything the New dialog shows and would send: each widget's value, text, whether
    it shows and can be used (the folded sections' fields by what the form reads of them,
    made or not), the focus and the scroll."""
    state: dict[str, object] = {}
    outside = [
        w for w in dialog.query("*") if not any(isinstance(a, LazySection) for a in w.ancestors)
    ]
    for i, w in enumerate(outside):
        seen: list[object] = [type(w).__name__, w.display, w.disabled]
        if isinstance(w, Input):
            seen += [w.value, w.placeholder]
        elif isinstance(w, Checkbox | Select):
            seen.append(w.value)
        elif isinstance(w, Label):
            seen.append(str(w.render()))
        elif isinstance(w, LazySection):
            seen.append(w.collapsed)
        elif isinstance(w, PortGrid):
            seen += [w.picked, w.cursor]  # its map: the host's at the time (see the test)
        state[w.id or f"#{i}"] = seen
    # A made Select left blank reads as NULL, its default as "": the same to the request.
    state["sections"] = {
        selector: "" if dialog.value(selector) is Select.NULL else dialog.value(selector)
        for selector in dialog._defaults
    }
    state["focus"] = dialog.focused.id if dialog.focused else None
    state["scroll"] = dialog.query_one(".dialog").scroll_offset
    return state


async def shown(pilot, app: HbtuiApp) -> NewBoxDialog:
    """The New dialog once its reads have come in (the recipe, the presets, the port map)."""
    await until(pilot, lambda: isinstance(app.screen, NewBoxDialog), what="the New dialog")
    dialog = app.screen
    await until(pilot, lambda: dialog._presets is not None, what="the dialog's reads")
    await until(pilot, lambda: dialog.query_one(PortGrid).slots, what="the port map")
    await settled(pilot)
    return dialog


async def test_the_new_dialog_opened_again_is_as_new():
    """The New dialog is composed once and opened again (its widgets cost most of its
    opening): each time it shows what a new one would, whatever was typed, opened, sent
    or read the last time; the boxes made since are names taken, a port picked in the
    allocator is its port."""
    service = FakeService()
    app = make_app(service, refresh=60)
    async with app.run_test(size=(120, 60)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
        await pilot.press("n")
        first = await shown(pilot, app)
        as_new = form_state(first)
        # Everything typed, chosen and opened, then sent: the box is made and the dialog closes.
        await pilot.press(*"made1", "tab")
        first.query_one("#image", Input).value = "debian:12"
        first.query_one("#port", Input).value = "4801"
        for section in ("options", "work"):
            await open_section(pilot, first, section)
        first.query_one("#use-base", Checkbox).value = False
        first.query_one("#branchable", Checkbox).value = True
        first.query_one("#cpus", Input).value = "4"
        first.query_one("#egress", Select).value = "allow-list"
        first.query_one("#allow", Input).value = "pypi.org"
        first.query_one("#task", Input).value = "a task without a repository"
        await until(
            pilot, lambda: first.query_one("#work-problem", Label).display, what="a problem"
        )
        first.query_one("#task", Input).value = ""
        await settled(pilot)
        first.query_one("#ok", Button).press()
        await until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        await until(pilot, lambda: "made1" in rows_named(app), what="made1's row")

        await pilot.press("n")
        again = await shown(pilot, app)
        assert again is first  # composed once
        assert form_state(again) == as_new
        assert again.query_one(PortGrid).slots == await service.boxes.ports()  # made1's port used
        await pilot.press(*"made1")
        await until(
            pilot,
            lambda: "exists" in str(again.query_one("#name-problem", Label).render()),
            what="made1 taken",
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, what="the dialog closed")

        app.boxes.action_new(port=4794)  # picked in the port allocator
        picked = await shown(pilot, app)
        assert picked.query_one("#port", Input).value == "4794"
        assert picked.query_one(PortGrid).picked == 4794
        assert picked.query_one("#name", Input).value == ""
        # Refused (the dialog stays, saying why), then closed: none of it the next time.
        service.broken["new"] = "the engine is down"
        await pilot.press(*"made2", "enter")
        await until(
            pilot,
            lambda: "engine is down" in str(picked.query_one("#request-status", Label).render()),
            what="the refusal",
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        await pilot.press("n")
        assert form_state(await shown(pilot, app)) == as_new


def rows_named(app: HbtuiApp) -> set[str]:
    return {key.split("/")[1] for key in rows(app)}
