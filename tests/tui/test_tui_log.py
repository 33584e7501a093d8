"""The log pane: nothing lost in a flood, search, wrap, full screen, last error."""

from __future__ import annotations

import asyncio

from textual.widgets import DataTable, Input

from hbtui.events import LogLine
from hbtui.tui.activity import MAX_LINES
from hbtui.tui.app import HbtuiApp
from hbtui.tui.help import HelpScreen
from hbtui.tui.messages import ListingWanted
from hbtui.tui.widgets.log_pane import LogView

from support.pilot import SIZE, blink_off, make_app, settle, settled, until
from support.tui_fakes import FakeService, frozen_clock

ALPHA, BETA = ("local", "alpha"), ("local", "beta")


def flood(lines: int, prefix: str):
    """An operation call that reports `lines` log lines in 500-line bursts."""

    async def call(report):
        for start in range(0, lines, 500):
            for i in range(start, min(start + 500, lines)):
                report(LogLine(f"\x1b[32m{prefix}\x1b[0m line {i}"))
            await asyncio.sleep(0)

    return call


def screen_text(view: LogView) -> list[str]:
    """The rows the view draws right now, as text."""
    return [view.render_line(y).text.rstrip() for y in range(view.size.height)]


async def with_lines(pilot, app, key, lines: list[str]) -> LogView:
    activity = app.activities[key]
    for line in lines:
        activity.append(line)
    app.main.box_changed(key)
    view = app.main.log_pane.log_view
    await until(pilot, lambda: view.line_count == len(activity.lines))
    return view


async def test_flood_keeps_exactly_the_last_lines_of_every_box_in_order(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        operations = [
            app.run_operation(ALPHA, "flood", flood(20_000, "a")),
            app.run_operation(BETA, "flood", flood(7_000, "b")),
        ]
        for operation in operations:
            assert operation is not None and operation.worker is not None
            await operation.worker.wait()
        await until(pilot, lambda: not app.activities[BETA].running)
        await until(pilot, lambda: not app.activities[ALPHA].running)
        await settled(pilot)
        for key, lines, prefix in ((ALPHA, 20_000, "a"), (BETA, 7_000, "b")):
            app.main.table.select(key)
            await until(pilot, lambda key=key: app.main.log_pane.key == key)
            view = app.main.log_pane.log_view
            reported = ["── flood ──", *(f"{prefix} line {i}" for i in range(lines))]
            expected = [*reported, "✓ flood done"][-MAX_LINES:]
            await until(pilot, lambda view=view, expected=expected: view.lines == expected)
            await settled(pilot)
            # Following: the last lines are the ones on screen.
            drawn = [row for row in screen_text(view) if row]
            assert drawn == expected[-len(drawn) :]


async def test_slash_filters_the_table_but_searches_the_focused_log(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("slash")
        assert app.focused is app.screen.query_one("#filter", Input)
        await pilot.press("escape")
        lines = [f"step {i}: {'compiling' if i % 10 else 'linking'} module {i}" for i in range(300)]
        view = await with_lines(pilot, app, ALPHA, lines)
        view.focus()
        await pilot.press("slash")
        search = app.main.log_pane.query_one("#log-search", Input)
        assert app.focused is search
        assert not app.screen.query_one("#filter", Input).display
        await pilot.press(*"LINKING", "enter")
        assert app.focused is view
        linking = [view.first + i for i, line in enumerate(view.lines) if "linking" in line]
        assert view.matches == linking and len(linking) == 30
        assert view.current == linking[-1]  # the newest match first
        header = str(app.main.log_pane.query_one("#log-header").render())
        assert "/LINKING: 30/30" in header
        await pilot.press("N")
        assert view.current == linking[-2]
        assert "linking module 280" in "\n".join(screen_text(view))
        await pilot.press("n", "n")
        assert view.current == linking[0]  # past the newest, round to the oldest
        assert not view.auto_scroll  # a jump up pauses following
        assert "linking module 0" in "\n".join(screen_text(view))
        await pilot.press("escape")
        assert view.pattern is None and view.matches == []
        await pilot.press("end")
        assert view.auto_scroll


async def test_workload_log_search_survives_refreshes_and_esc_falls_to_the_filter(
    static_service,
):
    # No timed listing: each one reloads the workload log, which would replace the output
    # the test draws below with the fake's before the assertions run.
    app = make_app(static_service, refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("slash", *"alpha", "enter")  # a filter kept on the table
        pane = app.main.log_pane
        await pilot.press("t")
        view = pane.workload_view
        await until(pilot, lambda: any("listening" in line for line in view.lines))
        view.focus()
        await pilot.press("slash", *"listening", "enter")
        assert len(view.matches) == 1
        text = "\n".join(f"request {i}" for i in range(50)) + "\nlistening again\n"
        pane.show_workload(text)  # a refresh with more output
        await pilot.pause()
        assert view.search_text == "listening" and len(view.matches) == 1
        assert view.lines[-1] == "listening again"
        pane.show_workload(text)  # the same output: nothing moves
        await pilot.pause()
        assert len(view.matches) == 1
        await pilot.press("escape")  # clears the search first
        assert view.pattern is None and app.main.table.filter_text == "alpha"
        await pilot.press("escape")  # then, with no search, the screen's: the filter
        assert app.main.table.filter_text == ""


async def test_wrap_toggle_folds_long_lines_and_back(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        long = "x" * 400 + " END"
        view = await with_lines(pilot, app, ALPHA, ["short", long, "last"])
        view.focus()
        width = view.scrollable_content_region.width
        assert view.virtual_size.height == view.line_count
        await pilot.press("W")
        assert view.wrap
        rows = -(-len(long) // width)
        assert view.virtual_size.height == view.line_count - 1 + rows
        drawn = [row for row in screen_text(view) if row]
        assert drawn[-1] == "last" and drawn[-2].endswith("END")
        assert "".join(drawn[-1 - rows : -1]) == long
        assert "[wrap]" in str(app.main.log_pane.query_one("#log-header").render())
        await pilot.press("W")
        assert not view.wrap and view.virtual_size.height == view.line_count


async def test_full_screen_log_takes_the_body_and_gives_it_back(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        pane = app.main.log_pane
        before = pane.size.height
        await pilot.press("f")
        await settled(pilot)
        assert not app.main.table.display
        assert app.focused is pane.log_view
        assert pane.size.height > before + 10
        await pilot.press("f")  # the log's own binding brings the table back
        await settled(pilot)
        assert app.main.table.display and app.focused is app.main.table
        assert pane.size.height == before


async def test_jump_to_last_error(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        lines = [f"ok {i}" for i in range(400)]
        lines[120] = "\x1b[31mE: Unable to locate package nope\x1b[0m (error)"
        lines[250] = "fatal error: missing header"
        view = await with_lines(pilot, app, ALPHA, lines)
        view.focus()
        await pilot.press("E")
        numbers = [view.first + i for i, line in enumerate(view.lines) if "fatal error" in line]
        assert view.marked == numbers[-1]
        assert not view.auto_scroll
        assert "fatal error: missing header" in "\n".join(screen_text(view))
        app.main.table.select(BETA)
        await until(pilot, lambda: app.main.log_pane.key == BETA)
        clean = await with_lines(pilot, app, BETA, ["all fine", "still fine"])
        clean.focus()
        await pilot.press("E")
        assert clean.marked is None and clean.auto_scroll


async def test_help_and_footer_list_the_log_keys(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        app.main.log_pane.log_view.focus()
        await pilot.pause()
        footer = {b.binding.key for b in app.screen.active_bindings.values() if b.binding.show}
        assert {"slash", "n", "N", "W", "E"} <= footer
        await pilot.press("f")  # one binding (the screen's) serves the log and the table
        await until(pilot, lambda: app.main.has_class("-log-full"))
        await pilot.press("f")
        await until(pilot, lambda: not app.main.has_class("-log-full"))
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one(DataTable)
        by_id = {
            str(table.get_row_at(i)[0]): str(table.get_row_at(i)[2]) for i in range(table.row_count)
        }
        assert by_id["log-search"] == "in a log: Search the log"
        assert "last error" in by_id["log-error"] and "Full-screen log" in by_id["fullscreen"]
        assert {"log-next", "log-previous", "log-wrap", "log-follow"} <= set(by_id)


class FrameCounting(HbtuiApp):
    """The dashboard, counting the frames it has drawn so far."""

    frames = 0

    def _display(self, screen, renderable):
        if renderable is not None:
            self.frames += 1
        super()._display(screen, renderable)


async def test_the_core_is_built_after_the_first_frame():
    """run_dashboard hands the App a function: the core's imports and set-up wait."""
    built_after: list[int] = []
    service = FakeService()

    def connect() -> FakeService:
        built_after.append(app.frames)
        return service

    app = FrameCounting(connect, config=service.config, clock=frozen_clock)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        assert built_after == [built_after[0]] and built_after[0] >= 1
        assert app.service is service and built_after == [built_after[0]]  # built once


def test_search_highlighting(snap_compare):
    app = HbtuiApp(FakeService(), clock=frozen_clock, refresh_seconds=60)

    async def run_before(pilot):
        await settle(pilot)
        activity = pilot.app.activities[ALPHA]
        for i in range(40):
            activity.append(f"\x1b[2m{i:03d}\x1b[0m installing package-{i} (tmux {i % 4}.4)")
        pilot.app.main.box_changed(ALPHA)
        await settled(pilot)
        pilot.app.main.log_pane.log_view.focus()
        # Full screen (the table, which other work changes, is not in the picture).
        await pilot.press("f", "slash", *"tmux 3", "enter", "N")
        await settled(pilot)
        await blink_off(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


async def test_the_first_listing_is_asked_before_the_first_frame():
    """The main screen asks the App for its first listing as it mounts, not after its first
    frame: the Service is built and lists while the footer's keys and the frames after the
    first wait, so the rows are on screen a frame or two sooner."""
    asked_after: list[int] = []
    service = FakeService()

    class Counting(FrameCounting):
        def on_listing_wanted(self, message: ListingWanted) -> None:
            asked_after.append(self.frames)
            super().on_listing_wanted(message)

    app = Counting(service, clock=frozen_clock, refresh_seconds=60)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        assert asked_after[0] == 0
