"""An 80x24 terminal: the footer keeps help and quit, table columns
collapse by priority with the selected row in sight, dialogs scroll to their buttons,
help wraps. Snapshots of the main screen and of each dialog at that size."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest
from textual.containers import HorizontalGroup
from textual.widgets import Button
from textual.widgets._footer import FooterKey

from hbtui.tui.app import HbtuiApp
from hbtui.tui.widgets.key_footer import KeyFooter

from support.pilot import blink_off, settled, until
from support.tui_fakes import FakeService, frozen_clock, sample_boxes

SMALL = (80, 24)


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    """The status line says the local time of the last listing: make it the same here."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def app() -> HbtuiApp:
    return HbtuiApp(FakeService(), clock=frozen_clock, refresh_seconds=60)


async def settle(pilot) -> None:
    app = pilot.app
    while app.main.listing is None or app.main.table.row_count == 0:
        await pilot.pause(0.05)
    await settled(pilot)
    await blink_off(pilot)


def test_main_screen_small(snap_compare, app):
    assert snap_compare(app, terminal_size=SMALL, run_before=settle)


@pytest.mark.parametrize("key", ["n", "d", "w", "l", "e", "question_mark", "i", "colon"])
def test_dialog_small(snap_compare, app, key):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press(key)
        await settled(pilot)
        await blink_off(pilot)

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


def test_bulk_save_small(snap_compare, app):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("space", "space", "w")
        await settled(pilot)
        await blink_off(pilot)

    assert snap_compare(app, terminal_size=SMALL, run_before=run_before)


async def test_footer_keeps_help_and_quit(app):
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        pinned = app.main.query_one("#pinned", HorizontalGroup)
        keys = {k.key: k for k in pinned.query(FooterKey)}
        assert {"question_mark", "q"} <= set(keys)
        for key in (keys["question_mark"], keys["q"]):
            region = key.region
            assert region.width > 0 and region.right <= SMALL[0] and region.y == SMALL[1] - 1


async def test_columns_collapse_and_the_selected_row_stays_in_sight():
    many = sample_boxes() + [
        replace(sample_boxes()[0], name=f"box{i:02}", port=5000 + i) for i in range(30)
    ]
    app = HbtuiApp(FakeService(many), clock=frozen_clock, refresh_seconds=60)
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        table = app.main.table
        head = table.render_line(0).text
        assert "Box" in head and "State" in head and "URL" not in head and "Image" not in head
        assert len(head.rstrip()) <= table.size.width
        await pilot.press("G")
        await settled(pilot)
        assert table.selected_key() == ("local", "gamma")
        visible = table.scrollable_content_region.height - 1  # under the header
        assert 0 <= table.cursor_row - table.scroll_offset.y < visible
        assert "gamma" in "".join(table.render_line(y).text for y in range(1, visible + 1))
        # Wider again: the columns come back.
        await pilot.resize_terminal(160, 45)
        await settled(pilot)
        assert "URL" in table.render_line(0).text


@pytest.mark.parametrize("key", ["n", "w", "l", "e"])
async def test_dialog_buttons_are_reachable(app, key):
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await settled(pilot)
        dialog = app.screen.query_one(".dialog")
        ok = app.screen.query_one("#ok", Button)
        dialog.scroll_to_widget(ok, animate=False)
        await settled(pilot)
        assert app.screen.region.contains_region(ok.region)
        assert dialog.region.contains_region(ok.region)


async def test_help_wraps_its_descriptions(app):
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settled(pilot)
        table = app.screen.query_one("#keys")
        assert table.region.right <= SMALL[0]
        heights = [table.rows[k].height for k in table.rows]
        assert max(heights) > 1  # the longest descriptions take two lines, not a cut


async def test_footer_recomposed_while_the_app_closes_keeps_one_pinned_group(app):
    """Textual recomposes the footer when bindings change, as they do while the app's
    screens close; keys mounted once the app stopped running never start, the next
    recompose cannot remove them, and `#pinned` was mounted twice (DuplicateIds)."""
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        footer = app.main.query_one(KeyFooter)
        app._running = False  # as in App._shutdown, before the screens are pruned
        try:
            await footer.recompose()
            await footer.recompose()
        finally:
            app._running = True
        await pilot.pause()
        assert len(footer.query("#pinned")) == 1
        assert {"question_mark", "q"} <= {
            k.key for k in footer.query_one("#pinned").query(FooterKey)
        }


@pytest.mark.parametrize("key", ["n", "w", "l", "e"])
async def test_a_dialog_opens_at_its_title(app, key):
    """A form taller than the terminal opens at its top: its title (which box it acts on)
    and its first field in sight; it scrolled them away, centring the first field."""
    async with app.run_test(size=SMALL) as pilot:
        await settle(pilot)
        await pilot.press(key)
        await until(pilot, lambda: app.screen is not app.main, what=f"the dialog of {key}")
        await settled(pilot)
        form = app.screen.query_one(".dialog")
        title = app.screen.query_one(".dialog-title")
        assert form.max_scroll_y > 0  # taller than the terminal: it scrolls
        assert form.scroll_offset.y == 0
        assert form.region.contains_region(title.region) and title.region.height
        focused = app.screen.focused
        assert focused is not None and form.region.contains_region(focused.region)


@pytest.mark.parametrize("size", [SMALL, (100, 30), (160, 45)])
async def test_help_shows_every_word_of_every_key(app, size):
    """Help's descriptions wrap within the window at any width: none runs past its right
    edge (at 80 columns the ends of lines were cut off: "a shell as age", "its executor")."""
    from textual.widgets import DataTable

    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await until(pilot, lambda: app.screen is not app.main, what="help")
        await settled(pilot)
        table = app.screen.query_one(DataTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width
        await pilot.resize_terminal(*SMALL)  # and once the terminal shrinks
        await settled(pilot)
        assert table.virtual_size.width <= table.scrollable_content_region.width
