"""Driving the dashboard with Textual's Pilot: an app over a fake or real Service, waits
for state (never for time), and what the screen shows, read as a user reads it."""

from __future__ import annotations

import time

from textual.css.query import NoMatches
from textual.drivers.headless_driver import HeadlessDriver
from textual.widgets import Input, Label

from hbtui.events import LogLine, Phase, Step
from hbtui.tui.app import HbtuiApp

from support.tui_fakes import frozen_clock

SIZE = (160, 45)


async def settled(pilot) -> None:
    """Until every widget has handled its messages and no animation runs: the screen shows
    what the last key or change led to. A state, not a time; it also serves a check that
    something did NOT happen, since whatever would have happened is a message handled."""
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()
    # That pause ends with a paint, and what waits for a paint (a footer's new keys after
    # a focus or a binding changed) only starts then: done by the end of this one.
    await pilot.pause()


async def until(pilot, predicate, timeout: float = 10.0, what=None) -> None:
    """Wait for `predicate`; one that cannot be evaluated yet (widgets still
    mounting) counts as not yet true."""
    deadline = time.monotonic() + timeout

    def holds() -> bool:
        try:
            return bool(predicate())
        except NoMatches:
            return False

    while not holds():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out waiting for {what() if callable(what) else what or predicate}"
            )
        await pilot.pause(0.02)


class RecordingApp(HbtuiApp):
    """The dashboard, keeping every toast it showed: on a loaded machine a toast can time
    out before a test's wait comes to look for it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.toasts: list[str] = []

    def _on_notify(self, event) -> None:
        # Textual calls the handler of every class of the App's MRO, HbtuiApp's too: a
        # super() call here would run it twice (each toast shown as "… (×2)").
        self.toasts.append(f"{event.notification.title} {event.notification.message}")


def make_app(service, **kwargs) -> HbtuiApp:
    """The dashboard over `service`, listing as often as its config says (2 s, as shipped)
    unless `refresh` says otherwise. A test waits for a change a listing brings, or asks for
    the listing itself: each listing with a dialog open paints the whole dialog again (tens of
    ms of CPU), and at 0.5 s that was a tenth of the Pilot tests' CPU."""
    return RecordingApp(
        service, clock=frozen_clock, refresh_seconds=kwargs.pop("refresh", None), **kwargs
    )


def notes(app) -> list[str]:
    """Every toast the app has shown so far, as "title message"."""
    if isinstance(app, RecordingApp):
        return list(app.toasts)
    return [f"{n.title} {n.message}" for n in app._notifications]


def rows(app) -> dict[str, str]:
    """The box table as drawn: "host/name" -> that row's text, top to bottom."""
    table = app.main.table
    drawn = {}
    for y in range(1, table.row_count + 1):
        text = table.render_line(y).text
        name, host = text.split()[:2]
        drawn[f"{host}/{name}"] = text
    return drawn


def column(app, key: str, index: int) -> str:
    """One word of a drawn row: 0 name, 1 host, 2 state, -1 age."""
    return rows(app)[key].split()[index]


def log_text(app) -> str:
    return "\n".join(app.main.log_pane.log_view.lines)


class SuspendableDriver(HeadlessDriver):
    """A headless driver that can hand the terminal over, like a real one."""

    @property
    def is_headless(self) -> bool:
        return False

    @property
    def can_suspend(self) -> bool:
        return True

    def suspend_application_mode(self) -> None:
        pass

    def resume_application_mode(self) -> None:
        pass


def text_of(dialog, selector: str) -> str:
    return str(dialog.query_one(selector, Label).render())


async def operations_done(pilot, app) -> None:
    """Leave a test only once its operations have ended (their events need the screen)."""
    await until(
        pilot,
        lambda: not any(w.group == "operations" and not w.is_finished for w in app.workers),
        what="operations to end",
    )
    await settled(pilot)  # and their last messages reach the screen


async def opened(pilot, app, key: str, kind: type):
    await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
    await pilot.press(key)
    await until(pilot, lambda: isinstance(app.screen, kind), what=kind.__name__)
    return app.screen


async def open_section(pilot, dialog, section: str) -> None:
    """Open a folded section of the New dialog ("options", "work") as a user does: enter
    on its title; its fields exist from then on."""
    title = dialog.query_one(f"#{section} CollapsibleTitle")
    title.focus()
    await until(pilot, lambda: title.has_focus, what=f"the {section} title focused")
    await pilot.press("enter")
    await until(pilot, lambda: dialog.query_one(f"#{section}").filled, what=f"{section} open")
    await settled(pilot)


async def settle(pilot) -> None:
    """Wait for the first listing and stop cursors blinking, so screens are stable."""
    app = pilot.app
    while app.main.listing is None or app.main.table.row_count == 0:
        await pilot.pause(0.02)
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
    await settled(pilot)
    await blink_off(pilot)


async def blink_off(pilot) -> None:
    for widget in pilot.app.screen.query(Input):
        widget.cursor_blink = False
    await settled(pilot)
