"""The dashboard and remote boxes: web UI through a kept forward, the host's port range."""

from __future__ import annotations

import time

from tui_fakes import StaticService, frozen_clock

import hbtui.remote
from hbtui.tui.app import HbtuiApp


async def until(pilot, predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {predicate}"
        await pilot.pause(0.05)


async def test_a_remote_box_opens_through_one_kept_forward(tmp_path, monkeypatch):
    service = StaticService(tmp_path)
    made, closed, opened = [], [], []

    async def fake_forward(svc, name, host_name):
        made.append((name, host_name))

        async def close() -> None:
            closed.append(name)

        return f"http://127.0.0.1:{40000 + len(made)}/", close

    monkeypatch.setattr(hbtui.remote, "open_forward", fake_forward)
    app = HbtuiApp(service, clock=frozen_clock, refresh_seconds=0.5)
    monkeypatch.setattr(app, "open_url", lambda url, **kw: opened.append(url))
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.main.table.focus()
        while app.selected_view().name != "delta":  # the box on host "lab"
            await pilot.press("down")
        await pilot.press("o")
        await until(pilot, lambda: opened)
        await pilot.press("o")
        await until(pilot, lambda: len(opened) == 2)
        assert made == [("delta", "lab")]  # the forward is made once and kept
        assert opened == ["http://127.0.0.1:40001/"] * 2
        assert closed == []
    assert closed == ["delta"]  # and closed when the dashboard ends


async def test_the_port_map_shows_the_selected_box_host(tmp_path):
    service = StaticService(tmp_path)
    asked = []
    real_ports = service.ports

    async def ports(host_name: str = "local"):
        asked.append(host_name)
        return await real_ports(host_name)

    service.ports = ports
    app = HbtuiApp(service, clock=frozen_clock, refresh_seconds=0.5)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.main.table.focus()
        while app.selected_view().name != "delta":
            await pilot.press("down")
        await pilot.press("p")
        await until(pilot, lambda: asked)
        assert asked[-1] == "lab"
