"""The agent panel: the agents part of the main screen. It keeps what the boxes' agents do
(the Agent column's data, the needs-you count and queue), and shows the selected box's
agent live in the log's place while `v` has it up.

It asks the App (`AgentsWanted` every AGENT_SECONDS while some box runs: the agents
feature's status streams then learn which boxes run, or it polls them; `AgentPaneWanted`
every PREVIEW_SECONDS while the preview shows) and shows the answers it is sent; the
agents feature's workers do the asking. (Posted to the App itself: a message a widget
posts while its screen's handler runs stops bubbling at the screen.) The box table and
the log pane are the screen's: the panel is handed them, and tells the screen when the
status line's part changes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.timer import Timer
from textual.widget import Widget

from hbtui.core.agents import BoxAgents
from hbtui.core.foundation import BoxListing
from hbtui.events import MachineState
from hbtui.tui.actions import ACTIONS
from hbtui.tui.activity import Activity, BoxKey
from hbtui.tui.agents.preview import AgentPreview
from hbtui.tui.agents.state import on_screen, waiting
from hbtui.tui.failure import Failure
from hbtui.tui.messages import AgentPaneLoaded, AgentPaneWanted, AgentsLoaded, AgentsWanted

AGENT_SECONDS = 2.0  # between two asks of what the agents do
PREVIEW_SECONDS = 1.0  # between two captures of the previewed agent's screen
# The agent keys, as the footer's bindings name their actions.
LEADING = frozenset(a.action for a in ACTIONS if a.action.startswith("agents."))


class Rows(Protocol):
    """The box table, as the panel uses it."""

    def set_agents(
        self, agents: dict[BoxKey, BoxAgents], activities: dict[BoxKey, Activity], now: datetime
    ) -> None: ...

    def selected_key(self) -> BoxKey | None: ...

    def keys_in_order(self) -> list[BoxKey]: ...

    def select(self, key: BoxKey) -> bool: ...


class AgentPanel(Vertical):
    def __init__(
        self,
        rows: Rows,
        log_pane: Widget,
        status_changed: Callable[[], object],
        activities: dict[BoxKey, Activity],
        clock: Callable[[], datetime],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.rows = rows
        self.log_pane = log_pane  # whose place the preview takes
        self.status_changed = status_changed  # what `status` says has changed: redraw it
        self.activities = activities  # the App's, which operations feed; read here
        self.clock = clock
        self.listing: BoxListing | None = None  # the last one the screen showed (it sets it)
        self._led = False  # the footer last put the agent keys first
        self.agents: dict[BoxKey, BoxAgents] = {}  # running boxes', by the last ask
        self._said: dict[BoxKey, BoxAgents] = {}  # every row the last ask brought
        self.agents_failure: Failure | None = None  # why the last ask failed as a whole
        self._agents_asked = False
        self._preview_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield AgentPreview()

    def on_mount(self) -> None:
        self.set_interval(AGENT_SECONDS, self.want_agents, name="agents")

    @property
    def preview(self) -> AgentPreview:
        return self.query_one(AgentPreview)

    def _boxes_running(self) -> bool:
        boxes = self.listing.boxes if self.listing is not None else []
        return any(v.state == MachineState.RUNNING for v in boxes)

    def want_agents(self) -> None:
        """Ask again while some box runs; with none, nothing is left to show (and the
        streams hear that the last box stopped)."""
        if self._boxes_running():
            self._agents_asked = True
            self.app.post_message(AgentsWanted())
        elif self.agents:
            self._show_agents({})
            self.app.post_message(AgentsWanted())

    def listing_shown(self) -> None:
        """The first listing with a running box asks at once, not a tick later; a box
        listed stopped or gone loses what its agents said before."""
        if not self._agents_asked:
            self.want_agents()
        shown = self._running_only(self._said)
        if shown != self.agents:
            self._show_agents(shown)

    def _running_only(self, rows: dict[BoxKey, BoxAgents]) -> dict[BoxKey, BoxAgents]:
        """The rows of boxes listed running: a box's status stream fails as the box stops
        (is branched, removed), and what it said then is no news (a red ✗, an Agent
        column taking other columns' room). A box an operation is on says no error."""
        listed = self.listing.boxes if self.listing is not None else []
        running = {(v.host, v.name) for v in listed if v.state == MachineState.RUNNING}
        return {
            key: row
            for key, row in rows.items()
            if key in running and not (row.error and self._operated(key))
        }

    def _operated(self, key: BoxKey) -> bool:
        activity = self.activities.get(key)
        return activity is not None and activity.running

    def on_agents_loaded(self, message: AgentsLoaded) -> None:
        if message.rows is None:
            self.agents_failure = message.failure
            self.status_changed()
            return
        failed, self.agents_failure = self.agents_failure, None
        self._said = {(r.host, r.box): r for r in message.rows if r.box}
        self._show_agents(self._running_only(self._said))
        if failed is not None:
            self.status_changed()  # the failure goes from the status line

    def _show_agents(self, agents: dict[BoxKey, BoxAgents]) -> None:
        """Show what changed: each stream event brings every box's row, one of them new,
        several a second with many boxes (the status line and the preview are redrawn
        only when what they show changed)."""
        before, had, waited = self.agents, self.any_agents, self._waiting_count()
        first = self.selected_has_agent
        self.agents = agents
        if self.any_agents != had or self.selected_has_agent != first:
            self.app.refresh_bindings()  # the agent keys come into the footer, go, or lead
        self.rows.set_agents(agents, self.activities, self.clock())
        if self._waiting_count() != waited:
            self.status_changed()
        selected = self.rows.selected_key()
        changed = selected is None or before.get(selected) != agents.get(selected)
        if self.display and changed:
            self.show_preview()

    def _waiting_count(self) -> int:
        return sum(1 for row in self.agents.values() if waiting(row))

    @property
    def any_agents(self) -> bool:
        """Some box has an agent session, or could not say: the agent keys apply."""
        return any(row.sessions or row.error for row in self.agents.values())

    def status(self) -> Content:
        """The status line's part: how many boxes need you."""
        if self.agents_failure is not None:
            return Content.assemble("  ", (f"agents: {self.agents_failure.text}", "red"))
        count = self._waiting_count()
        if not count:
            return Content()
        line = Content.assemble(
            "  ", (f"● {count} need{'s' if count == 1 else ''} you", "b yellow")
        )
        key = self.key_of("agents.next_needs_you")
        return Content.assemble(line, " ", (f"({key}: next)", "dim")) if key else line

    def key_of(self, action: str) -> str:
        """The key that runs `action` on this screen, as the footer shows it (remapped or not)."""
        keys = [
            self.app.get_key_display(active.binding)
            for active in self.screen.active_bindings.values()
            if active.binding.action == action
        ]
        return keys[0] if keys else ""

    def next_needs_you(self) -> None:
        """`a`: select the next box (below the cursor, round the end) whose agent waits."""
        order = self.rows.keys_in_order()
        wanted = [key for key, row in self.agents.items() if waiting(row)]
        if not wanted:
            self.notify("no agent needs you", title="agent")
            return
        shown = [key for key in order if key in wanted]
        if not shown:
            self.notify(f"{wanted[0][1]} needs you but the filter hides it", severity="warning")
            return
        here = self.rows.selected_key()
        start = order.index(here) + 1 if here in order else 0
        after = [key for key in order[start:] + order[:start] if key in wanted]
        self.rows.select(after[0])

    # -- the preview ---------------------------------------------------------------------------

    def toggle(self) -> None:
        """`v`: the selected box's agent screen takes the log's place, and back."""
        shown = not self.display
        self.display, self.log_pane.display = shown, not shown
        if self._preview_timer is None:
            self._preview_timer = self.set_interval(PREVIEW_SECONDS, self._want_pane)
        if shown:
            self.show_preview()
            self._preview_timer.resume()
        else:
            self._preview_timer.pause()

    def selection_changed(self, key: BoxKey | None) -> None:
        if self._led != self.selected_has_agent:
            self.app.refresh_bindings()  # the agent keys lead the footer, or no longer
        if self.display and key != self.preview.key:
            self.show_preview()

    @property
    def selected_has_agent(self) -> bool:
        """The selected box has an agent session: its keys lead the footer."""
        key = self.rows.selected_key()
        row = self.agents.get(key) if key is not None else None
        return row is not None and bool(row.sessions)

    def footer_first(self) -> frozenset[str]:
        """The actions the footer shows first: the agent keys, while the selected box
        has an agent (at 120 columns the footer used to end before Deny and Send)."""
        self._led = self.selected_has_agent
        return LEADING if self._led else frozenset()

    def show_preview(self) -> None:
        """The selected box's session in the preview, and its screen asked for now."""
        key = self.rows.selected_key()
        row = self.agents.get(key) if key is not None else None
        session = on_screen(row)
        others = len(row.sessions) - 1 if row is not None and session is not None else 0
        why = row.error if row is not None else ""
        back = self.key_of("agents.toggle_agent")
        self.preview.show_session(key, session, others, why, self.clock().timestamp(), back)
        self._want_pane()

    def _want_pane(self) -> None:
        if not self.display:
            return
        preview = self.preview
        if preview.key is not None and preview.pane:
            self.app.post_message(AgentPaneWanted(preview.key, preview.pane))

    def on_agent_pane_loaded(self, message: AgentPaneLoaded) -> None:
        preview = self.preview
        if (message.key, message.pane) == (preview.key, preview.pane):
            preview.show_screen(message.text, message.failure)
