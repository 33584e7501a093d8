"""The dashboard App: holds the Service, runs its calls in workers, routes the results.

Every Service call runs in a worker that ends by posting a message (see
messages.py); the App routes it to the main screen, or to the progress
screen of an archive operation. An operation (`run_operation`) is one call
that changes something: its progress events feed the box's `Activity` (its
log buffer), so several run at once and each keeps its own log. Dialogs
return requests and the App runs them. Nothing here decides anything about
boxes (the Service does) or draws anything (the screens do).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shlex
import signal
import sys
import time
import webbrowser
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import App, SuspendNotSupported, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.notifications import Notify
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from hbtui.config import Config, check_keymap
from hbtui.core.views import BoxStats, BoxView
from hbtui.environment import child_env
from hbtui.errors import Cancelled, HbtuiError
from hbtui.events import Event, Phase, Report
from hbtui.tui.activity import MAX_LINES, Activity, BoxKey
from hbtui.tui.messages import (
    ListingLoaded,
    ListingWanted,
    Operation,
    OperationEvents,
    OperationFinished,
    PortsLoaded,
    PortsWanted,
    ProvisionLogLoaded,
    ProvisionLogWanted,
    StatsLoaded,
    StatsWanted,
    WebReady,
    WorkloadLogLoaded,
    WorkloadLogWanted,
)
from hbtui.tui.screens.main import KEYS, MainScreen

TEXTUAL_DUPLICATES = ("Quit", "Keys")  # Textual's palette entries the dashboard has its own of
HISTORY = 60  # live figures kept per box: two minutes at the default refresh

if TYPE_CHECKING:
    from hbtui.core.hosts import WebAccess
    from hbtui.core.service import Service
    from hbtui.tui.screens.details import DetailsScreen
    from hbtui.tui.screens.dialogs import (
        BranchRequest,
        DeleteRequest,
        ExtractRequest,
        LoadRequest,
        NewBoxDialog,
        SaveRequest,
    )
    from hbtui.tui.screens.progress import ProgressScreen

Clock = Callable[[], datetime]
Launcher = Callable[[list[str]], Awaitable[int]]  # runs argv on this terminal, returns its status
Opener = Callable[[str], object]  # shows a URL in a browser; False (or raising): no browser
Call = Callable[[Report], Awaitable[object]]  # one Service call, given its Report

OPERATIONS = "operations"  # the worker group of calls that change something
STARTABLE = ("stopped", "created")  # states `o` offers to start a box from

# The core's first phase once it has reserved a new box's name and port
# (hbtui.core.boxes, Lifecycle.make; load makes its box the same way). Until
# then a making operation has made nothing, so it owns no row.
MADE_PHASES = ("creating machine ", "branching ")


def made_something(event: Event) -> bool:
    return isinstance(event, Phase) and event.message.startswith(MADE_PHASES)


async def launch_interactive(argv: list[str]) -> int:
    """Run `argv` on this terminal and wait for it, keeping the event loop alive.

    The loop keeps running so other operations (a box provisioning in the
    background) go on draining their pipes while the user is in a shell.
    Ctrl-C in the shell must reach the child only, so SIGINT is swallowed
    here for the duration; a Python-level handler, unlike SIG_IGN, is not
    inherited by the child.
    """
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, lambda: None)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        proc = await asyncio.create_subprocess_exec(*argv, env=child_env())
        return await proc.wait()
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, previous)


def open_in_browser(url: str) -> bool:
    """Hand `url` to a browser; False when there is none to hand it to.

    Without a display (an SSH session, a console) Python's webbrowser falls
    back to a text browser, which would take over the dashboard's terminal,
    so nothing is tried there.
    """
    graphical = sys.platform in ("darwin", "win32") or any(
        os.environ.get(var) for var in ("DISPLAY", "WAYLAND_DISPLAY")
    )
    if not graphical:
        return False
    try:
        return webbrowser.open(url)
    except Exception:  # webbrowser.Error, or a browser that cannot be started
        return False


def no_browser_reason() -> str:
    if sys.platform not in ("darwin", "win32") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return "no display: DISPLAY and WAYLAND_DISPLAY are unset"
    return "no browser answered"


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, HbtuiError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


TERMINATING = (signal.SIGTERM, signal.SIGHUP)


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
        self._paused = False  # the terminal is handed to a shell: no listing meanwhile
        self._listing = False  # a list_boxes() worker is running
        self._list_again = False  # ... and another listing was asked for meanwhile
        self._ports_worker: Worker[None] | None = None
        self._progress: dict[Operation, ProgressScreen] = {}
        self._web: dict[BoxKey, WebAccess] = {}  # forwards kept until the dashboard ends
        self._open_when_done: dict[Operation, BoxView] = {}  # starts `o` asked for
        self._by_box: dict[BoxKey, Operation] = {}  # the running operation of each box
        # Making operations the core has not reserved a box for yet: their log, kept
        # off every row, and the new-box dialog waiting to hear how they went.
        self._unmade: dict[Operation, Activity] = {}
        self._waiting: dict[Operation, NewBoxDialog] = {}
        self._quitting = False
        self._exit_status = 0  # 128 + the signal that ended the dashboard, if one did
        self.usage_history: dict[BoxKey, deque[BoxStats]] = {}  # live figures, newest last
        self._stats_worker: Worker[None] | None = None
        # (message, title, severity) -> the toast showing it, and how many times it came
        self._repeats: dict[tuple[str, str, str], tuple[str, int]] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def service(self) -> Service:
        if self._service is None:
            self._service = self._connect()
        return self._service

    async def close_service(self) -> None:
        """Let go of the Service's connections, if it was ever built."""
        if self._service is not None:
            await self._service.close()

    def get_default_screen(self) -> Screen[Any]:
        return MainScreen(self.activities, self.clock, self.refresh_seconds)

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

    def on_mount(self) -> None:
        self._apply_keymap()
        loop = asyncio.get_running_loop()
        for signum in TERMINATING:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self._terminate, signum)
        self.app_suspend_signal.subscribe(self, self._on_suspend, immediate=True)
        self.app_resume_signal.subscribe(self, self._on_resume, immediate=True)

    def _open_in_browser(self, url: str) -> object:
        """The browser on this machine, or, under `textual serve`, the user's."""
        if self.is_web:
            self.open_url(url)
            return True
        return open_in_browser(url)

    def _apply_keymap(self) -> None:
        """`[keymap]` as checked by the config layer: what is wrong is said, and those
        actions keep their default keys."""
        check = check_keymap(self.config.keymap, {ident: key for ident, key, *_ in KEYS})
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
        """Let go of the web forwards kept while the dashboard ran."""
        loop = asyncio.get_running_loop()
        for signum in TERMINATING:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(signum)
        kept, self._web = list(self._web.values()), {}
        for access in kept:
            await self._let_go(access)

    async def _let_go(self, access: WebAccess) -> None:
        try:
            await access.close()
        except Exception:  # a forward over a dead connection is already gone
            pass

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A bug in a worker becomes a notification, never a crash."""
        worker = event.worker
        if event.state == WorkerState.ERROR and worker.error is not None:
            self.notify(
                describe_error(worker.error),
                severity="error",
                title=f"internal error in {worker.group}",
                timeout=10,
            )
        if self._quitting and not self._running_operations():
            self.exit(return_code=self._exit_status)

    def _running_operations(self) -> list[Worker[Any]]:
        return [w for w in self.workers if w.group == OPERATIONS and not w.is_finished]

    async def action_quit(self) -> None:
        """Quit; with operations running, ask first: they are cancelled, and their
        rollback waited for."""
        from hbtui.tui.screens.confirm import ConfirmDialog

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
        from hbtui.tui.screens.confirm import QuitScreen

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
            operation = next((o for o in self._operations() if o.worker is worker), None)
            activity = self._activity_of(operation) if operation is not None else None
            last = Text.from_ansi(activity.lines[-1]) if activity and activity.lines else Text()
            lines.append(Text.assemble(("⟳ ", "yellow"), worker.description, ": ", last))
        return lines

    def _operations(self) -> list[Operation]:
        return [*self._by_box.values(), *self._unmade, *self._progress]

    def _activity_of(self, operation: Operation) -> Activity | None:
        if operation in self._unmade:
            return self._unmade[operation]
        return self.activities.get(operation.key) if operation.key is not None else None

    # -- read-only questions from the main screen ---------------------------------------------

    def on_listing_wanted(self, _message: ListingWanted) -> None:
        self.refresh_listing()

    def refresh_listing(self) -> None:
        """Start one `list_boxes()` unless one is running (then list again after it)."""
        if self._paused:
            return
        if self._listing:
            self._list_again = True
            return
        self._listing = True
        self._start(self._list_boxes, "refresh")

    async def _list_boxes(self) -> None:
        try:
            while True:
                self._list_again = False
                asked_at = time.monotonic()
                try:
                    listing = await self.service.list_boxes()
                    message = ListingLoaded(listing, asked_at, bases=len(self.service.bases()))
                except Exception as exc:  # the dashboard must outlive a broken engine
                    message = ListingLoaded(None, asked_at, describe_error(exc))
                self._to_main(message)
                if not self._list_again:
                    return
        finally:
            self._listing = False

    def on_ports_wanted(self, message: PortsWanted) -> None:
        if self._ports_worker is None or self._ports_worker.is_finished:
            self._ports_worker = self._start(partial(self._ports, message.host), "ports")

    async def _ports(self, host: str) -> None:
        try:
            self._to_main(PortsLoaded(host, await self.service.ports(host)))
        except Exception as exc:
            self._to_main(PortsLoaded(host, [], describe_error(exc)))

    def on_workload_log_wanted(self, message: WorkloadLogWanted) -> None:
        self._start(partial(self._workload_log, message.key), "workload", exclusive=True)

    async def _workload_log(self, key: BoxKey) -> None:
        try:
            text = await self.service.workload_logs(key[1], key[0], tail=MAX_LINES)
        except Exception as exc:
            text = f"\x1b[31m{describe_error(exc)}\x1b[0m"
        self._to_main(WorkloadLogLoaded(key, text))

    def on_provision_log_wanted(self, message: ProvisionLogWanted) -> None:
        self._start(partial(self._provision_log, message.key), "provision-log")

    async def _provision_log(self, key: BoxKey) -> None:
        try:
            log = await self.service.provision_log(key[1], key[0], tail=MAX_LINES)
        except (HbtuiError, OSError):
            return  # a box without a readable log just shows none
        if log is not None:
            self._to_main(ProvisionLogLoaded(key, log.path, log.events))

    # -- operations --------------------------------------------------------------------------

    def run_operation(
        self, key: BoxKey | None, name: str, call: Call, *, makes: bool = False
    ) -> Operation | None:
        """Run one Service call that changes something; its events go to the box's log.

        Returns None (and says why) when the box is busy with another operation.
        A making operation (`makes`: new, load) keeps its log to itself until the
        core has reserved its box: a name already taken, or anything else refused
        before a box exists, never touches another box's row.
        """
        operation = Operation(name, key, self)
        if makes and key is not None:
            self._unmade[operation] = Activity(key)
            self._unmade[operation].begin(name)
        elif key is not None:
            activity = self.activities.setdefault(key, Activity(key))
            if activity.running:
                self.notify(f"{key[1]} is busy with {activity.operation}", severity="warning")
                return None
            activity.begin(name)
            self._by_box[key] = operation
            self.main.box_changed(key)
        operation.worker = self.run_worker(
            partial(self._operate, operation, call),
            group=OPERATIONS,
            exit_on_error=False,
            description=operation.label,
        )
        return operation

    async def _operate(self, operation: Operation, call: Call) -> None:
        result: object = None
        error = hint = ""
        cancelled = False
        try:
            result = await call(operation.report)
        except asyncio.CancelledError:
            error, cancelled = "cancelled; whatever it made was rolled back", True
            raise
        except Cancelled as exc:  # the core rolled back and says what it undid
            error, cancelled = exc.message, True
        except Exception as exc:
            error = describe_error(exc)
            hint = (exc.hint or "") if isinstance(exc, HbtuiError) else ""
        finally:
            operation.flush()  # the last events go before the end
            self.post_message(OperationFinished(operation, result, error, hint, cancelled))

    def on_operation_events(self, message: OperationEvents) -> None:
        if not self.is_running:
            return  # the dashboard is closing: its screens are going, nothing is drawn
        operation, key = message.operation, message.operation.key
        unmade = self._unmade.get(operation)
        if unmade is not None:
            activity: Activity | None = unmade
        else:
            activity = self.activities.setdefault(key, Activity(key)) if key is not None else None
        progress = self._progress.get(operation)
        for event in message.events:
            if activity is not None:
                activity.apply(event)
            if progress is not None:
                progress.show(event)
        if unmade is not None:
            if not any(made_something(e) for e in message.events):
                return  # nothing made yet: no row to show it in
            self._made(operation, unmade)
        if key is not None:
            self.main.box_changed(key)  # one repaint for the whole burst
            if any(isinstance(e, Phase) for e in message.events):
                self.refresh_listing()  # a new stage: the box's row may have changed too

    def _made(self, operation: Operation, activity: Activity) -> None:
        """The core has reserved the box a making operation makes: it gets its row."""
        assert operation.key is not None
        del self._unmade[operation]
        self.activities[operation.key] = activity  # a failed attempt's row and log make way
        self._by_box[operation.key] = operation
        dialog = self._waiting.pop(operation, None)
        if dialog is not None:
            dialog.close()
        self.main.follow(operation.key)

    def _refused(self, message: OperationFinished) -> None:
        """A making operation ended before any box existed: say so where it was asked."""
        operation, error = message.operation, message.error
        dialog = self._waiting.pop(operation, None)
        progress = self._progress.pop(operation, None)
        if dialog is not None:
            dialog.refused(error, cancelled=message.cancelled)
        elif progress is not None:
            progress.finished(error, cancelled=message.cancelled)
        elif message.cancelled:
            self.notify(error, title=f"{operation.label}: cancelled", timeout=6)
        else:
            self.notify(error, title=f"{operation.label} failed", severity="error", timeout=10)

    def on_operation_finished(self, message: OperationFinished) -> None:
        if not self.is_running:
            return  # the dashboard is closing (see on_operation_events)
        operation, error, key = message.operation, message.error, message.operation.key
        if key is not None and self._by_box.get(key) is operation:
            del self._by_box[key]
        if self._unmade.pop(operation, None) is not None:
            self._refused(message)
            self.refresh_listing()
            return
        activity = self.activities.get(key) if key is not None else None
        if activity is not None:
            if message.hint:
                activity.append(f"\x1b[2m{message.hint}\x1b[0m")
            activity.finish(error, cancelled=message.cancelled)
        if message.cancelled:  # a notice: the core has undone what the operation did
            self.notify(error, title=f"{operation.label}: cancelled", timeout=6)
        elif error:
            self.notify(error, title=f"{operation.label} failed", severity="error", timeout=10)
        elif operation.name == "save":
            self.notify(f"saved to {message.result}", title=f"{operation.label}: done", timeout=10)
        elif operation.name == "extract":
            self.notify(f"extracted into {message.result}", title="extract: done", timeout=10)
        else:
            self.notify(f"{operation.label}: done", timeout=4)
        progress = self._progress.pop(operation, None)
        if progress is not None:
            progress.finished(error, cancelled=message.cancelled)
        opening = self._open_when_done.pop(operation, None)
        if opening is not None and not error:
            self._open_web(opening)
        if key is not None:
            if operation.name == "delete" and not error:
                self.activities.pop(key, None)  # the box is gone, and its log with it
                self.main.box_reported(key, None)
            elif isinstance(message.result, BoxView):  # the box as the call left it
                self.main.box_reported(key, message.result)
            else:
                self.main.box_changed(key)
        self.refresh_listing()

    def _need_box(self) -> BoxView | None:
        view = self.main.selected_view()
        if view is None:
            self.notify("select a box first", severity="warning")
        return view

    def _refuse_busy(self, view: BoxView) -> bool:
        """Say so (before any dialog is filled) when the box is busy with an operation,
        here or in another hbtui process (the core's per-box lock)."""
        activity = self.activities.get((view.host, view.name))
        if activity is not None and activity.running:
            busy = activity.operation
        elif view.busy and not view.busy.startswith("quiesced"):
            busy = view.busy
        else:
            return False
        self.notify(
            f"{view.name} is busy with {busy}; try again when it is done", severity="warning"
        )
        return True

    def _taken(self) -> set[BoxKey]:
        """(host, name) of every box listed or being made: names a new box cannot have."""
        listing = self.main.listing
        taken = {(b.host, b.name) for b in listing.boxes} if listing is not None else set()
        return taken | {key for key, a in self.activities.items() if a.running}

    # Dialogs and the progress screen are imported when first used: the first
    # frame does not need them.

    def action_new_box(self, port: int | None = None) -> None:
        """The new-box dialog (with `port` picked, from the port allocator)."""
        from hbtui.tui.screens.dialogs import NewBoxDialog

        self.push_screen(NewBoxDialog(self.service, self._taken(), port=port))

    def action_branch_box(self) -> None:
        from hbtui.tui.screens.dialogs import BranchDialog

        view = self._need_box()
        if view is None or self._refuse_busy(view):
            return
        self.push_screen(BranchDialog(self.service, view, self._taken()), self._branch)

    def _branch(self, request: BranchRequest | None) -> None:
        if request is None:
            return
        self.run_operation(
            (request.host, request.name),
            "branch",
            lambda report: self.service.branch(
                request.source, request.name, request.host, port=request.port, report=report
            ),
            makes=True,
        )

    def on_new_box_dialog_requested(self, message: NewBoxDialog.Requested) -> None:
        """Create was pressed: the dialog stays (locked) until the box exists or was refused."""
        request = message.request
        operation = self.run_operation(
            (request.host, request.name),
            "new",
            lambda report: self.service.new(
                request.name,
                host=request.host,
                image=request.image or None,
                cpus=request.cpus,
                memory_mib=request.memory_mib,
                port=request.port,
                recipe=request.recipe,
                use_base=request.use_base,
                branchable=request.branchable,
                credentials=list(request.credentials),
                egress=request.egress or None,
                allow=list(request.allow) if request.egress == "allow-list" else None,
                report=report,
            ),
            makes=True,
        )
        if operation is not None:
            self._waiting[operation] = message.dialog
            message.dialog.cancel_request = operation.cancel

    def action_cancel_operation(self) -> None:
        """Cancel the selected box's running operation, once confirmed; the core rolls back."""
        from hbtui.tui.screens.confirm import ConfirmDialog

        view = self._need_box()
        if view is None:
            return
        operation = self._by_box.get((view.host, view.name))
        if operation is None:
            self.notify(f"nothing is running on {view.name}", severity="warning")
            return
        question = Text.assemble(
            "Cancel ",
            (operation.label, "bold"),
            "? The core rolls back what it has done so far "
            "(a box being made is removed, a box being saved is resumed).",
        )
        self.push_screen(
            ConfirmDialog("Cancel operation", question, yes="Cancel it", no="Keep going"),
            partial(self._cancel_confirmed, operation),
        )

    def _cancel_confirmed(self, operation: Operation, yes: bool | None) -> None:
        if yes and operation.worker is not None and not operation.worker.is_finished:
            operation.cancel()
            self.notify(f"{operation.label}: cancelling, rolling back…", timeout=4)

    def _chosen(self) -> list[BoxView]:
        """The marked boxes (a bulk action), else the selected one."""
        views = self.main.chosen_views()
        if not views:
            self.notify("select a box first", severity="warning")
        return views

    def action_start_box(self) -> None:
        for view in self._chosen():
            self.run_operation(
                (view.host, view.name),
                "start",
                partial(self._start_one, view),
            )
        self.main.clear_marks()

    def _start_one(self, view: BoxView, report: Report) -> Awaitable[object]:
        return self.service.start(view.name, view.host, report=report)

    def action_stop_box(self) -> None:
        for view in self._chosen():
            self.run_operation((view.host, view.name), "stop", partial(self._stop_one, view))
        self.main.clear_marks()

    def _stop_one(self, view: BoxView, report: Report) -> Awaitable[object]:
        return self.service.stop(view.name, view.host, report=report)

    def action_delete_box(self) -> None:
        from hbtui.tui.screens.dialogs import DeleteDialog

        view = self._need_box()
        if view is None:
            return
        key = (view.host, view.name)
        if not self.main.listed(key):
            # A row for a creation that failed: nothing exists, just forget it.
            activity = self.activities.get(key)
            if activity is not None and activity.running:
                self.notify(f"{view.name} is busy with {activity.operation}", severity="warning")
            else:
                self.activities.pop(key, None)
                self.main.redraw()
            return
        if not self._refuse_busy(view):
            self.push_screen(DeleteDialog(view), self._delete)

    def _delete(self, request: DeleteRequest | None) -> None:
        if request is not None:
            self.run_operation(
                (request.host, request.name),
                "delete",
                lambda report: self.service.remove(request.name, request.host, report=report),
            )

    def action_save_box(self) -> None:
        from hbtui.tui.screens.dialogs import SaveDialog

        views = self._chosen()
        if any(self._refuse_busy(view) for view in views):
            return
        if len(views) == 1:
            self.push_screen(SaveDialog(views[0]), self._save)
        elif views:
            from hbtui.tui.screens.bulk import BulkSaveDialog

            self.push_screen(BulkSaveDialog(views), partial(self._save_all, views))

    def _save_all(self, views: list[BoxView], request: SaveRequest | None) -> None:
        """One passphrase for every marked box; each saves to the backups folder, and its
        progress shows in its row and log (one progress window per box would pile up)."""
        if request is None:
            return
        self.main.clear_marks()
        for view in views:
            self.run_operation(
                (view.host, view.name),
                "save",
                partial(self._save_one, replace(request, name=view.name, host=view.host)),
            )

    def _save_one(self, request: SaveRequest, report: Report) -> Awaitable[object]:
        return self.service.save(
            request.name,
            request.host,
            output=request.output,
            passphrase=request.passphrase,
            verify=request.verify,
            report=report,
        )

    def _save(self, request: SaveRequest | None) -> None:
        if request is None:
            return
        operation = self.run_operation(
            (request.host, request.name),
            "save",
            lambda report: self.service.save(
                request.name,
                request.host,
                output=request.output,
                passphrase=request.passphrase,
                verify=request.verify,
                report=report,
            ),
        )
        self._show_progress(operation, f"Saving {request.name}")

    def action_load_box(self) -> None:
        from hbtui.tui.screens.dialogs import LoadDialog

        self.push_screen(LoadDialog(self.service, self._taken()), self._load)

    def _remember(self, archive: Path) -> None:
        """The archive picked, offered first by the next Load or Extract (in any run)."""
        try:
            self.service.remember_archive(archive)
        except HbtuiError as exc:
            self.notify(exc.message, title="cannot remember the archive", severity="warning")

    def _load(self, request: LoadRequest | None) -> None:
        if request is None:
            return
        self._remember(request.archive)
        operation = self.run_operation(
            (request.host, request.name),
            "load",
            lambda report: self.service.load(
                request.archive,
                request.name,
                request.host,
                passphrase=request.passphrase,
                report=report,
            ),
            makes=True,
        )
        self._show_progress(operation, f"Loading {request.archive.name} into {request.name}")

    def action_extract_archive(self) -> None:
        from hbtui.tui.screens.dialogs import ExtractDialog

        self.push_screen(ExtractDialog(self.service), self._extract)

    def _extract(self, request: ExtractRequest | None) -> None:
        if request is None:
            return
        self._remember(request.archive)
        operation = self.run_operation(
            None,
            "extract",
            lambda report: self.service.extract(
                request.archive, request.dest, passphrase=request.passphrase, report=report
            ),
        )
        self._show_progress(operation, f"Extracting {request.archive.name}")

    def _show_progress(self, operation: Operation | None, title: str) -> None:
        from hbtui.tui.screens.progress import ProgressScreen

        if operation is not None:
            screen = self._progress[operation] = ProgressScreen(operation, title)
            self.push_screen(screen)

    def action_help(self) -> None:
        from hbtui.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.keymap))

    # -- the web UI and the shell --------------------------------------------------------------

    def action_open_web(self) -> None:
        view = self._need_box()
        if view is None:
            return
        if view.port is None:
            self.notify(f"{view.name} has no forwarded port", severity="warning")
            return
        if view.state in STARTABLE:
            self._offer_start(view)
        elif view.state != "running":
            self.notify(f"{view.name} is {view.state}: its web UI is not up", severity="warning")
        else:
            self._open_web(view)

    def _open_web(self, view: BoxView) -> None:
        key = (view.host, view.name)
        if key in self._web:
            self._open(view.name, self._web[key].url)
        else:
            self._start(partial(self._web_access, key), "web")

    def _offer_start(self, view: BoxView) -> None:
        from hbtui.tui.screens.confirm import ConfirmDialog

        question = Text.assemble(
            (view.name, "bold"), f" is {view.state}. Start it, then open its web UI?"
        )
        self.push_screen(
            ConfirmDialog("Open web UI", question, yes="Start and open", no="Not now"),
            partial(self._start_then_open, view),
        )

    def _start_then_open(self, view: BoxView, yes: bool | None) -> None:
        if not yes:
            return
        operation = self.run_operation(
            (view.host, view.name),
            "start",
            lambda report: self.service.start(view.name, view.host, report=report),
        )
        if operation is not None:
            self._open_when_done[operation] = view

    async def _web_access(self, key: BoxKey) -> None:
        try:
            access = await self.service.web(key[1], key[0])
        except Exception as exc:
            self.notify(describe_error(exc), title=f"web UI of {key[1]}", severity="error")
            return
        self.post_message(WebReady(key, access))

    def on_web_ready(self, message: WebReady) -> None:
        access = message.access
        if access.forwarded:  # kept while the dashboard runs
            kept = self._web.setdefault(message.key, access)
            if kept is not access:  # two presses raced: one forward is enough
                self._start(partial(self._let_go, access), "web")
            access = kept
        self._open(message.key[1], access.url)

    def _open(self, name: str, url: str) -> None:
        self._start(partial(self._browse, name, url), "web")

    async def _browse(self, name: str, url: str) -> None:
        """The browser is started off the event loop; with none, the URL is offered."""
        from hbtui.tui.screens.dialogs import UrlDialog

        try:
            opened = await asyncio.to_thread(self.opener, url)
        except Exception:
            opened = False
        if opened is False:
            self.push_screen(UrlDialog(name, url, no_browser_reason()))
        else:
            self.notify(url, title=f"opening {name}")

    def action_enter_box(self) -> None:
        if view := self._need_box():
            self._start(partial(self._enter, view), "enter", exclusive=True)

    async def _enter(self, view: BoxView) -> None:
        # Starting a stopped box reports progress: it goes to the box's log.
        progress = Operation("enter", (view.host, view.name), self)
        try:
            argv = await self.service.enter_argv(view.name, view.host, report=progress.report)
        except Exception as exc:
            self.notify(describe_error(exc), title=f"cannot enter {view.name}", severity="error")
            return
        try:
            with self.batch_update(), self.suspend():
                status = await self.launcher(argv)
        except SuspendNotSupported:
            self.notify(
                f"this terminal cannot be handed over; run:\n{shlex.join(argv)}",
                title=f"enter {view.name}",
                severity="warning",
                timeout=30,
            )
            return
        except Exception as exc:
            self.notify(describe_error(exc), title=f"enter {view.name} failed", severity="error")
            return
        if status not in (0, 130):
            self.notify(f"the shell in {view.name} exited with status {status}", severity="warning")
        self.post_message(ListingWanted())

    # -- command palette -----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Textual's own entries (theme, screenshot…) without its Quit and Keys, which the
        dashboard's Quit and Help replace; each of ours says its key."""
        for command in super().get_system_commands(screen):
            if command.title not in TEXTUAL_DUPLICATES:
                yield command
        if isinstance(screen, MainScreen):
            for ident, key, action, _label, title, help_text in KEYS:
                keys = self.keymap.get(ident, key).split(",")
                shown = self.get_key_display(Binding(keys[0].strip(), ""))
                yield SystemCommand(
                    title, f"key {shown} · {help_text}", partial(self.run_action, action, screen)
                )

    # -- details and live figures --------------------------------------------------------------

    def action_show_details(self) -> None:
        from hbtui.tui.screens.details import DetailsScreen

        if view := self._need_box():
            key = (view.host, view.name)
            screen = DetailsScreen(key, self.usage_history)
            self.push_screen(screen)
            self._start(partial(self._details, screen), "details", exclusive=True)

    async def _details(self, screen: DetailsScreen) -> None:
        host, name = screen.key
        try:
            details = await self.service.details(name, host)
        except Exception as exc:
            screen.show(None, describe_error(exc))
            return
        screen.show(details)

    def on_stats_wanted(self, message: StatsWanted) -> None:
        """Live figures for the running boxes, unless the last ask is still out."""
        if self._stats_worker is None or self._stats_worker.is_finished:
            self._stats_worker = self._start(partial(self._stats, message.keys), "stats")

    async def _stats(self, keys: list[BoxKey]) -> None:
        by_host: dict[str, list[str]] = {}
        for host, name in keys:
            by_host.setdefault(host, []).append(name)
        usage: dict[BoxKey, BoxStats] = {}
        for host, names in by_host.items():
            try:
                found = await self.service.stats(names, host)
            except Exception:  # no figures is not worth a notification every refresh
                continue
            for name, figures in found.items():
                usage[(host, name)] = figures
                history = self.usage_history.setdefault((host, name), deque(maxlen=HISTORY))
                history.append(figures)
        self._to_main(StatsLoaded(usage))

    # -- notifications -----------------------------------------------------------------------

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


def run_dashboard() -> int:
    """`hbtui` with no verb: the Service the CLI would use, and the App over it.

    The recipe for boxes made here comes from the config or `HBTUI_RECIPE`,
    resolved by the core as for `hbtui new`.
    """
    from hbtui.config import load_config
    from hbtui.paths import resolve_paths
    from hbtui.tui.terminal import dashboard_driver

    paths = resolve_paths()
    config = load_config(paths)  # a broken config is one line before the screen changes
    paths.ensure()

    def connect() -> Service:
        # The first frame is up (the first listing asks for the Service): what
        # start-up made lives on, so collections from now on skip it (the CLI
        # turned collection off for the start-up).
        gc.freeze()
        gc.enable()
        from hbtui.wiring import build_service

        return build_service(paths, config)

    app = HbtuiApp(connect, config=config, driver_class=dashboard_driver())

    async def run() -> None:
        try:
            await app.run_async()
        finally:
            await app.close_service()

    asyncio.run(run())
    return app.return_code or 0
