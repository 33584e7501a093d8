"""The dashboard's main screen: box table, log pane, agent panel, port allocator, status line.

The screen owns its panels and what they show: the listing, the rows an
operation adds while it makes a box, the selection, the filter and sort,
which log tab is up; the agent panel (hbtui/tui/agents/panel.py) keeps what the
agents do. It never calls the Service: it asks with a `...Wanted` message, which
the App hands to the feature that answers, and shows the `...Loaded` answer. The App
tells it that an operation reported on a box (`box_changed`) or that it should follow
a box an operation is making (`follow`).

Its keys come from the actions table (hbtui/tui/actions.py, scope MAIN): each
feature's (`boxes.start`, `agents.approve`, ...) and the App's (help, quit), and
the screen's own (filter, sort, log tab, ports, refresh) bare. None is a priority
binding: the focused widget's own keys (enter in the filter box or on a port of the
allocator) win over the screen's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from textual._styles_cache import StylesCache
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Header, Input, Static

from hbtui import boxtext
from hbtui.core.foundation import BOX, MISSING, BoxListing, BoxView
from hbtui.events import MachineState
from hbtui.names import LOCAL
from hbtui.tui.actions import BY_ID, COMMANDS, MAIN
from hbtui.tui.activity import Activity, BoxKey, row_key
from hbtui.tui.agents.panel import AgentPanel
from hbtui.tui.boxes.port_grid import PortGrid
from hbtui.tui.boxes.table import BoxTable
from hbtui.tui.keys import bindings
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
from hbtui.tui.widgets.command_line import CommandLine
from hbtui.tui.widgets.key_footer import KeyFooter
from hbtui.tui.widgets.log_pane import LogPane

Clock = Callable[[], datetime]

# Operations whose box is not listed (yet) still get a row while they run or
# after they failed; a removed box is meant to go away.
NO_ROW_OPERATIONS = ("", "remove")


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = bindings(MAIN)

    def __init__(
        self, activities: dict[BoxKey, Activity], clock: Clock, refresh_seconds: float
    ) -> None:
        super().__init__()
        self.activities = activities  # the App's, which operations feed; read here
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self.listing: BoxListing | None = None
        self.follow_key: BoxKey | None = None  # select this box as soon as it has a row
        self._listed: dict[BoxKey, BoxView] = {}  # the listing, with `_reported` applied
        # What operations returned about boxes (None: gone), and when: newer than
        # any listing asked for before that moment.
        self._reported: dict[BoxKey, tuple[BoxView | None, float]] = {}
        self._status = Content()
        self.bases = 0  # how many bases the last listing found (the status line says)
        self.agent_panel: AgentPanel  # (composed with the table and log it is handed)

    def compose(self) -> ComposeResult:
        table, log = BoxTable(id="boxes"), LogPane(id="log-pane")
        self.agent_panel = AgentPanel(
            table, log, self._agents_changed, self.activities, self.clock, id="agent-panel"
        )
        yield Header()
        yield Input(placeholder="filter: words that must all appear (esc clears)", id="filter")
        yield table
        with Horizontal(id="lower"):
            yield log
            yield self.agent_panel
            with Vertical(id="ports-panel"):
                yield Static("Port allocator", classes="panel-title")
                yield PortGrid(id="port-grid")
        yield Static("", id="host-status", markup=False)
        yield CommandLine(COMMANDS, id="command-line")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.table.focus()
        # The first listing is asked of the App itself, not bubbled up after this screen's
        # other messages: it then builds the Service and lists before the footer's keys
        # and the frames that follow the first, and the rows come a frame or two sooner.
        self.app.post_message(ListingWanted())
        self.set_interval(
            self.refresh_seconds, lambda: self.post_message(ListingWanted()), name="refresh"
        )

    def on_screen_resume(self) -> None:
        """A screen above this one has closed: what Textual's class-wide render cache kept
        of its widgets goes with it. Textual 8.2.8 caches `get_inner_outer` per StylesCache
        (Textualize/textual#6665), so the drawn lines of up to 1,024 dead widgets stayed
        alive, ~4,000 objects a dialog, and every full collection walked them all (200+
        ms, on whatever key came next). What it caches is two colours added: soon back."""
        StylesCache.get_inner_outer.cache_clear()

    @property
    def table(self) -> BoxTable:
        return self.query_one(BoxTable)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    @property
    def port_grid(self) -> PortGrid:
        return self.query_one(PortGrid)

    @property
    def ports_visible(self) -> bool:
        return self.query_one("#ports-panel").display

    # -- the listing -----------------------------------------------------------------------

    def on_listing_loaded(self, message: ListingLoaded) -> None:
        listing = message.listing
        if listing is None:  # the listing failed as a whole: keep the rows, say why
            why = message.failure.text if message.failure is not None else ""
            listing = BoxListing(self.listing.boxes if self.listing else [], {LOCAL: why})
        self.bases = message.bases
        self.show_listing(listing, message.asked_at)
        self.agent_panel.listing_shown()
        running = {(v.host, v.name) for v in listing.boxes if v.state == MachineState.RUNNING}
        on_screen = [key for key in self.table.keys_on_screen() if key in running]
        self.post_message(StatsWanted(on_screen, self.table.selected_key()))
        if self.ports_visible:
            self._want_ports()
        if self.log_pane.workload_visible:
            self._want_workload()

    def show_listing(self, listing: BoxListing, asked_at: float | None = None) -> None:
        """Show a listing asked for at `asked_at` (time.monotonic(); None: just now)."""
        self.listing = self.agent_panel.listing = listing
        since = time.monotonic() if asked_at is None else asked_at
        self._reported = {k: r for k, r in self._reported.items() if r[1] > since}
        self._listed = {(v.host, v.name): v for v in listing.boxes}
        for key, (view, _at) in self._reported.items():
            if view is None:
                self._listed.pop(key, None)
            else:
                self._listed[key] = view
        for key, activity in self.activities.items():
            if activity.failure is not None and (listed := self._listed.get(key)) is not None:
                activity.settle(listed.state, listed.provisioning, since)
        self.redraw()
        self._show_status(listing)

    def box_reported(self, key: BoxKey, view: BoxView | None) -> None:
        """An operation returned the box as it is now (None: it is gone); listings
        asked for before this moment cannot undo it."""
        self._reported[key] = (view, time.monotonic())
        if view is None:
            self._listed.pop(key, None)
        else:
            self._listed[key] = view
        self.box_changed(key)

    def _show_status(self, listing: BoxListing) -> None:
        if listing.errors:
            line = Content("  ").join(
                Content.assemble((f"host {h} unreachable:", "bold red"), " ", boxtext.line(why))
                for h, why in listing.errors.items()
            )
        else:
            hosts = sorted({v.host for v in listing.boxes} | {LOCAL})
            bases = f" · {self.bases} base{'s' if self.bases != 1 else ''}" if self.bases else ""
            line = Content.assemble(
                ("●", "green"),
                f" hosts: {', '.join(hosts)}   ",
                (
                    f"{_count(len(listing.boxes), 'box', 'boxes')}{bases}"
                    f" · refresh {self.refresh_seconds:g}s",
                    "dim",
                ),
            )
        line += Content.assemble("  ", (f"· listed at {self.clock().astimezone():%H:%M:%S}", "dim"))
        line += self.agent_panel.status()
        if line.markup != self._status.markup:  # (Content's == compares its text only)
            self._status = line
            self._draw_status()

    def _agents_changed(self) -> None:
        """The agent panel's part of the status line says something else now."""
        if self.listing is not None:
            self._show_status(self.listing)

    def _draw_status(self) -> None:
        """The status line is one line high whatever it says: no layout of the screen
        (which a Static's update does by default: 40 ms and more with 30 boxes, at each
        listing and each change of the count of boxes that need you)."""
        self.query_one("#host-status", Static).update(self._status, layout=False)

    def listed(self, key: BoxKey) -> bool:
        """Whether the last listing has this box (a row may be an operation's only)."""
        return key in self._listed

    def _unlisted_row(self, key: BoxKey) -> BoxView | None:
        """A row for a box an operation is making, or failed to make."""
        activity = self.activities.get(key)
        if activity is None or activity.operation in NO_ROW_OPERATIONS:
            return None
        failed = activity.failure is not None
        if not (activity.running or failed):
            return None
        return BoxView(
            name=key[1],
            host=key[0],
            kind=BOX,
            state=MachineState.FAILED if failed else MachineState.CREATING,
            provisioning="failed" if failed else "provisioning",
        )

    def _view_of(self, key: BoxKey) -> BoxView | None:
        return self._listed.get(key) or self._unlisted_row(key)

    def _views(self) -> list[BoxView]:
        views = list(self._listed.values())
        for key in self.activities:
            if key not in self._listed and (row := self._unlisted_row(key)) is not None:
                views.append(row)
        return views

    def redraw(self) -> None:
        """Every row from the listing and the activities (the table touches only what changed)."""
        table = self.table
        table.show(self._views(), self.activities, self.clock())
        shown = f"{table.row_count} of {_count(len(table.views), 'box', 'boxes')}"
        sub_title = f"{shown} · sort: {table.sort_label}" + (
            f" · filter: {table.filter_text}" if table.filter_text else ""
        )
        if table.marked:
            sub_title += f" · {len(table.marked)} marked"
        if sub_title != self.sub_title:
            self.sub_title = sub_title
        if self.follow_key is not None and table.select(self.follow_key):
            self.follow_key = None
        self._selection_changed(table.selected_key())

    def box_changed(self, key: BoxKey) -> None:
        """An operation reported on this box: repaint its row and, if shown, its log."""
        view = self._view_of(key)
        shown = row_key(key) in self.table.views
        if view is not None and shown:
            self.table.update_rows([view], self.activities, self.clock())
        elif view is not None or shown:
            self.redraw()  # a row comes (a creation began) or goes
        if key == self.log_pane.key:
            self.log_pane.catch_up()

    def follow(self, key: BoxKey) -> None:
        """An operation is making this box: select it once it has a row, show its log now."""
        self.follow_key = key
        self.redraw()
        self.log_pane.show(key, self._activity(key))

    # -- selection and logs ------------------------------------------------------------------

    def footer_first(self) -> frozenset[str]:
        """What the footer shows first (KeyFooter asks): the selected box's agent keys."""
        return self.agent_panel.footer_first()

    def selected_view(self) -> BoxView | None:
        key = self.table.selected_key()
        return self.table.views.get(row_key(key)) if key else None

    def on_box_table_row_highlighted(self, _message: BoxTable.RowHighlighted) -> None:
        self._selection_changed(self.table.selected_key())

    def _selection_changed(self, key: BoxKey | None) -> None:
        self.agent_panel.selection_changed(key)
        pane = self.log_pane
        if key == pane.key:
            return
        self.port_grid.highlight_box = key[1] if key else ""
        pane.show(key, self._activity(key) if key else None)
        if pane.workload_visible:
            self._want_workload()

    def _activity(self, key: BoxKey) -> Activity:
        """The box's log buffer; a box first seen gets its last provisioning log."""
        activity = self.activities.get(key)
        if activity is None:
            activity = self.activities[key] = Activity(key)
            self.post_message(ProvisionLogWanted(key))
        return activity

    def on_provision_log_loaded(self, message: ProvisionLogLoaded) -> None:
        activity = self.activities.get(message.key)
        if activity is None or activity.written:
            return  # an operation started meanwhile: its output wins
        activity.append(f"\x1b[2m── last provisioning log: {message.path} ──\x1b[0m")
        for event in message.events:
            activity.apply(event)
        self.box_changed(message.key)

    def _want_workload(self) -> None:
        key = self.log_pane.key
        view = self.selected_view()
        if (
            key is None
            or view is None
            or view.kind == MISSING
            or view.state == MachineState.CREATING
        ):
            return
        self.post_message(WorkloadLogWanted(key))

    def on_workload_log_loaded(self, message: WorkloadLogLoaded) -> None:
        if message.key == self.log_pane.key:
            self.log_pane.show_workload(message.text)

    def action_toggle_logs(self) -> None:
        if self.agent_panel.display:  # the log comes back as it was
            self.agent_panel.toggle()
            return
        self.log_pane.toggle_tab()
        if self.log_pane.workload_visible:
            self._want_workload()

    def action_toggle_log_full(self) -> None:
        """`f`: the log pane takes the whole body (table, filter and ports hide), and back."""
        full = not self.has_class("-log-full")
        self.set_class(full, "-log-full")
        for widget in self.query("#boxes, #filter, #ports-panel"):
            if full:
                widget.set_class(bool(widget.display), "-shown-before-full")
                widget.display = False
            elif widget.has_class("-shown-before-full"):
                widget.display = True
        if full:
            self.log_pane.visible_view.focus()
        else:
            self.table.focus()

    # -- ports -----------------------------------------------------------------------------

    def action_toggle_ports(self) -> None:
        panel = self.query_one("#ports-panel")
        panel.display = not panel.display
        if panel.display:
            self._want_ports()
            self.port_grid.focus()
        else:
            self.table.focus()

    async def on_port_grid_picked(self, event: PortGrid.Picked) -> None:
        """Enter on a free port of the allocator: a new box on that port."""
        await self.run_action(f"boxes.new({event.port})")

    def _want_ports(self) -> None:
        view = self.selected_view()
        self.post_message(PortsWanted(view.host if view else LOCAL))

    def on_ports_loaded(self, message: PortsLoaded) -> None:
        if message.failure is not None:
            self.notify(message.failure.text, title="port map", severity="error")
        else:
            self.port_grid.set_slots(message.slots)

    # -- refresh, filter, sort -------------------------------------------------------------

    def action_refresh_now(self) -> None:
        """`r`: list now, and say so until the listing is back."""
        self._status = Content.styled("refreshing…", "bold")
        self._draw_status()
        self.post_message(ListingWanted())
        self.agent_panel.want_agents()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display or box.value:
            box.value = ""
            box.display = False
            self.table.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.table.filter_text = event.value
            self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                event.input.display = False
            self.table.focus()

    def action_cycle_sort(self) -> None:
        self.table.cycle_sort()
        self.redraw()

    def action_reverse_sort(self) -> None:
        self.table.reverse_sort()
        self.redraw()

    def on_box_table_sorted(self, _message: BoxTable.Sorted) -> None:
        self.redraw()

    # -- marks, live figures, the command line ------------------------------------------

    def action_toggle_mark(self) -> None:
        self.table.toggle_mark()
        self.redraw()

    def chosen_views(self) -> list[BoxView]:
        """What a bulk action acts on: the marked boxes, else the selected one."""
        marked = self.table.marked_views()
        if marked:
            return marked
        view = self.selected_view()
        return [view] if view is not None else []

    def clear_marks(self) -> None:
        if self.table.marked:
            self.table.marked.clear()
            self.table.refresh()
            self.redraw()

    def on_stats_loaded(self, message: StatsLoaded) -> None:
        self.table.set_usage(message.usage, self.activities, self.clock())

    def action_command_line(self) -> None:
        line = self.query_one(CommandLine)
        line.open(self.table.views.values())

    async def on_command_line_run(self, message: CommandLine.Run) -> None:
        """Select the box the command names, then run the action as its key would."""
        if message.box is not None:
            views = list(self.table.views.values())
            key = next(
                ((v.host, v.name) for v in views if message.box in (v.name, f"{v.host}/{v.name}")),
                None,
            )
            if key is None or not self.table.select(key):
                self.notify(f"{message.box} is hidden by the filter", severity="warning")
                return
        await self.run_action(BY_ID[message.ident].action)

    def on_command_line_closed(self, _message: CommandLine.Closed) -> None:
        self.table.focus()


def _count(n: int, one: str, many: str) -> str:
    """ "1 box", "2 boxes": a count with its word."""
    return f"{n} {one if n == 1 else many}"
