"""What travels between the dashboard's workers, its App and its main screen.

Workers never touch widgets: each one ends by posting a result message
(`post_message` is thread-safe), and the App routes it to whoever shows it.
The main screen never touches the Service: it posts a `...Wanted` message,
which bubbles up to the App, and gets a `...Loaded` message back.

An operation's own messages (its events, its end) live with it, in
operations.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from hbtui.core.ports import PortSlot
from hbtui.core.views import BoxListing, BoxStats
from hbtui.events import Event
from hbtui.tui.activity import BoxKey

if TYPE_CHECKING:
    from hbtui.core.agent_sessions import BoxAgents
    from hbtui.core.hosts import WebAccess

# -- the main screen asks ----------------------------------------------------------------


class ListingWanted(Message):
    """List the boxes again (the refresh tick, or a panel that needs it now)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ListingWanted)


class PortsWanted(Message):
    """The port map of `host`, for the port allocator panel."""

    def __init__(self, host: str) -> None:
        super().__init__()
        self.host = host


class WorkloadLogWanted(Message):
    def __init__(self, key: BoxKey) -> None:
        super().__init__()
        self.key = key


class ProvisionLogWanted(Message):
    """A box seen for the first time: its last provisioning log, if it has one."""

    def __init__(self, key: BoxKey) -> None:
        super().__init__()
        self.key = key


# -- read-only results -------------------------------------------------------------------


class ListingLoaded(Message):
    """A `list_boxes()` answer, or why there is none (only the newest one matters).

    `asked_at` (time.monotonic()) is when the question was asked: what an
    operation reported about a box after that is newer than this answer."""

    def __init__(
        self, listing: BoxListing | None, asked_at: float, error: str = "", bases: int = 0
    ) -> None:
        super().__init__()
        self.listing = listing
        self.bases = bases  # how many bases there are, on every host
        self.asked_at = asked_at
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ListingLoaded)


class PortsLoaded(Message):
    def __init__(self, host: str, slots: list[PortSlot], error: str = "") -> None:
        super().__init__()
        self.host = host
        self.slots = slots
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, PortsLoaded)


class WorkloadLogLoaded(Message):
    def __init__(self, key: BoxKey, text: str) -> None:
        super().__init__()
        self.key = key
        self.text = text


class ProvisionLogLoaded(Message):
    """A box's last provisioning log: its file, and its lines as progress events."""

    def __init__(self, key: BoxKey, path: Path, events: list[Event]) -> None:
        super().__init__()
        self.key = key
        self.path = path
        self.events = events


class WebReady(Message):
    """A URL on this machine for a box's web UI (a remote box's is a kept forward)."""

    def __init__(self, key: BoxKey, access: WebAccess) -> None:
        super().__init__()
        self.key = key
        self.access = access


# -- live figures ------------------------------------------------------------------------


class StatsWanted(Message):
    """The main screen would like the CPU and memory of these running boxes (those on
    screen), the selected one's fresh (its details view draws its history)."""

    def __init__(self, keys: list[BoxKey], selected: BoxKey | None = None) -> None:
        super().__init__()
        self.keys = keys
        self.selected = selected


class StatsLoaded(Message):
    """Running boxes' CPU and memory; a box the engine said nothing of is absent."""

    def __init__(self, usage: dict[BoxKey, BoxStats]) -> None:
        super().__init__()
        self.usage = usage


# -- agents ------------------------------------------------------------------------------


class AgentsWanted(Message):
    """Ask every running box what its agents are doing (the agents tick, or after an answer)."""

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, AgentsWanted)


class AgentsLoaded(Message):
    """`Service.agents()`: one row per running box (a box that could not be asked says
    why in its row), or why there are none at all."""

    def __init__(self, rows: list[BoxAgents] | None, error: str = "") -> None:
        super().__init__()
        self.rows = rows
        self.error = error


class AgentPaneWanted(Message):
    """The screen of an agent's tmux pane in a box, for the preview."""

    def __init__(self, key: BoxKey, pane: str) -> None:
        super().__init__()
        self.key = key
        self.pane = pane


class AgentPaneLoaded(Message):
    """An agent's screen (colours only, see hbtui.boxtext), or why it could not be read."""

    def __init__(self, key: BoxKey, pane: str, text: str, error: str = "") -> None:
        super().__init__()
        self.key = key
        self.pane = pane
        self.text = text
        self.error = error
