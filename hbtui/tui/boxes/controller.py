"""The boxes: what the main screen asks about them, and the keys that act on them.

The main screen posts a `...Wanted` message; the App hands it here, a worker asks the
Service, and the answer goes back to the screen as a `...Loaded` message. None of these
questions changes anything, and a failure is shown where the answer would be (the status
line, the log pane, the details view).

The keys (new, branch, start, stop, pause, resume, remove, cancel, details) each open a
dialog (or act at once) and run the request it returns as an operation; stop, remove and
a branch that restarts its source name the agents at work they would end first. Dialogs are imported when first
used: the first frame does not need them. A box busy with an operation, here or in
another hbtui process, is refused before any dialog is filled.
"""

from __future__ import annotations

import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text

from hbtui.core.agents import AgentSession
from hbtui.core.foundation import BoxStats, BoxView
from hbtui.errors import HbtuiError
from hbtui.events import MachineState
from hbtui.tui.activity import MAX_LINES, BoxKey
from hbtui.tui.agents.panel import AgentPanel
from hbtui.tui.agents.state import at_work
from hbtui.tui.failure import Failure, describe
from hbtui.tui.feature import Dashboard, Feature
from hbtui.tui.messages import (
    ListingLoaded,
    PortsLoaded,
    ProvisionLogLoaded,
    StatsLoaded,
    StatsWanted,
    WorkloadLogLoaded,
)
from hbtui.tui.requests import PauseRequest, ResumeRequest, StartRequest, StopRequest

if TYPE_CHECKING:
    from textual.worker import Worker

    from hbtui.tui.boxes.branch import BranchRequest
    from hbtui.tui.boxes.details import DetailsScreen
    from hbtui.tui.boxes.new import NewBoxDialog
    from hbtui.tui.operations import Operation
    from hbtui.tui.requests import RemoveRequest

HISTORY = 60  # live figures kept per box: two minutes of the selected box's
STATS_SECONDS = 10.0  # how often a box that is not selected has its figures read


class Boxes(Feature):
    def __init__(self, app: Dashboard) -> None:
        super().__init__(app)
        self._listing = False  # a list_boxes() worker is running
        self._list_again = False  # ... and another listing was asked for meanwhile
        self._ports_worker: Worker[None] | None = None
        self.usage_history: dict[BoxKey, deque[BoxStats]] = {}  # live figures, newest last
        self._stats_worker: Worker[None] | None = None
        self._usage: dict[BoxKey, BoxStats] = {}  # each box's last figures
        self._stats_read: dict[BoxKey, float] = {}  # when they were read (time.monotonic())
        self._new_dialog: NewBoxDialog | None = None  # composed at its first opening, then kept

    # -- the listing -------------------------------------------------------------------------

    def refresh_listing(self) -> None:
        """Start one `list_boxes()` unless one is running (then list again after it)."""
        if self.app.paused:
            return
        if self._listing:
            self._list_again = True
            return
        self._listing = True
        self.app.start(self._list_boxes, "refresh")

    async def _list_boxes(self) -> None:
        try:
            while True:
                self._list_again = False
                asked_at = time.monotonic()
                try:
                    listing = await self.service.boxes.listing()
                    message = ListingLoaded(
                        listing, asked_at, bases=len(self.service.bases.listing())
                    )
                except Exception as exc:  # the status line says why, whatever broke
                    message = ListingLoaded(None, asked_at, Failure.of(exc))
                self.to_main(message)
                if not self._list_again:
                    return
        finally:
            self._listing = False

    # -- the port map, the logs ----------------------------------------------------------

    def ask_ports(self, host: str) -> None:
        if self._ports_worker is None or self._ports_worker.is_finished:
            self._ports_worker = self.app.start(partial(self._ports, host), "ports")

    async def _ports(self, host: str) -> None:
        try:
            self.to_main(PortsLoaded(host, await self.service.boxes.ports(host)))
        except HbtuiError as exc:
            self.to_main(PortsLoaded(host, [], Failure.of(exc)))

    def ask_workload_log(self, key: BoxKey) -> None:
        self.app.start(partial(self._workload_log, key), "workload", exclusive=True)

    async def _workload_log(self, key: BoxKey) -> None:
        try:
            text = await self.service.boxes.workload_logs(key[1], key[0], tail=MAX_LINES)
        except HbtuiError as exc:
            text = f"\x1b[31m{describe(exc)}\x1b[0m"
        self.to_main(WorkloadLogLoaded(key, text))

    def ask_provision_log(self, key: BoxKey) -> None:
        self.app.start(partial(self._provision_log, key), "provision-log")

    async def _provision_log(self, key: BoxKey) -> None:
        try:
            log = await self.service.boxes.provision_log(key[1], key[0], tail=MAX_LINES)
        except (HbtuiError, OSError):
            return  # a box without a readable log just shows none
        if log is not None:
            self.to_main(ProvisionLogLoaded(key, log.path, log.events))

    # -- details and live figures --------------------------------------------------------

    def action_details(self) -> None:
        from hbtui.tui.boxes.details import DetailsScreen

        if view := self.need_box():
            key = (view.host, view.name)
            screen = DetailsScreen(key, self.usage_history)
            self.app.push_screen(screen)
            self.app.start(partial(self._details, screen), "details", exclusive=True)

    async def _details(self, screen: DetailsScreen) -> None:
        host, name = screen.key
        try:
            details = await self.service.boxes.details(name, host)
        except Exception as exc:  # the view says why, whatever broke
            screen.show(None, Failure.of(exc))
            return
        screen.show(details)

    def ask_stats(self, message: StatsWanted) -> None:
        """Live figures for the running boxes on screen, unless the last ask is still out:
        the selected box's at every listing, the others' once every STATS_SECONDS (each is
        an engine call per box, and a few dozen every 2 s load a small machine)."""
        if self._stats_worker is not None and not self._stats_worker.is_finished:
            return
        now = time.monotonic()
        due = [
            key
            for key in message.keys
            if key == message.selected
            or now - self._stats_read.get(key, -STATS_SECONDS) >= STATS_SECONDS
        ]
        self._stats_worker = self.app.start(partial(self._stats, message.keys, due), "stats")

    async def _stats(self, keys: list[BoxKey], due: list[BoxKey]) -> None:
        by_host: dict[str, list[str]] = {}
        for host, name in due:
            by_host.setdefault(host, []).append(name)
        for host, names in by_host.items():
            try:
                found = await self.service.boxes.stats(names, host)
            except HbtuiError:  # no figures is not worth a notification every refresh
                continue
            for name in names:
                key = (host, name)
                self._stats_read[key] = time.monotonic()
                figures = found.get(name)
                if figures is None:
                    self._usage.pop(key, None)
                    continue
                self._usage[key] = figures
                history = self.usage_history.setdefault(key, deque(maxlen=HISTORY))
                history.append(figures)
        self.to_main(StatsLoaded({k: self._usage[k] for k in keys if k in self._usage}))

    # -- the keys that act on boxes ------------------------------------------------------

    def action_new(self, port: int | None = None) -> None:
        """The new-box dialog (with `port` picked, from the port allocator); it posts its
        request (see `requested`) and stays until the box exists. It is composed once
        and kept (installed) for the next time: composing its widgets was most of what
        opening it cost; opened again, it starts as a new one would."""
        from hbtui.tui.boxes.new import NewBoxDialog

        dialog = self._new_dialog
        if dialog is not None and dialog not in self.app.screen_stack:
            dialog.reopen(self.taken(), port=port)
        else:
            dialog = NewBoxDialog(self.service, self.taken(), port=port)
            if self._new_dialog is None:
                self._new_dialog = dialog
                self.app.install_screen(dialog, "new-box")
        self.app.push_screen(dialog)

    def requested(self, message: NewBoxDialog.Requested) -> None:
        """Create was pressed: the dialog stays (locked) until the box exists or was refused."""
        operation = self.app.run_request(message.request)
        if operation is not None:
            operation.dialog = message.dialog
            message.dialog.cancel_request = operation.cancel

    def action_branch(self) -> None:
        from hbtui.tui.boxes.branch import BranchDialog

        view = self.need_box()
        if view is None or self.refuse_busy(view):
            return
        ending = [] if view.branchable else self.at_work(view)
        self.app.push_screen(
            BranchDialog(self.service, view, self.taken(), ending=ending), self._branch
        )

    def _branch(self, request: BranchRequest | None) -> None:
        if request is not None:
            self.app.run_request(request)

    def action_start(self) -> None:
        """Start the chosen boxes (a paused one is resumed: the core does it)."""
        self._run_each(self.chosen(), StartRequest)

    def action_stop(self) -> None:
        """Stop the chosen boxes; when that would end an agent at work, ask first, offering
        to pause them instead."""
        from hbtui.tui.boxes.ending import StopAskDialog

        views = self.chosen()
        sessions = [s for v in views for s in self.at_work(v)]
        unread = [f"{v.name}: {why}" for v in views if (why := self.unread(v))]
        if not sessions and not unread:
            self._run_each(views, StopRequest)
            return
        names = [v.name for v in views]
        ask = StopAskDialog(names, sessions, unread)
        self.app.push_screen(ask, partial(self._stop_answered, views))

    def _stop_answered(self, views: list[BoxView], what: str | None) -> None:
        from hbtui.tui.boxes.ending import PAUSE, STOP

        if what == STOP:
            self._run_each(views, StopRequest)
        elif what == PAUSE:
            self._run_each([v for v in views if v.state == MachineState.RUNNING], PauseRequest)

    def action_pause(self) -> None:
        self._run_each(self.chosen(), PauseRequest)

    def action_resume(self) -> None:
        self._run_each(self.chosen(), ResumeRequest)

    def _run_each(
        self,
        views: list[BoxView],
        request: type[StartRequest | StopRequest | PauseRequest | ResumeRequest],
    ) -> None:
        for view in views:
            self.app.run_request(request(view.name, view.host))
        if views:
            self.app.main.clear_marks()

    def unread(self, view: BoxView) -> str:
        """Why a running box's agents could not be read when the agent panel last asked
        ("" when they could): an agent may be at work there, so a stop asks."""
        if view.state != MachineState.RUNNING or not view.recipe_done:
            return ""
        row = self.app.main.query_one(AgentPanel).agents.get((view.host, view.name))
        return row.error if row is not None else ""

    def at_work(self, view: BoxView) -> list[AgentSession]:
        """The box's agent sessions that ending its processes would cut off, as the agent
        panel last heard them (a box that is not running has none)."""
        if view.state != MachineState.RUNNING:
            return []
        return at_work(self.app.main.query_one(AgentPanel).agents.get((view.host, view.name)))

    def action_remove(self) -> None:
        from hbtui.tui.boxes.remove import RemoveDialog

        view = self.need_box()
        if view is None:
            return
        key = (view.host, view.name)
        if not self.app.main.listed(key):
            # A row for a creation that failed: nothing exists, just forget it.
            activity = self.app.activities.get(key)
            if activity is not None and activity.running:
                self.app.notify(
                    f"{view.name} is busy with {activity.operation}", severity="warning"
                )
            else:
                self.app.activities.pop(key, None)
                self.app.main.redraw()
            return
        if not self.refuse_busy(view):
            self.app.push_screen(RemoveDialog(view, ending=self.at_work(view)), self._remove)

    def _remove(self, request: RemoveRequest | None) -> None:
        if request is not None:
            self.app.run_request(request)

    def action_cancel(self) -> None:
        """Cancel the selected box's running operation, once confirmed; the core rolls back."""
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        view = self.need_box()
        if view is None:
            return
        operation = self.app.owner((view.host, view.name))
        if operation is None:
            self.app.notify(f"nothing is running on {view.name}", severity="warning")
            return
        question = Text.assemble(
            "Cancel ",
            (operation.label, "bold"),
            "? The core rolls back what it has done so far "
            "(a box being made is removed, a box being saved is resumed).",
        )
        self.app.push_screen(
            ConfirmDialog("Cancel operation", question, yes="Cancel it", no="Keep going"),
            partial(self._cancel_confirmed, operation),
        )

    def _cancel_confirmed(self, operation: Operation, yes: bool | None) -> None:
        if yes and operation.worker is not None and not operation.worker.is_finished:
            operation.cancel()
            self.app.notify(f"{operation.label}: cancelling, rolling back…", timeout=4)
