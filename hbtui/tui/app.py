"""The dashboard App: owns the service, the refresh loop and running operations.

Every box operation goes through `run_operation`, which runs the BoxService
call in a worker with a Report feeding that box's `Activity` (its log
buffer), so several operations run at once and each keeps its own log.
Nothing here decides anything about boxes: that is BoxService's job.
"""

from __future__ import annotations

import asyncio
import shlex
import signal
import threading
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from rich.markup import escape
from textual.app import App, SuspendNotSupported, SystemCommand
from textual.screen import Screen
from textual.widgets import Input, Static
from textual.worker import Worker, WorkerState

from hbtui.core.boxes import BoxService, BoxView, HostListing
from hbtui.core.registry import LOCAL
from hbtui.environment import child_env
from hbtui.errors import HbtuiError
from hbtui.events import Event, Phase, Report
from hbtui.tui.activity import MAX_LINES, Activity, BoxKey, row_key
from hbtui.tui.screens.main import KEYS, MainScreen

FLUSH_SECONDS = 0.05  # how often new output reaches the screen during a burst

Clock = Callable[[], datetime]
Launcher = Callable[[list[str]], Awaitable[int]]


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


def describe_error(exc: BaseException) -> str:
    if isinstance(exc, HbtuiError):
        return exc.message
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class HbtuiApp(App):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses live elsewhere
    TITLE = "hbtui"
    SUB_TITLE = "boxes"

    def __init__(
        self,
        service: BoxService,
        *,
        clock: Clock | None = None,
        launcher: Launcher | None = None,
        recipe: Path | None = None,
        refresh_seconds: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.service = service
        self.clock: Clock = clock or (lambda: datetime.now(UTC))
        self.launcher: Launcher = launcher or launch_interactive
        self.recipe = recipe
        self.refresh_seconds = refresh_seconds or service.config.refresh_seconds
        self.activities: dict[BoxKey, Activity] = {}
        self.listing: HostListing | None = None
        self.follow_key: BoxKey | None = None
        self._paused = False
        self._refresh_worker: Worker | None = None
        self._refresh_again = False
        self._dirty: set[BoxKey] = set()
        self._port_worker: Worker | None = None
        self._status_line = ""
        self._forwards: dict[BoxKey, tuple[str, Callable[[], Awaitable[None]]]] = {}

    # -- lifecycle ---------------------------------------------------------------

    def get_default_screen(self) -> Screen:
        return MainScreen()

    def on_mount(self) -> None:
        self._loop_thread = threading.get_ident()
        keymap = getattr(self.service.config, "keymap", {}) or {}
        if keymap:
            self.set_keymap(keymap)
        self.app_suspend_signal.subscribe(self, self._on_suspend, immediate=True)
        self.app_resume_signal.subscribe(self, self._on_resume, immediate=True)

    def start_refreshing(self) -> None:
        """Called by the main screen after its first frame."""
        self.refresh_listing()
        self.set_interval(self.refresh_seconds, self.refresh_listing, name="refresh")
        self.set_interval(FLUSH_SECONDS, self._flush_dirty, name="flush")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A bug in a worker becomes a notification, never a crash."""
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            self.notify(
                describe_error(event.worker.error),
                severity="error",
                title=f"internal error in {event.worker.group}",
                timeout=10,
            )

    def _on_suspend(self, _app: App) -> None:
        self._paused = True

    def _on_resume(self, _app: App) -> None:
        self._paused = False
        self.refresh_listing()

    @property
    def main(self) -> MainScreen:
        screen = self.screen_stack[0]
        assert isinstance(screen, MainScreen)
        return screen

    # -- listing -------------------------------------------------------------------

    def refresh_listing(self) -> None:
        """Start one `list_boxes()` unless one is running (then run again after it)."""
        if self._paused:
            return
        if self._refresh_worker is not None and self._refresh_worker.is_running:
            self._refresh_again = True
            return
        self._refresh_again = False
        self._refresh_worker = self.run_worker(
            self._refresh(), group="refresh", exit_on_error=False
        )

    async def _refresh(self) -> None:
        try:
            listing = await self.service.list_boxes()
        except Exception as exc:  # the dashboard must outlive a broken engine
            listing = None
            error = describe_error(exc)
        if not self.is_running or not self.screen_stack:
            return  # the app closed while the engine answered
        if listing is None:
            self.show_listing(
                HostListing(self.listing.boxes if self.listing else [], {"local": error})
            )
        else:
            self.show_listing(listing)
        if self.main.port_grid.display and self.main.query_one("#ports-panel").display:
            self.refresh_ports()
        if self.main.log_pane.workload_visible:
            self.load_workload_log()
        if self._refresh_again:
            self.call_later(self.refresh_listing)

    def visible_views(self) -> list[BoxView]:
        """The listing plus a row for each box an operation is making or failed to make."""
        boxes = list(self.listing.boxes) if self.listing else []
        present = {(v.host, v.name) for v in boxes}
        for key, act in self.activities.items():
            if key in present or not act.operation or act.operation in ("delete", "extract"):
                continue
            if act.running or act.error:
                boxes.append(
                    BoxView(
                        name=key[1],
                        host=key[0],
                        kind="box",
                        state="failed" if act.error else "creating",
                        provisioning="failed" if act.error else "provisioning",
                    )
                )
        return boxes

    def show_listing(self, listing: HostListing) -> None:
        self.listing = listing
        self.redraw_table()
        if listing.errors:
            line = "  ".join(
                f"[b red]host {h} unreachable:[/] {escape(why)}"
                for h, why in listing.errors.items()
            )
        else:
            hosts = sorted({v.host for v in listing.boxes} | {"local"})
            line = (
                f"[green]●[/] hosts: {', '.join(hosts)}   "
                f"[dim]{len(listing.boxes)} boxes · refresh {self.refresh_seconds:g}s[/]"
            )
        if line != self._status_line:  # an unchanged update would still relayout
            self._status_line = line
            self.main.query_one("#host-status", Static).update(line)

    def redraw_table(self) -> None:
        table = self.main.table
        table.show(self.visible_views(), self.activities, self.clock())
        sub_title = f"{table.row_count} of {len(table.views)} boxes · sort: {table.sort_label}" + (
            f" · filter: {table.filter_text}" if table.filter_text else ""
        )
        if sub_title != self.sub_title:
            self.sub_title = sub_title
        if self.follow_key is not None and table.select(self.follow_key):
            self.follow_key = None
        self.selection_changed(table.selected_key())

    # -- selection and logs --------------------------------------------------------

    def selected_view(self) -> BoxView | None:
        key = self.main.table.selected_key()
        return self.main.table.views.get(f"{key[0]}/{key[1]}") if key else None

    def selection_changed(self, key: BoxKey | None) -> None:
        pane = self.main.log_pane
        if key == pane.key:
            return
        self.main.port_grid.highlight_box = key[1] if key else ""
        pane.show(key, self.activity_for(key) if key else None)
        if pane.workload_visible:
            self.load_workload_log()

    def activity_for(self, key: BoxKey) -> Activity:
        """The box's log buffer; a box first seen gets its last provisioning log."""
        activity = self.activities.get(key)
        if activity is None:
            activity = self.activities[key] = Activity(key)
            self.run_worker(
                partial(self._load_provision_log, activity),
                thread=True,
                group="provision-log",
                exit_on_error=False,
            )
        return activity

    def _load_provision_log(self, activity: Activity) -> None:
        host, name = activity.key
        logs = self.service.provision_logs(name, host)
        if not logs:
            return
        with open(logs[-1], encoding="utf-8", errors="replace") as f:
            tail = f.readlines()[-MAX_LINES:]
        self.call_from_thread(self._show_loaded_log, activity, logs[-1], tail)

    def _show_loaded_log(self, activity: Activity, path: Path, tail: list[str]) -> None:
        if activity.written:  # an operation started meanwhile; its output wins
            return
        activity.append(f"\x1b[2m── last provisioning log: {path} ──\x1b[0m")
        for line in tail:
            activity.append(line.rstrip("\n"))
        self.mark_dirty(activity.key)

    def load_workload_log(self) -> None:
        key = self.main.log_pane.key
        view = self.selected_view()
        if key is None or view is None or view.kind == "missing" or view.state == "creating":
            return
        self.run_worker(
            self._workload_log(key), group="workload", exclusive=True, exit_on_error=False
        )

    async def _workload_log(self, key: BoxKey) -> None:
        try:
            text = await self.service.workload_logs(key[1], key[0], tail=MAX_LINES)
        except Exception as exc:
            text = f"\x1b[31m{describe_error(exc)}\x1b[0m"
        if self.main.log_pane.key == key:
            self.main.log_pane.show_workload(text)

    def mark_dirty(self, key: BoxKey) -> None:
        """Repaint that box's row and log soon; bursts of events share one repaint.

        Only a set is touched here: reports can arrive through loop callbacks
        the core schedules from its threads, where Textual timers cannot start.
        """
        self._dirty.add(key)

    def _flush_dirty(self) -> None:
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        table = self.main.table
        views = {(v.host, v.name): v for v in self.visible_views()}
        if any(key in views and row_key(key) not in table.views for key in dirty):
            self.redraw_table()  # a row to add: the creation just began
        else:
            table.update_rows(
                [views[k] for k in dirty if k in views], self.activities, self.clock()
            )
        if self.main.log_pane.key in dirty:
            self.main.log_pane.catch_up()

    # -- operations ----------------------------------------------------------------

    def run_operation(
        self,
        key: BoxKey | None,
        operation: str,
        call: Callable[[Report], Awaitable[Any]],
        *,
        observer: Report | None = None,
        done: Callable[[Any, str], None] | None = None,
    ) -> Worker | None:
        """Run one BoxService call in a worker; its events go to the box's log."""
        activity = self.activity_for(key) if key is not None else Activity(("local", ""))
        if activity.running:
            self.notify(
                f"{key[1] if key else ''} is busy with {activity.operation}", severity="warning"
            )
            return None
        activity.begin(operation)
        what = f"{operation} {key[1]}" if key and key[1] else operation
        first_phase = True

        def report(event: Event) -> None:
            nonlocal first_phase
            if threading.get_ident() != self._loop_thread:
                # Some core steps report from a worker thread (archive encryption).
                self.call_from_thread(report, event)
                return
            activity.apply(event)
            if observer is not None:
                observer(event)
            if key is not None:
                self.mark_dirty(key)
                if isinstance(event, Phase) and first_phase:
                    first_phase = False
                    self.refresh_listing()

        async def body() -> Any:
            result, error = None, ""
            try:
                result = await call(report)
            except asyncio.CancelledError:
                error = "cancelled; whatever it made was rolled back"
                raise
            except Exception as exc:
                error = describe_error(exc)
                if isinstance(exc, HbtuiError) and exc.hint:
                    activity.append(f"\x1b[2m{exc.hint}\x1b[0m")
                self.notify(error, title=f"{what} failed", severity="error", timeout=10)
            finally:
                activity.finish(error)
                if key is not None:
                    self.mark_dirty(key)
                self.refresh_listing()
                if done is not None:
                    done(result, error)
            if not error:
                self.notify(f"{what}: done", timeout=4)
            return result

        return self.run_worker(body(), group="operations", exit_on_error=False, description=what)

    def _need_box(self) -> BoxView | None:
        view = self.selected_view()
        if view is None:
            self.notify("select a box first", severity="warning")
        return view

    def action_new_box(self) -> None:
        from hbtui.tui.screens.dialogs import NewBoxDialog, NewBoxRequest

        def create(request: NewBoxRequest | None) -> None:
            if request is None:
                return
            key = (request.host, request.name)
            self.activities.pop(key, None)
            self.follow_key = key
            self.run_operation(
                key,
                "new",
                lambda report: self.service.new(
                    request.name,
                    host_name=request.host,
                    image=request.image or None,
                    cpus=request.cpus,
                    memory_mib=request.memory_mib,
                    port=request.port,
                    recipe=self.recipe,
                    report=report,
                ),
            )
            self.redraw_table()
            self.main.log_pane.show(key, self.activities[key])

        self.push_screen(NewBoxDialog(), create)

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
        if (
            view.state in ("failed", "creating")
            and self.listing is not None
            and not any((v.host, v.name) == key for v in self.listing.boxes)
        ):
            # A row for a creation that failed: nothing exists, just forget it.
            if not self.activities[key].running:
                del self.activities[key]
                self.redraw_table()
            return

        def confirmed(ok: bool | None) -> None:
            if ok:
                self.run_operation(
                    key,
                    "delete",
                    lambda report: self.service.remove(view.name, view.host, report=report),
                    done=lambda _r, err: self._forget(key) if not err else None,
                )

        self.push_screen(DeleteDialog(view), confirmed)

    def _forget(self, key: BoxKey) -> None:
        self.activities.pop(key, None)
        self.redraw_table()

    def action_save_box(self) -> None:
        from hbtui.tui.screens.dialogs import SaveDialog

        if view := self._need_box():
            self.push_screen(SaveDialog(view))

    def action_load_box(self) -> None:
        from hbtui.tui.screens.dialogs import LoadDialog

        self.push_screen(LoadDialog(self.service.host_names()))

    def action_extract_archive(self) -> None:
        from hbtui.tui.screens.dialogs import ExtractDialog

        self.push_screen(ExtractDialog())

    def action_help(self) -> None:
        from hbtui.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_open_web(self) -> None:
        view = self._need_box()
        if view is None:
            return
        if not view.url:
            self.notify(f"{view.name} has no forwarded port", severity="warning")
            return
        if view.host == LOCAL:
            self._open(view.name, view.url)
        else:
            self.run_worker(self._open_remote(view), group="forward", exit_on_error=False)

    def _open(self, name: str, url: str) -> None:
        self.open_url(url)
        self.notify(url, title=f"opening {name}")

    async def _open_remote(self, view: BoxView) -> None:
        """A remote box's web UI needs a local forward; it is kept while the app runs."""
        key = (view.host, view.name)
        if key not in self._forwards:
            from hbtui.remote import open_forward

            try:
                self._forwards[key] = await open_forward(self.service, view.name, view.host)
            except Exception as exc:
                self.notify(describe_error(exc), title=f"forward to {view.name}", severity="error")
                return
        self._open(view.name, self._forwards[key][0])

    async def on_unmount(self) -> None:
        await self._close_forwards()

    async def _close_forwards(self) -> None:
        forwards, self._forwards = self._forwards, {}
        for _url, close in forwards.values():
            try:
                await close()
            except Exception:  # a forward over a dead connection is already gone
                pass

    def action_enter_box(self) -> None:
        if view := self._need_box():
            self.run_worker(self._enter(view), group="enter", exclusive=True, exit_on_error=False)

    async def _enter(self, view: BoxView) -> None:
        key = (view.host, view.name)
        activity = self.activity_for(key)

        def report(event: Event) -> None:
            activity.apply(event)
            self.mark_dirty(key)

        try:
            argv = await self.service.enter_argv(view.name, view.host, report=report)
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
        self.refresh_listing()

    def action_refresh_now(self) -> None:
        self.refresh_listing()
        if not self.main.query_one("#ports-panel").display:
            return
        self.refresh_ports()

    def action_filter(self) -> None:
        self.main.show_filter()

    def action_cycle_sort(self) -> None:
        label = self.main.table.cycle_sort()
        self.redraw_table()
        self.notify(f"sorted by {label}", timeout=2)

    def action_toggle_logs(self) -> None:
        self.main.log_pane.toggle_tab()
        if self.main.log_pane.workload_visible:
            self.load_workload_log()

    def action_toggle_ports(self) -> None:
        panel = self.main.query_one("#ports-panel")
        panel.display = not panel.display
        if panel.display:
            self.refresh_ports()
            self.main.port_grid.focus()
        else:
            self.main.table.focus()

    def refresh_ports(self) -> None:
        if self._port_worker is not None and self._port_worker.is_running:
            return
        self._port_worker = self.run_worker(self._ports(), group="ports", exit_on_error=False)

    async def _ports(self) -> None:
        view = self.selected_view()
        try:
            slots = await self.service.ports(view.host if view else LOCAL)
        except Exception as exc:
            self.notify(describe_error(exc), title="port map", severity="error")
            return
        self.main.port_grid.set_slots(slots)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Enter is a priority binding (the table would take it); text boxes keep it.
        if action == "enter_box" and (
            isinstance(self.focused, Input) or not isinstance(self.screen, MainScreen)
        ):
            return False
        return True

    # -- command palette -------------------------------------------------------------

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, MainScreen):
            for _ident, _key, action, _label, title, help_text in KEYS:
                if action != "quit":
                    yield SystemCommand(title, help_text, partial(self.run_action, action))


def run_dashboard() -> int:
    """`hbtui` with no verb: build the service the CLI would and run the App.

    `HBTUI_RECIPE` names the recipe folder for boxes made here, as
    `hbtui new --recipe` does for one box.
    """
    import os

    from hbtui.cli import make_service
    from hbtui.config import load_config
    from hbtui.paths import resolve_paths

    paths = resolve_paths()
    config = load_config(paths)
    paths.ensure()
    recipe = os.environ.get("HBTUI_RECIPE")
    HbtuiApp(make_service(paths, config), recipe=Path(recipe) if recipe else None).run()
    return 0
