"""The dashboard App: holds the Service, runs its calls in workers, routes the results.

Every Service call runs in a worker that ends by posting a message (see
messages.py and operations.py); the App routes it to the main screen, or to
the screen watching an operation. Dialogs return requests and the App runs
them. Nothing here decides anything about boxes (the Service does) or draws
anything (the screens do). The App is put together by concern (see base.py);
this last part starts and ends it: signals, the keymap, the command palette,
notifications.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import Notify, SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from hbtui import boxtext
from hbtui.config import check_keymap
from hbtui.tui.actions import MAIN, default_keys, in_scope, scopes
from hbtui.tui.agents.controller import Agents
from hbtui.tui.boxes.screen import MainScreen
from hbtui.tui.failure import describe
from hbtui.tui.work.controller import WorkActions

TEXTUAL_DUPLICATES = ("Quit", "Keys")  # Textual's palette entries the dashboard has its own of
TERMINATING = (signal.SIGTERM, signal.SIGHUP)
QUITS = ("quit", "app.quit")  # the actions a key that quits runs


class HbtuiApp(WorkActions, Agents):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "hbtui"
    SUB_TITLE = "boxes"

    async def close_service(self) -> None:
        """Let go of the Service's connections, if it was ever built."""
        if self._service is not None:
            await self._service.close()

    def get_default_screen(self) -> Screen[Any]:
        return MainScreen(self.activities, self.clock, self.refresh_seconds)

    def on_mount(self) -> None:
        self._apply_keymap()
        loop = asyncio.get_running_loop()
        for signum in TERMINATING:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self._terminate, signum)
        self.app_suspend_signal.subscribe(self, self._on_suspend, immediate=True)
        self.app_resume_signal.subscribe(self, self._on_resume, immediate=True)

    def _apply_keymap(self) -> None:
        """`[keymap]` as checked by the config layer: what is wrong is said, and those
        actions keep their default keys."""
        check = check_keymap(self.config.keymap, default_keys(), scopes())
        self.keymap = check.keymap
        if check.keymap:
            self.set_keymap(check.keymap)
        if check.problems:
            self.notify(
                "\n".join(check.problems),
                title="config.toml: keymap entries not applied",
                severity="warning",
                timeout=20,
            )

    def _on_suspend(self, _app: App[Any]) -> None:
        self._paused = True

    def _on_resume(self, _app: App[Any]) -> None:
        self._paused = False
        self.refresh_listing()

    def _terminate(self, signum: int) -> None:
        """SIGTERM or SIGHUP: as `q` with operations running (cancel, wait for their
        rollback), then exit with 128 + the signal."""
        self._exit_status = 128 + signum
        self.call_later(self._shut_down)

    async def on_unmount(self) -> None:
        """Let go of the web forwards kept while the dashboard ran, and end the agents'
        status streams (their execs are reaped before the loop closes)."""
        loop = asyncio.get_running_loop()
        for signum in TERMINATING:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        kept, self._web = list(self._web.values()), {}
        for access in kept:
            await self._let_go(access)
        await self.stop_watching_agents()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A bug in a worker becomes a notification, never a crash."""
        worker = event.worker
        if event.state == WorkerState.ERROR and worker.error is not None:
            self.notify(
                describe(worker.error),
                severity="error",
                title=f"internal error in {worker.group}",
                timeout=10,
            )
        if self._quitting and not self._running_operations():
            self.exit(return_code=self._exit_status)

    # -- command palette -----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's own entries (theme, screenshot…) without its Quit and Keys, which the
        dashboard's Quit and Help replace; each of ours says its key."""
        for command in super().get_system_commands(screen):
            if command.title not in TEXTUAL_DUPLICATES:
                yield command
        if isinstance(screen, MainScreen):
            for action in in_scope(MAIN):
                if not action.title:
                    continue
                keys = self.keymap.get(action.id, action.keys).split(",")
                shown = self.get_key_display(Binding(keys[0].strip(), ""))
                yield SystemCommand(
                    action.title,
                    f"key {shown} · {action.help}",
                    partial(self.run_action, action.action, screen),
                )

    # -- notifications -----------------------------------------------------------------------

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every toast is plain text, whoever asks (Textual's `Widget.notify` asks for
        markup): what it says may quote a box (what an agent waits for, git's error, a file
        name in an archive), and as markup a `[@click=app.…]` in it would run an action when
        the toast is clicked, a `[/]` end the dashboard."""
        super().notify(
            boxtext.lines(message),
            title=boxtext.line(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def action_help_quit(self) -> None:
        """Ctrl+C: how to quit (Textual's own says it in markup, which `notify` shows plain)."""
        keys = [k for k, a in self.active_bindings.items() if a.binding.action in QUITS]
        if keys:
            self.notify(f"Press {keys[0]} to quit the app", title="Do you want to quit?")

    def _on_notify(self, event: Notify) -> None:
        """The same toast again, while the first still shows, replaces it with a count
        ("… (×2)") instead of stacking up."""
        new = event.notification
        same = (new.message, new.title, new.severity)
        shown = {n.identity: n for n in self._notifications if not n.has_expired}
        previous, count = self._repeats.get(same, ("", 0))
        if previous in shown:
            self._unnotify(shown[previous], refresh=False)
            new.message = f"{new.message} (×{count + 1})"
        self._repeats = {k: v for k, v in self._repeats.items() if v[0] in shown}
        self._repeats[same] = (new.identity, count + 1 if previous in shown else 1)
        super()._on_notify(event)
