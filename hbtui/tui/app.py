"""The dashboard App: it holds the Service, runs operations, and composes the features.

The App owns what only an App can: its screens, the Service (built when first needed),
the operations that change something (each one record, run in a worker, its events
routed to the box's log and whoever watches it), the keymap, signals, notifications and
the terminal. Each feature is an object it composes and names as an action namespace
(hbtui/tui/feature.py): `boxes` (the listing and the questions about boxes, new, branch,
start, stop, remove, cancel, details), `archives` (save, load, extract), `agents` (what
the boxes' agents do, answering them), `work` (diff, pull, a try's compare view, keep) and
`shell` (a box's web UI, a shell in it). A screen asks with a `...Wanted` message; the App
hands it to the feature that answers. Nothing here decides anything about boxes (the
Service does) or draws anything (the screens do). It is one class in one file past the
~500 lines a module is split at, on purpose: what is here only an App can own, and a
feature's behaviour lives in its package, not in a storey under this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import Notify, SeverityLevel
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from hbtui import boxtext
from hbtui.config import Config, check_keymap
from hbtui.core.foundation import BoxView
from hbtui.events import Phase, Reserved
from hbtui.tui import plain
from hbtui.tui.actions import FEATURES, MAIN, default_keys, in_scope, scopes
from hbtui.tui.activity import Activity, BoxKey
from hbtui.tui.agents.controller import Agents
from hbtui.tui.archives.controller import Archives
from hbtui.tui.boxes.controller import Boxes
from hbtui.tui.boxes.screen import MainScreen
from hbtui.tui.failure import Failure, describe
from hbtui.tui.feature import Job
from hbtui.tui.messages import (
    AgentPaneWanted,
    AgentsWanted,
    ListingWanted,
    PortsWanted,
    ProvisionLogWanted,
    StatsWanted,
    WorkloadLogWanted,
)
from hbtui.tui.operations import Call, Operation, OperationEvents, OperationFinished, Teller, Told
from hbtui.tui.requests import Request
from hbtui.tui.shell.controller import Shell
from hbtui.tui.system import launch_interactive, open_in_browser
from hbtui.tui.work.controller import Work

if TYPE_CHECKING:
    from hbtui.core.service import Service
    from hbtui.tui.boxes.new import NewBoxDialog
    from hbtui.tui.work.compare import TryScreen

Clock = Callable[[], datetime]
Launcher = Callable[[list[str]], Awaitable[int]]  # runs argv on this terminal, returns its status
Opener = Callable[[str], object]  # shows a URL in a browser; False (or OSError): no browser

OPERATIONS = "operations"  # the worker group of calls that change something
TEXTUAL_DUPLICATES = ("Quit", "Keys")  # Textual's palette entries the dashboard has its own of
TERMINATING = (signal.SIGTERM, signal.SIGHUP)
QUITS = ("quit", "app.quit")  # the actions a key that quits runs


class HbtuiApp(App[None]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "hbtui"
    SUB_TITLE = "boxes"

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
        self._paused = False  # the terminal is handed to a shell: nothing is asked meanwhile
        self._unlocking = False  # the secrets passphrase dialog is up
        self._after_unlock: list[Callable[[], object]] = []  # operations it will run again
        self._quitting = False
        self._exit_status = 0  # 128 + the signal that ended the dashboard, if one did
        # (message, title, severity) -> the toast showing it, and how many times it came
        self._repeats: dict[tuple[str, str, str], tuple[str, int]] = {}
        # The features, each an action namespace: a key bound to "boxes.start" runs
        # self.boxes.action_start (see the actions table).
        self.boxes = Boxes(self)
        self.archives = Archives(self)
        self.agents = Agents(self)
        self.work = Work(self)
        self.shell = Shell(self)
        self._action_targets |= set(FEATURES)  # Textual's namespaces: app, screen, focused
        self._told: dict[str, Teller] = {**Archives.TOLD, **Work.TOLD}

    # -- what the features stand on (hbtui/tui/feature.py's Dashboard) ----------------------

    @property
    def service(self) -> Service:
        if self._service is None:
            self._service = self._connect()
        return self._service

    async def close_service(self) -> None:
        """Let go of the Service's connections, if it was ever built."""
        if self._service is not None:
            await self._service.close()

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    @property
    def paused(self) -> bool:
        return self._paused

    def start(self, work: Job, group: str, *, exclusive: bool = False) -> Worker[None]:
        """Run `work` in a worker; an exception in it becomes a notification."""
        worker: Worker[None] = self.run_worker(
            work, group=group, exclusive=exclusive, exit_on_error=False
        )
        return worker

    async def hand_over(self, argv: list[str]) -> int:
        """Run `argv` on this terminal (a shell in a box), the dashboard suspended."""
        with self.batch_update(), self.suspend():
            return await self.launcher(argv)

    def to_terminal(self, sequence: str) -> None:
        """An escape sequence for the terminal itself (OSC 9), where there is one."""
        if not self.is_headless and self._driver is not None:
            self._driver.write(sequence)

    def _open_in_browser(self, url: str) -> object:
        """The browser on this machine, or, under `textual serve`, the user's."""
        if self.is_web:
            self.open_url(url)
            return True
        return open_in_browser(url)

    # -- start and end -------------------------------------------------------------------

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
        self.boxes.refresh_listing()

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
        await self.shell.close()
        await self.agents.close()

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

    # -- what the screens ask, handed to the feature that answers ----------------------------

    def on_listing_wanted(self, _message: ListingWanted) -> None:
        self.boxes.refresh_listing()

    def on_ports_wanted(self, message: PortsWanted) -> None:
        self.boxes.ask_ports(message.host)

    def on_workload_log_wanted(self, message: WorkloadLogWanted) -> None:
        self.boxes.ask_workload_log(message.key)

    def on_provision_log_wanted(self, message: ProvisionLogWanted) -> None:
        self.boxes.ask_provision_log(message.key)

    def on_stats_wanted(self, message: StatsWanted) -> None:
        self.boxes.ask_stats(message)

    def on_new_box_dialog_requested(self, message: NewBoxDialog.Requested) -> None:
        self.boxes.requested(message)

    def on_agents_wanted(self, _message: AgentsWanted) -> None:
        self.agents.wanted()

    def on_agent_pane_wanted(self, message: AgentPaneWanted) -> None:
        self.agents.pane_wanted(message.key, message.pane)

    def on_try_screen_wanted(self, message: TryScreen.Wanted) -> None:
        self.work.ask_try_rows(message.screen)

    def on_try_screen_keep(self, message: TryScreen.Keep) -> None:
        self.work.keep(message.screen, message.box)

    def on_try_screen_diff_of(self, message: TryScreen.DiffOf) -> None:
        self.work.open_diff((message.host, message.box))

    # -- operations: start one, route its events, end it -----------------------------------

    def owner(self, key: BoxKey) -> Operation | None:
        """The operation running on this box (a making one once it has reserved it)."""
        return next(
            (o for o in reversed(self.operations) if o.key == key and o.unmade is None), None
        )

    def run_request(self, request: Request) -> Operation | None:
        """Run what a dialog asked for (see run_operation); the box it also holds (a
        branch's source) says so in its row until it ends, and takes no other operation."""
        held = (
            self.activities.setdefault(request.holds, Activity(request.holds))
            if request.holds
            else None
        )
        if held is not None and held.running:
            self.notify(f"{held.key[1]} is busy with {held.operation}", severity="warning")
            return None
        operation = self.run_operation(
            request.key,
            request.operation,
            partial(request.call, self.service),
            makes=request.makes,
        )
        if operation is not None and held is not None and request.key is not None:
            held.hold(request.operation, request.key[1])
            operation.holds = held.key
            self.main.box_changed(held.key)
        return operation

    def run_operation(
        self, key: BoxKey | None, name: str, call: Call, *, makes: bool = False
    ) -> Operation | None:
        """Run one Service call that changes something; its events go to the box's log.

        Returns None (and says why) when the box is busy with another operation.
        A making operation (`makes`: new, load) keeps its log to itself until the
        core has reserved its box: a name already taken, or anything else refused
        before a box exists, never touches another box's row.
        """
        operation = Operation(name, key, self, makes=makes)
        if operation.unmade is None and key is not None:
            activity = self.activities.setdefault(key, Activity(key))
            if activity.running:
                self.notify(f"{key[1]} is busy with {activity.operation}", severity="warning")
                return None
            activity.begin(name)
            self.main.box_changed(key)
        self.operations.append(operation)
        operation.call = call
        operation.worker = self.run_worker(
            partial(self._operate, operation, call),
            group=OPERATIONS,
            exit_on_error=False,
            description=operation.label,
        )
        return operation

    async def _operate(self, operation: Operation, call: Call) -> None:
        result: object = None
        failure: Failure | None = None
        try:
            result = await call(operation.report)
        except asyncio.CancelledError as exc:
            failure = Failure.of(exc)
            raise
        except Exception as exc:  # every end is told, a bug's too: as the operation's failure
            failure = Failure.of(exc)
        finally:
            operation.flush()  # the last events go before the end
            self.post_message(OperationFinished(operation, result, failure))

    def _activity_of(self, operation: Operation) -> Activity | None:
        if operation.unmade is not None:
            return operation.unmade
        return self.activities.get(operation.key) if operation.key is not None else None

    def on_operation_events(self, message: OperationEvents) -> None:
        if not self.is_running:
            return  # the dashboard is closing: its screens are going, nothing is drawn
        operation, key = message.operation, message.operation.key
        unmade = operation.unmade
        if unmade is not None:
            activity: Activity | None = unmade
        else:
            activity = self.activities.setdefault(key, Activity(key)) if key is not None else None
        progress = operation.progress
        for event in message.events:
            if activity is not None:
                activity.apply(event)
            if progress is not None:
                progress.show(event)
        if unmade is not None:
            if not any(isinstance(e, Reserved) for e in message.events):
                return  # nothing made yet: no row to show it in
            self._made(operation, unmade)
        if key is not None:
            self.main.box_changed(key)  # one repaint for the whole burst
            if any(isinstance(e, Phase) for e in message.events):
                self.boxes.refresh_listing()  # a new stage: the box's row may have changed too

    def _made(self, operation: Operation, activity: Activity) -> None:
        """The core has reserved the box a making operation makes: it gets its row."""
        assert operation.key is not None
        operation.unmade = None
        self.activities[operation.key] = activity  # a failed attempt's row and log make way
        dialog, operation.dialog = operation.dialog, None
        if dialog is not None:
            dialog.close()
        self.main.follow(operation.key)

    def on_operation_finished(self, message: OperationFinished) -> None:
        if not self.is_running:
            return  # the dashboard is closing (see on_operation_events)
        operation, failure, key = message.operation, message.failure, message.operation.key
        if operation in self.operations:
            self.operations.remove(operation)
        self._release_held(operation, failure)
        if failure is not None and failure.wrong_passphrase and operation.ask_again is not None:
            # Only the passphrase was wrong (nothing was made): ask for it again, the rest
            # of the request kept, instead of a failure to close and a form to fill again.
            if operation.progress is not None:
                operation.progress.finished(None)  # closes it
            operation.ask_again(failure)
        elif operation.unmade is not None:
            if failure is not None:
                self._refused(operation, failure)
            self.boxes.refresh_listing()
        elif failure is not None and failure.locked:
            activity = self.activities.get(key) if key is not None else None
            if key is not None and activity is not None:
                activity.halt("waiting for the secrets passphrase")
                self.main.box_changed(key)
            self._ask_to_unlock(operation, again=operation.call)
        else:
            self._ended(operation, message.result, failure)

    def _refused(self, operation: Operation, failure: Failure) -> None:
        """A making operation ended before any box existed: say so where it was asked."""
        if operation.dialog is not None:
            operation.dialog.refused(failure)
        elif operation.progress is not None:
            operation.progress.finished(failure)
        else:
            self._tell_failure(operation, failure)
        if failure.locked:
            self._ask_to_unlock(operation, again=None)  # the dialog's Create tries again

    def _ended(self, operation: Operation, result: object, failure: Failure | None) -> None:
        """An operation on a box that exists ended: its row, its log, a notification."""
        key = operation.key
        activity = self.activities.get(key) if key is not None else None
        if activity is not None:
            if failure is not None and failure.hint and not failure.cancelled:
                activity.append(f"\x1b[2m{failure.hint}\x1b[0m")
            activity.finish(failure)
        if failure is not None:
            self._tell_failure(operation, failure)
        else:
            told = self._told.get(operation.name)
            done = told(operation, result) if told else Told(f"{operation.label}: done", "", 4)
            self.notify(done.message, title=done.title, timeout=done.timeout)
        if operation.progress is not None:
            operation.progress.finished(failure)
        if operation.then is not None and failure is None:
            operation.then()
        if key is not None:
            if operation.name == "remove" and failure is None:
                self.activities.pop(key, None)  # the box is gone, and its log with it
                self.main.box_reported(key, None)
            elif isinstance(result, BoxView):  # the box as the call left it
                self.main.box_reported(key, result)
            else:
                self.main.box_changed(key)
        self.boxes.refresh_listing()

    def _tell_failure(self, operation: Operation, failure: Failure) -> None:
        if failure.cancelled:  # a notice: the core has undone what the operation did
            self.notify(failure.text, title=f"{operation.label}: cancelled", timeout=6)
        elif failure.made:  # the box is made and stays: a warning, not a failed operation
            self.notify(
                failure.text, title=f"{operation.label}: made, {failure.after_making}",
                severity="warning", timeout=10,
            )  # fmt: skip
        else:
            self.notify(
                failure.text, title=f"{operation.label} failed", severity="error", timeout=10
            )

    def _release_held(self, operation: Operation, failure: Failure | None) -> None:
        """The box the operation held (a branch's source) is its own again."""
        held = self.activities.get(operation.holds) if operation.holds else None
        if held is None or not held.running:
            return
        how = "done" if failure is None else "rolled back" if failure.cancelled else "failed"
        held.let_go(f"{operation.label}: {how}")
        self.main.box_changed(held.key)

    def _ask_to_unlock(self, operation: Operation, again: Call | None) -> None:
        """The secrets file's passphrase, in a dialog (one at a time, for every operation
        that waits for it); each waiting operation runs again once the file is open."""
        from hbtui.tui.dialogs.secrets import SecretsPassphraseDialog

        if again is not None:
            self._after_unlock.append(
                partial(self.run_operation, operation.key, operation.name, again)
            )
        if self._unlocking:
            return
        self._unlocking = True
        self.push_screen(SecretsPassphraseDialog(self.service, operation.label), self._unlocked)

    def _unlocked(self, unlocked: bool | None) -> None:
        self._unlocking = False
        waiting, self._after_unlock = self._after_unlock, []
        for run_again in waiting if unlocked else ():
            run_again()

    # -- quitting ------------------------------------------------------------------------

    def _running_operations(self) -> list[Worker[Any]]:
        return [w for w in self.workers if w.group == OPERATIONS and not w.is_finished]

    async def action_quit(self) -> None:
        """Quit; with operations running, ask first: they are cancelled, and their
        rollback waited for."""
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        if self._quitting:
            return  # already winding up: the quit screen shows how far
        running = self._running_operations()
        if not running:
            self.exit(return_code=self._exit_status)
            return
        question = Text(
            f"{len(running)} operation(s) running: "
            + ", ".join(w.description for w in running)
            + ".\nQuitting cancels them and waits until each has rolled back "
            "(a box being made is removed, a box being saved is resumed)."
        )
        self.push_screen(
            ConfirmDialog("Quit?", question, yes="Cancel them and quit", no="Keep working"),
            lambda yes: self._shut_down() if yes else None,
        )

    def _shut_down(self) -> None:
        """Cancel every operation, show their rollback, exit once they have all ended."""
        from hbtui.tui.dialogs.confirm import QuitScreen

        if self._quitting:
            return
        self._quitting = True
        running = self._running_operations()
        if not running:
            self.exit(return_code=self._exit_status)
            return
        for worker in running:
            worker.cancel()
        self.push_screen(QuitScreen(partial(self._rollback_progress, running)))

    def _rollback_progress(self, workers: list[Worker[Any]]) -> list[Text]:
        """One line per cancelled operation: rolled back, or the last thing it reported."""
        lines = []
        for worker in workers:
            if worker.is_finished:
                lines.append(Text.assemble(("✓ ", "green"), worker.description, " rolled back"))
                continue
            operation = next((o for o in self.operations if o.worker is worker), None)
            activity = self._activity_of(operation) if operation is not None else None
            last = plain.row(activity.lines[-1]) if activity and activity.lines else Text()
            lines.append(Text.assemble(("⟳ ", "yellow"), worker.description, ": ", last))
        return lines

    # -- keys, the command palette, help -------------------------------------------------

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

    def action_help(self) -> None:
        from hbtui.tui.help import HelpScreen

        self.push_screen(HelpScreen(self.keymap))

    def action_help_quit(self) -> None:
        """Ctrl+C: how to quit (Textual's own says it in markup, which `notify` shows plain)."""
        keys = [k for k, a in self.active_bindings.items() if a.binding.action in QUITS]
        if keys:
            self.notify(f"Press {keys[0]} to quit the app", title="Do you want to quit?")

    # -- notifications -------------------------------------------------------------------

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
