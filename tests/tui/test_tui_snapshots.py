"""Snapshots of the dashboard and each dialog: fixed data, fixed clock, 160x45."""

from __future__ import annotations

import pytest

from hbtui.tui.app import HbtuiApp

from support.pilot import SIZE, blink_off, settle, settled
from support.tui_fakes import FakeService, frozen_clock


@pytest.fixture
def app() -> HbtuiApp:
    return HbtuiApp(FakeService(), clock=frozen_clock, refresh_seconds=60)


def test_main_screen(snap_compare, app):
    assert snap_compare(app, terminal_size=SIZE, run_before=settle)


def test_main_screen_with_port_allocator(snap_compare, app):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.press("p")
        await settled(pilot)
        pilot.app.main.table.focus()
        await settled(pilot)

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
        await settled(pilot)
        if key == "n":
            await pilot.press(*"Bad-name")
        await blink_off(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
