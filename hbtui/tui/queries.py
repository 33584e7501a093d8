"""The read-only questions the dashboard asks the Service, each in a worker.

The main screen posts a `...Wanted` message; the answer comes back to it as
a `...Loaded` message. None of these changes anything, and a failure here
is shown where the answer would be (the status line, the log pane), never
as a crash.
"""

from __future__ import annotations

import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING

from hbtui.errors import HbtuiError
from hbtui.tui import plain
from hbtui.tui.activity import MAX_LINES, BoxKey
from hbtui.tui.base import DashboardBase
from hbtui.tui.failure import Failure, describe
from hbtui.tui.messages import (
    ListingLoaded,
    ListingWanted,
    PortsLoaded,
    PortsWanted,
    ProvisionLogLoaded,
    ProvisionLogWanted,
    StatsLoaded,
    StatsWanted,
    WorkloadLogLoaded,
    WorkloadLogWanted,
)

if TYPE_CHECKING:
    from hbtui.tui.boxes.details import DetailsScreen

HISTORY = 60  # live figures kept per box: two minutes of the selected box's
STATS_SECONDS = 10.0  # how often a box that is not selected has its figures read


class Queries(DashboardBase):
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
                except Exception as exc:  # the status line says why, whatever broke
                    message = ListingLoaded(None, asked_at, Failure.of(exc))
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
        except HbtuiError as exc:
            self._to_main(PortsLoaded(host, [], Failure.of(exc)))

    def on_workload_log_wanted(self, message: WorkloadLogWanted) -> None:
        self._start(partial(self._workload_log, message.key), "workload", exclusive=True)

    async def _workload_log(self, key: BoxKey) -> None:
        try:
            text = await self.service.workload_logs(key[1], key[0], tail=MAX_LINES)
        except HbtuiError as exc:
            text = f"\x1b[31m{describe(exc)}\x1b[0m"
        self._to_main(WorkloadLogLoaded(key, text))

    def on_provision_log_wanted(self, message: ProvisionLogWanted) -> None:
        self._start(partial(self._provision_log, message.key), "provision-log")

    async def _provision_log(self, key: BoxKey) -> None:
        try:
            log = await self.service.provision_log(key[1], key[0], tail=MAX_LINES)
        except (HbtuiError, OSError):
            return  # a box without a readable log just shows none
        if log is not None:
            events = [plain.event(e) for e in log.events]  # what the box wrote, made plain
            self._to_main(ProvisionLogLoaded(key, log.path, events))

    # -- details and live figures --------------------------------------------------------------

    def action_show_details(self) -> None:
        from hbtui.tui.boxes.details import DetailsScreen

        if view := self._need_box():
            key = (view.host, view.name)
            screen = DetailsScreen(key, self.usage_history)
            self.push_screen(screen)
            self._start(partial(self._details, screen), "details", exclusive=True)

    async def _details(self, screen: DetailsScreen) -> None:
        host, name = screen.key
        try:
            details = await self.service.details(name, host)
        except Exception as exc:  # the view says why, whatever broke
            screen.show(None, Failure.of(exc))
            return
        screen.show(details)

    def on_stats_wanted(self, message: StatsWanted) -> None:
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
        self._stats_worker = self._start(partial(self._stats, message.keys, due), "stats")

    async def _stats(self, keys: list[BoxKey], due: list[BoxKey]) -> None:
        by_host: dict[str, list[str]] = {}
        for host, name in due:
            by_host.setdefault(host, []).append(name)
        for host, names in by_host.items():
            try:
                found = await self.service.stats(names, host)
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
        self._to_main(StatsLoaded({k: self._usage[k] for k in keys if k in self._usage}))
