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
import os
import shlex
import signal
import sys
import time
import webbrowser
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import App, SuspendNotSupported, SystemCommand
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input
from textual.worker import Worker, WorkerState

from hbtui.config import check_keymap
from hbtui.core.views import BoxView
from hbtui.environment import child_env
from hbtui.errors import HbtuiError
from hbtui.events import Phase, Report
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
    WebReady,
    WorkloadLogLoaded,
    WorkloadLogWanted,
)
from hbtui.tui.screens.main import KEYS, MainScreen

if TYPE_CHECKING:
    from hbtui.core.hosts import WebAccess
    from hbtui.core.service import Service
    from hbtui.tui.screens.dialogs import (
        DeleteRequest,
        ExtractRequest,
        LoadRequest,
        NewBoxRequest,
        SaveRequest,
    )
    from hbtui.tui.screens.progress import ProgressScreen

Clock = Callable[[], datetime]
Launcher = Callable[[list[str]], Awaitable[int]]  # runs argv on this terminal, returns its status
Opener = Callable[[str], object]  # shows a URL in a browser; False (or raising): no browser
Call = Callable[[Report], Awaitable[object]]  # one Service call, given its Report

OPERATIONS = "operations"  # the worker group of calls that change something
STARTABLE = ("stopped", "created")  # states `o` offers to start a box from


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
        service: Service,
        *,
        clock: Clock | None = None,
        launcher: Launcher | None = None,
        opener: Opener | None = None,
        refresh_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.service = service
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.launcher: Launcher = launcher or launch_interactive
        self.opener: Opener = opener or self._open_in_browser
        self.keymap: dict[str, str] = {}  # the [keymap] entries applied (checked at mount)
        self.refresh_seconds = refresh_seconds or service.config.refresh_seconds
        self.activities: dict[BoxKey, Activity] = {}
        self._paused = False  # the terminal is handed to a shell: no listing meanwhile
        self._listing = False  # a list_boxes() worker is running
        self._list_again = False  # ... and another listing was asked for meanwhile
        self._ports_worker: Worker[None] | None = None
        self._progress: dict[Operation, ProgressScreen] = {}
        self._web: dict[BoxKey, WebAccess] = {}  # forwards kept until the dashboard ends
        self._open_when_done: dict[Operation, BoxView] = {}  # starts `o` asked for
        self._quitting = False
        self._exit_status = 0  # 128 + the signal that ended the dashboard, if one did

    # -- lifecycle ---------------------------------------------------------------------------

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
        check = check_keymap(self.service.config.keymap, {ident: key for ident, key, *_ in KEYS})
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
        self.call_later(self.action_quit)

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
        """Quit; running operations are cancelled first, and their rollback waited for."""
        running = self._running_operations()
        if not running:
            self.exit(return_code=self._exit_status)
            return
        if not self._quitting:
            self._quitting = True
            for worker in running:
                worker.cancel()
        self.notify(
            f"cancelled {len(running)} running operation(s); "
            "quitting as soon as they have rolled back",
            title="quitting",
            severity="warning",
            timeout=60,
        )

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
                    message = ListingLoaded(await self.service.list_boxes(), asked_at)
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

    def run_operation(self, key: BoxKey | None, name: str, call: Call) -> Operation | None:
        """Run one Service call that changes something; its events go to the box's log.

        Returns None (and says why) when the box is busy with another operation.
        """
        if key is not None:
            activity = self.activities.setdefault(key, Activity(key))
            if activity.running:
                self.notify(f"{key[1]} is busy with {activity.operation}", severity="warning")
                return None
            activity.begin(name)
            self.main.box_changed(key)
        operation = Operation(name, key, self)
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
        try:
            result = await call(operation.report)
        except asyncio.CancelledError:
            error = "cancelled; whatever it made was rolled back"
            raise
        except Exception as exc:
            error = describe_error(exc)
            hint = (exc.hint or "") if isinstance(exc, HbtuiError) else ""
        finally:
            operation.flush()  # the last events go before the end
            self.post_message(OperationFinished(operation, result, error, hint))

    def on_operation_events(self, message: OperationEvents) -> None:
        operation, key = message.operation, message.operation.key
        activity = self.activities.setdefault(key, Activity(key)) if key is not None else None
        progress = self._progress.get(operation)
        for event in message.events:
            if activity is not None:
                activity.apply(event)
            if progress is not None:
                progress.show(event)
        if key is not None:
            self.main.box_changed(key)  # one repaint for the whole burst
            if any(isinstance(e, Phase) for e in message.events):
                self.refresh_listing()  # a new stage: the box's row may have changed too

    def on_operation_finished(self, message: OperationFinished) -> None:
        operation, error, key = message.operation, message.error, message.operation.key
        activity = self.activities.get(key) if key is not None else None
        if activity is not None:
            if message.hint:
                activity.append(f"\x1b[2m{message.hint}\x1b[0m")
            activity.finish(error)
        if error:
            self.notify(error, title=f"{operation.label} failed", severity="error", timeout=10)
        elif operation.name == "save":
            self.notify(f"saved to {message.result}", title=f"{operation.label}: done", timeout=10)
        elif operation.name == "extract":
            self.notify(f"extracted into {message.result}", title="extract: done", timeout=10)
        else:
            self.notify(f"{operation.label}: done", timeout=4)
        progress = self._progress.pop(operation, None)
        if progress is not None:
            progress.finished(error)
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

    def action_new_box(self) -> None:
        from hbtui.tui.screens.dialogs import NewBoxDialog

        self.push_screen(NewBoxDialog(self.service, self._taken()), self._new_box)

    def _new_box(self, request: NewBoxRequest | None) -> None:
        if request is None:
            return
        key = (request.host, request.name)
        previous = self.activities.get(key)
        if previous is not None and not previous.running:
            del self.activities[key]  # a failed attempt's row and log make way
        made = self.run_operation(
            key,
            "new",
            lambda report: self.service.new(
                request.name,
                host=request.host,
                image=request.image or None,
                cpus=request.cpus,
                memory_mib=request.memory_mib,
                port=request.port,
                recipe=request.recipe,
                report=report,
            ),
        )
        if made is not None:
            self.main.follow(key)

    def action_start_box(self) -> None:
        if view := self._need_box():
            self.run_operation(
                (view.host, view.name),
                "start",
                lambda report: self.service.start(view.name, view.host, report=report),
            )

    def action_stop_box(self) -> None:
        if view := self._need_box():
            self.run_operation(
                (view.host, view.name),
                "stop",
                lambda report: self.service.stop(view.name, view.host, report=report),
            )

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

        view = self._need_box()
        if view is not None and not self._refuse_busy(view):
            self.push_screen(SaveDialog(view), self._save)

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
        key = (request.host, request.name)
        operation = self.run_operation(
            key,
            "load",
            lambda report: self.service.load(
                request.archive,
                request.name,
                request.host,
                passphrase=request.passphrase,
                report=report,
            ),
        )
        if operation is not None:
            self.main.follow(key)
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

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Enter is a priority binding (the table would take it); text boxes keep it.
        if action == "enter_box" and (
            isinstance(self.focused, Input) or not isinstance(self.screen, MainScreen)
        ):
            return False
        return True

    # -- command palette -----------------------------------------------------------------------

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, MainScreen):
            for _ident, _key, action, _label, title, help_text in KEYS:
                if action != "app.quit":
                    yield SystemCommand(title, help_text, partial(self.run_action, action, screen))


def run_dashboard() -> int:
    """`hbtui` with no verb: the Service the CLI would use, and the App over it.

    The recipe for boxes made here comes from the config or `HBTUI_RECIPE`,
    resolved by the core as for `hbtui new`.
    """
    from hbtui.wiring import build_service

    service = build_service()

    app = HbtuiApp(service)

    async def run() -> None:
        try:
            await app.run_async()
        finally:
            await service.close()

    asyncio.run(run())
    return app.return_code or 0
