"""What every part of the dashboard App shares: the Service, the state, the main screen.

`HbtuiApp` (app.py) is put together from one class per concern, each
built on the one before: `DashboardBase` (this: the state and the
plumbing), `Queries` (read-only questions), `Running` (operations and their
records), `WebAndShell` (a box's web UI and its shell), `BoxActions` (the
keys that act on boxes, and their dialogs), `Agents` (what the boxes' agents
do, their screens, answering them), `WorkActions` (a box's work: diff, pull, try; a
mixin beside them), then `HbtuiApp` (start-up, signals, keys, quitting,
notifications). Each handles its own messages;
Textual calls a handler in every class of the App's MRO, so no two of them
handle the same one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.message import Message
from textual.worker import Worker

from hbtui.config import Config
from hbtui.core.foundation import BoxStats, BoxView
from hbtui.tui.activity import Activity, BoxKey
from hbtui.tui.boxes.screen import MainScreen
from hbtui.tui.operations import Operation
from hbtui.tui.system import launch_interactive, open_in_browser

if TYPE_CHECKING:
    from hbtui.core.foundation import WebAccess
    from hbtui.core.service import Service

Clock = Callable[[], datetime]
Launcher = Callable[[list[str]], Awaitable[int]]  # runs argv on this terminal, returns its status
Opener = Callable[[str], object]  # shows a URL in a browser; False (or OSError): no browser


class DashboardBase(App[None]):
    def __init__(
        self,
        service: Service | Callable[[], Service],
        *,
        config: Config | None = None,
        clock: Clock | None = None,
        launcher: Launcher | None = None,
        opener: Opener | None = None,
        refresh_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # A function that builds the Service is called when the Service is first
        # needed (the first listing, after the first frame), so the core's
        # imports and set-up never delay the first frame; until then `config`
        # is all the dashboard reads.
        self._service: Service | None
        self._connect: Callable[[], Service]
        self.config: Config
        if callable(service):
            assert config is not None, "config is needed until the service is built"
            self._service, self._connect, self.config = None, service, config
        else:
            self._service = service
            self.config = config if config is not None else service.config
            self._connect = lambda: service
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.launcher: Launcher = launcher or launch_interactive
        self.opener: Opener = opener or self._open_in_browser
        self.keymap: dict[str, str] = {}  # the [keymap] entries applied (checked at mount)
        self.refresh_seconds = refresh_seconds or self.config.refresh_seconds
        self.activities: dict[BoxKey, Activity] = {}
        self.operations: list[Operation] = []  # the running ones, oldest first
        self._paused = False  # the terminal is handed to a shell: no listing meanwhile
        self._listing = False  # a list_boxes() worker is running
        self._list_again = False  # ... and another listing was asked for meanwhile
        self._ports_worker: Worker[None] | None = None
        self._web: dict[BoxKey, WebAccess] = {}  # forwards kept until the dashboard ends
        self._unlocking = False  # the secrets passphrase dialog is up
        self._after_unlock: list[Callable[[], object]] = []  # operations it will run again
        self._quitting = False
        self._exit_status = 0  # 128 + the signal that ended the dashboard, if one did
        self.usage_history: dict[BoxKey, deque[BoxStats]] = {}  # live figures, newest last
        self._stats_worker: Worker[None] | None = None
        self._usage: dict[BoxKey, BoxStats] = {}  # each box's last figures
        self._stats_read: dict[BoxKey, float] = {}  # when they were read (time.monotonic())
        # (message, title, severity) -> the toast showing it, and how many times it came
        self._repeats: dict[tuple[str, str, str], tuple[str, int]] = {}

    def _open_in_browser(self, url: str) -> object:
        """The browser on this machine, or, under `textual serve`, the user's."""
        if self.is_web:
            self.open_url(url)
            return True
        return open_in_browser(url)

    @property
    def service(self) -> Service:
        if self._service is None:
            self._service = self._connect()
        return self._service

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    def _start(
        self, work: Callable[[], Coroutine[Any, Any, None]], group: str, *, exclusive: bool = False
    ) -> Worker[None]:
        """Run `work` in a worker; an exception in it becomes a notification."""
        worker: Worker[None] = self.run_worker(
            work, group=group, exclusive=exclusive, exit_on_error=False
        )
        return worker

    def _to_main(self, message: Message) -> None:
        """Hand a worker's result to the main screen (unless the dashboard has closed)."""
        if self.screen_stack:
            self.screen_stack[0].post_message(message)

    def _need_box(self) -> BoxView | None:
        view = self.main.selected_view()
        if view is None:
            self.notify("select a box first", severity="warning")
        return view
