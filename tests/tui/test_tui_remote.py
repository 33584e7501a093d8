"""The dashboard and remote boxes: web UI through a kept forward, the host's port range."""

from __future__ import annotations

import time

from hbtui.tui.app import HbtuiApp

from support.tui_fakes import FakeService, frozen_clock


async def until(pilot, predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {predicate}"
        await pilot.pause(0.05)


async def select(pilot, app: HbtuiApp, name: str) -> None:
    app.main.table.focus()
    while app.main.selected_view().name != name:
        await pilot.press("down")


async def test_a_remote_box_opens_through_one_kept_forward():
    service = FakeService()
    opened: list[str] = []
    app = HbtuiApp(service, clock=frozen_clock, refresh_seconds=0.5, opener=opened.append)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await select(pilot, app, "delta")  # the box on host "lab"
        await pilot.press("o")
        await until(pilot, lambda: opened)
        await pilot.press("o")
        await until(pilot, lambda: len(opened) == 2)
        assert [c for c in service.calls if c[0] == "web"] == [("web", "delta", "lab")]
        assert opened == ["http://127.0.0.1:40001/"] * 2  # the forward is made once and kept
        assert service.closed_forwards == []
    assert service.closed_forwards == ["delta"]  # and closed when the dashboard ends


async def test_the_port_map_shows_the_selected_box_host():
    service = FakeService()
    app = HbtuiApp(service, clock=frozen_clock, refresh_seconds=0.5)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await select(pilot, app, "delta")
        await pilot.press("p")
        await until(pilot, lambda: any(c[0] == "ports" for c in service.calls))
        assert [c for c in service.calls if c[0] == "ports"][-1] == ("ports", "lab")
