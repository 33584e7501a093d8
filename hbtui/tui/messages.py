"""What travels between the dashboard's workers, its App and its main screen.

Workers never touch widgets: each one ends by posting a result message
(`post_message` is thread-safe), and the App routes it to whoever shows it.
The main screen never touches the Service: it posts a `...Wanted` message,
which bubbles up to the App, and gets a `...Loaded` message back.

An operation's own messages (its events, its end) live with it, in
operations.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from hbtui.core.foundation import BoxListing, BoxStats, PortSlot
from hbtui.events import Event
from hbtui.tui.activity import BoxKey
from hbtui.tui.failure import Failure

if TYPE_CHECKING:
    from hbtui.core.agents import BoxAgents

# -- the main screen asks ----------------------------------------------------------------


class ListingWanted(Message):
    """List the boxes again (the refresh tick, or a panel that needs it now)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ListingWanted)


@dataclass
class PortsWanted(Message):
    """The port map of `host`, for the port allocator panel."""

    host: str


@dataclass
class WorkloadLogWanted(Message):
    key: BoxKey


@dataclass
class ProvisionLogWanted(Message):
    """A box seen for the first time: its last provisioning log, if it has one."""

    key: BoxKey


# -- read-only results -------------------------------------------------------------------


@dataclass
class ListingLoaded(Message):
    """A `list_boxes()` answer, or the failure that left none (only the newest one matters).

    `asked_at` (time.monotonic()) is when the question was asked: what an
    operation reported about a box after that is newer than this answer."""

    listing: BoxListing | None
    asked_at: float
    failure: Failure | None = None
    bases: int = 0  # how many bases there are, on every host

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ListingLoaded)


@dataclass
class PortsLoaded(Message):
    host: str
    slots: list[PortSlot]
    failure: Failure | None = None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PortsLoaded)


@dataclass
class WorkloadLogLoaded(Message):
    key: BoxKey
    text: str


@dataclass
class ProvisionLogLoaded(Message):
    """A box's last provisioning log: its file, and its lines as progress events."""

    key: BoxKey
    path: Path
    events: list[Event]


# -- live figures ------------------------------------------------------------------------


@dataclass
class StatsWanted(Message):
    """The main screen would like the CPU and memory of these running boxes (those on
    screen), the selected one's fresh (its details view draws its history)."""

    keys: list[BoxKey]
    selected: BoxKey | None = None


@dataclass
class StatsLoaded(Message):
    """Running boxes' CPU and memory; a box the engine said nothing of is absent."""

    usage: dict[BoxKey, BoxStats]


# -- agents ------------------------------------------------------------------------------


class AgentsWanted(Message):
    """Ask every running box what its agents are doing (the agents tick, or after an answer)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AgentsWanted)


@dataclass
class AgentsLoaded(Message):
    """`Service.agents.listing()`: one row per running box (a box that could not be asked says
    why in its row), or the failure that left none at all."""

    rows: list[BoxAgents] | None
    failure: Failure | None = None


@dataclass
class AgentPaneWanted(Message):
    """The screen of an agent's tmux pane in a box, for the preview."""

    key: BoxKey
    pane: str


@dataclass
class AgentPaneLoaded(Message):
    """An agent's screen (colours only, see hbtui.boxtext), or why it could not be read."""

    key: BoxKey
    pane: str
    text: str
    failure: Failure | None = None
