"""A box's port forwarded from the dashboard (F): the dialog's checks, the forward held by
the dashboard until the box stops or the dashboard quits, its log lines, and the details
view's list of the box's forwards (this dashboard's and another process's)."""

from __future__ import annotations

import asyncio
import os
import socket
import urllib.request

import pytest
from textual.widgets import Button, Checkbox, DataTable, Input, Static

from hbtui.core.foundation import Forwarded
from hbtui.names import LOCAL
from hbtui.tui.boxes.details import DetailsScreen
from hbtui.tui.help import HelpScreen
from hbtui.tui.shell.forward_dialog import ForwardDialog

from support import SIM_RECIPE
from support.cli import hbtui, ok
from support.devserver import Forward, relays_of, start_dev_server
from support.pilot import (
    SIZE,
    log_text,
    make_app,
    notes,
    operations_done,
    settled,
    text_of,
    until,
)
from support.tui_fakes import FakeService

WAIT = 120.0  # a box's answer on a loaded machine


def port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:port any more."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


async def listed(pilot, app) -> None:
    await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")


async def forward_dialog(pilot, app, name: str = "alpha") -> ForwardDialog:
    assert app.main.table.select((LOCAL, name))
    await settled(pilot)
    await pilot.press("F")
    await until(pilot, lambda: isinstance(app.screen, ForwardDialog), what="the forward dialog")
    return app.screen


def forwarded(service: FakeService, box_port: int, local_port: int) -> Forwarded:
    return Forwarded("alpha", LOCAL, box_port, local_port, os.getpid())


async def test_f_forwards_a_port_of_a_running_box_says_its_url_and_ends_when_the_box_stops():
    service = FakeService()
    opened: list[str] = []
    app = make_app(service, opener=opened.append)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        dialog = await forward_dialog(pilot, app)
        ok = dialog.query_one("#ok", Button)
        box_port, host_port = (
            dialog.query_one("#box-port", Input),
            dialog.query_one("#host-port", Input),
        )

        async def problem(is_now: str, *, blocked: bool = True) -> None:
            await until(
                pilot,
                lambda: text_of(dialog, "#problem") == is_now and ok.disabled == blocked,
                what=lambda: f"{is_now!r}, not {text_of(dialog, '#problem')!r}",
            )

        assert ok.disabled  # no port yet
        box_port.value = "web"
        await problem("the port in the box is a number")
        box_port.value = "70000"
        await problem("port in the box 70000 is out of range: 1 to 65535")
        box_port.value = "3000"
        await problem("", blocked=False)
        host_port.value = "0"
        await problem("host port 0 is out of range: 1 to 65535")
        host_port.value = ""
        await problem("", blocked=False)
        await pilot.press("enter")

        await until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        assert service.forwards == [forwarded(service, 3000, 3000)]
        await until(pilot, lambda: opened == ["http://127.0.0.1:3000/"], what="the browser")
        assert "alpha:3000 forwarded http://127.0.0.1:3000/" in notes(app)
        await until(
            pilot,
            lambda: (
                "forwarding http://127.0.0.1:3000/ to 127.0.0.1:3000 in alpha, until the "
                "dashboard quits or alpha stops" in log_text(app)
            ),
            what="the forward in alpha's log",
        )

        # The details view lists it, and one another process runs (its forward book entry).
        other = Forwarded("alpha", LOCAL, 5173, 41000, 1)
        service.forwards.append(other)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, DetailsScreen), what="the details")
        body = app.screen.query_one("#sections", Static)
        await until(pilot, lambda: "Forwards" in str(body.render()), what="the details shown")
        shown = str(body.render())
        assert "port 3000  http://127.0.0.1:3000/ (this hbtui)" in shown
        assert "port 5173  http://127.0.0.1:41000/ (pid 1)" in shown
        service.forwards.remove(other)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)

        await pilot.press("x")  # alpha stops: its forward ends, and says so
        await until(pilot, lambda: service.forwards == [], what="the forward closed")
        await until(
            pilot,
            lambda: (
                "the forward http://127.0.0.1:3000/ to alpha:3000 ended: box alpha is no "
                "longer running" in log_text(app)
            ),
            what="the end in alpha's log",
        )
        assert ("forward closed", "alpha", (3000,)) in service.calls


async def test_a_taken_host_port_is_one_line_in_the_dialog_and_nothing_is_started():
    service = FakeService()
    service.taken_host_ports = {8080}
    opened: list[str] = []
    app = make_app(service, opener=opened.append)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        dialog = await forward_dialog(pilot, app)
        dialog.query_one("#box-port", Input).value = "3000"
        dialog.query_one("#host-port", Input).value = "8080"
        dialog.query_one("#open", Checkbox).value = False
        await settled(pilot)
        await pilot.click("#ok")
        await until(
            pilot,
            lambda: (
                text_of(dialog, "#problem") == "port 8080 on 127.0.0.1 is taken on this machine"
            ),
            what="the refusal",
        )
        assert app.screen is dialog and not dialog.query_one("#host-port", Input).disabled
        assert service.forwards == [] and opened == []
        assert "forwarding" not in log_text(app)
        dialog.query_one("#host-port", Input).value = "8081"
        await settled(pilot)
        ok = dialog.query_one("#ok", Button)
        # A button takes no click for 0.2 s after the last one (Textual's, against a
        # double click): a user's second click comes later.
        await until(pilot, lambda: not ok.has_class("-active"), what="the button clickable")
        await pilot.click("#ok")
        await until(pilot, lambda: app.screen is app.main, what="the dialog closed")
        assert service.forwards == [forwarded(service, 3000, 8081)]
        assert opened == []  # not asked to open it


async def test_quitting_the_dashboard_closes_its_forwards():
    service = FakeService()
    app = make_app(service, opener=lambda url: True)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        dialog = await forward_dialog(pilot, app)
        dialog.query_one("#box-port", Input).value = "3000"
        await settled(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: service.forwards, what="the forward")
        await pilot.press("q")
    assert service.forwards == []
    assert ("forward closed", "alpha", (3000,)) in service.calls


async def test_f_on_a_stopped_box_says_so_and_opens_nothing():
    service = FakeService()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        assert app.main.table.select((LOCAL, "beta"))
        await settled(pilot)
        await pilot.press("F")
        await until(pilot, lambda: any("beta is stopped" in n for n in notes(app)))
        assert app.screen is app.main
        assert not [c for c in service.calls if c[0] == "forward"]


async def test_help_lists_the_forward_key():
    app = make_app(FakeService())
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one(DataTable)
        found = [table.get_row_at(y) for y in range(table.row_count)]
        assert any(str(row[0]) == "forward" and "F" in map(str, row) for row in found)


# -- over the real Service: a dev server on a simulator box's own loopback --------------------


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return answer.read()


@pytest.mark.sim
@pytest.mark.timeout(600)
async def test_the_dashboards_forward_reaches_a_dev_server_on_the_box_loopback(
    sim_env, sim_service, free_port
):
    dev, here, cli_port = free_port(3)
    ok(hbtui("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env))
    start_dev_server(sim_env, "b1", dev)
    cli = Forward("b1", str(dev), "--port", str(cli_port), env=sim_env)  # another process's
    opened: list[str] = []
    app = make_app(sim_service, refresh=1, opener=opened.append)
    try:
        assert cli.url() == f"http://127.0.0.1:{cli_port}/"
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.main.table.row_count == 1, timeout=WAIT)
            dialog = await forward_dialog(pilot, app, "b1")
            dialog.query_one("#box-port", Input).value = str(dev)
            dialog.query_one("#host-port", Input).value = str(here)
            await settled(pilot)
            await pilot.press("enter")
            url = f"http://127.0.0.1:{here}/"
            await until(pilot, lambda: opened == [url], timeout=WAIT, what="the forward's URL")
            assert app.screen is app.main
            assert (await asyncio.to_thread(fetch, url + "conn")).isdigit()

            await pilot.press("i")
            await until(pilot, lambda: isinstance(app.screen, DetailsScreen))
            body = app.screen.query_one("#sections", Static)
            await until(pilot, lambda: "Forwards" in str(body.render()), timeout=WAIT)
            shown = str(body.render())
            assert f"port {dev}  {url} (this hbtui)" in shown
            assert f"port {dev}  http://127.0.0.1:{cli_port}/ (pid {cli.proc.pid})" in shown
            await pilot.press("escape")

            await pilot.press("x")  # b1 stops: the forward ends, and its log says so
            await until(
                pilot,
                lambda: (
                    f"the forward {url} to b1:{dev} ended: box b1 is no longer running"
                    in log_text(app)
                ),
                timeout=WAIT,
                what=lambda: log_text(app),
            )
            await operations_done(pilot, app)
        assert cli.proc.wait(60) == 1  # the CLI's forward ended with the box too
        assert port_free(here)
        assert relays_of(dev) == []
    finally:
        cli.stop()
