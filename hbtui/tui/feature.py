"""What a feature of the dashboard stands on: the App, as the features see it.

Each feature (boxes, archives, agents, work, shell) is a plain object the App composes
and names as an action namespace: a key bound to `boxes.start` runs `Boxes.action_start`
(the actions table, hbtui/tui/actions.py). A feature starts its own workers, asks the
Service, pushes its dialogs and views, and answers the messages the App hands it.
`Dashboard` is what it may ask of the App (app.py's `HbtuiApp`), `Board` what it may ask
of the main screen: written out here, so a feature imports neither.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen, ScreenResultCallbackType, ScreenResultType
from textual.widget import AwaitMount, Widget

from hbtui.core.foundation import BoxListing, BoxView
from hbtui.tui.activity import Activity, BoxKey

if TYPE_CHECKING:
    from textual.await_complete import AwaitComplete
    from textual.worker import Worker

    from hbtui.config import Config
    from hbtui.core.service import Service
    from hbtui.tui.operations import Operation
    from hbtui.tui.requests import Request

W = TypeVar("W", bound=Widget)
Job = Callable[[], Coroutine[Any, Any, None]]  # what a worker runs


class Board(Protocol):
    """The main screen (boxes/screen.py), as the features use it."""

    listing: BoxListing | None  # the last listing shown

    def selected_view(self) -> BoxView | None: ...

    def chosen_views(self) -> list[BoxView]:
        """The marked boxes, else the selected one."""
        ...

    def clear_marks(self) -> None: ...

    def listed(self, key: BoxKey) -> bool:
        """Whether the last listing has this box (a row may be an operation's only)."""
        ...

    def redraw(self) -> None: ...

    def post_message(self, message: Message) -> bool: ...

    def query_one(self, selector: type[W]) -> W: ...


class Dashboard(Protocol):
    """The App (app.py), as the features use it."""

    config: Config
    activities: dict[BoxKey, Activity]  # each box's latest operation and log
    opener: Callable[[str], object]  # shows a URL in a browser; False (or OSError): none

    @property
    def service(self) -> Service: ...

    @property
    def main(self) -> Board: ...

    @property
    def paused(self) -> bool:
        """The terminal is handed to a shell: nothing is asked meanwhile."""
        ...

    @property
    def screen(self) -> Screen[object]: ...

    @property
    def screen_stack(self) -> list[Screen[Any]]: ...

    @property
    def is_headless(self) -> bool: ...

    def start(self, work: Job, group: str, *, exclusive: bool = False) -> Worker[None]:
        """Run `work` in a worker; an exception in it becomes a notification."""
        ...

    def run_request(self, request: Request) -> Operation | None:
        """Run a request's Service call as an operation (None: its box is busy)."""
        ...

    def owner(self, key: BoxKey) -> Operation | None:
        """The operation running on this box."""
        ...

    def hand_over(self, argv: list[str]) -> Awaitable[int]:
        """Run `argv` on this terminal, the dashboard suspended meanwhile."""
        ...

    def to_terminal(self, sequence: str) -> None:
        """Write an escape sequence to the terminal itself (where there is one)."""
        ...

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None: ...

    def bell(self) -> None: ...

    def post_message(self, message: Message) -> bool: ...

    def push_screen(
        self,
        screen: Screen[ScreenResultType],
        callback: ScreenResultCallbackType[ScreenResultType] | None = None,
    ) -> AwaitMount: ...

    def pop_screen(self) -> AwaitComplete: ...

    def install_screen(self, screen: Screen[Any], name: str) -> None: ...


class Feature:
    """One feature's keys (`action_*`, see the actions table), workers and answers."""

    def __init__(self, app: Dashboard) -> None:
        self.app = app

    @property
    def service(self) -> Service:
        return self.app.service

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Whether a key of this feature applies now (Textual asks, for the footer too)."""
        return True

    def to_main(self, message: Message) -> None:
        """Hand a worker's result to the main screen (unless the dashboard has closed)."""
        if self.app.screen_stack:
            self.app.main.post_message(message)

    def need_box(self) -> BoxView | None:
        """The selected box, or None, said."""
        view = self.app.main.selected_view()
        if view is None:
            self.app.notify("select a box first", severity="warning")
        return view

    def chosen(self) -> list[BoxView]:
        """The marked boxes (a bulk action), else the selected one."""
        views = self.app.main.chosen_views()
        if not views:
            self.app.notify("select a box first", severity="warning")
        return views

    def refuse_busy(self, view: BoxView) -> bool:
        """Say so (before any dialog is filled) when the box is busy with an operation,
        here or in another hbtui process (the core's per-box lock)."""
        activity = self.app.activities.get((view.host, view.name))
        if activity is not None and activity.running:
            busy = activity.operation
        elif view.busy is not None and view.busy.held:  # another process runs one on it
            busy = str(view.busy)
        else:
            return False
        self.app.notify(
            f"{view.name} is busy with {busy}; try again when it is done", severity="warning"
        )
        return True

    def taken(self) -> set[BoxKey]:
        """(host, name) of every box listed or being made: names a new box cannot have."""
        listing = self.app.main.listing
        taken = {(b.host, b.name) for b in listing.boxes} if listing is not None else set()
        return taken | {key for key, a in self.app.activities.items() if a.running}
