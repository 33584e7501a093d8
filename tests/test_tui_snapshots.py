"""Snapshots of the dashboard and each dialog: fixed data, fixed clock, 160x45."""

from __future__ import annotations

import pytest
from textual.widgets import Input
from tui_fakes import FakeService, frozen_clock

from hbtui.events import LogLine, Phase, Step
from hbtui.tui.app import HbtuiApp

SIZE = (160, 45)


@pytest.fixture
def app() -> HbtuiApp:
    return HbtuiApp(FakeService(), clock=frozen_clock, refresh_seconds=60)


async def settle(pilot) -> None:
    """Wait for the first listing and stop cursors blinking, so screens are stable."""
    app = pilot.app
    while app.main.listing is None or app.main.table.row_count == 0:
        await pilot.pause(0.05)
    activity = app.activities[("local", "alpha")]
    activity.begin("repair")
    for event in (
        Phase("copying the recipe into the box"),
        Step(2, 6, "agent-user"),
        LogLine("\x1b[32m✓\x1b[0m user agent exists"),
        LogLine("\x1b[33mwarning:\x1b[0m /data already populated, keeping it"),
        Step(3, 6, "agent-tools"),
        LogLine("installing \x1b[1mtmux\x1b[0m 3.4"),
    ):
        activity.apply(event)
    app.main.box_changed(("local", "alpha"))
    await pilot.pause(0.3)
    await blink_off(pilot)


async def blink_off(pilot) -> None:
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    await pilot.pause(0.1)


def test_main_screen(snap_compare, app):
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_main_screen_with_port_allocator(snap_compare, app):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("p")
        await pilot.pause(0.3)
        pilot.app.main.table.focus()
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_filter(snap_compare, app):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("slash", *"run")
        await blink_off(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("key", ["n", "d", "w", "l", "e", "question_mark"])
def test_dialog(snap_compare, app, key):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press(key)
        await pilot.pause(0.3)
        if key == "n":
            await pilot.press(*"Bad-name")
        await blink_off(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
