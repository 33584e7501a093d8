"""The coding agents in boxes: their sessions, answering them, watching them change."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbtui.core.agents.sessions import (
    ENDED,
    ERROR,
    IDLE,
    NEEDS_YOU,
    NO_AGENT,
    SEND_MAX,
    WORKING,
    AgentBusy,
    AgentSession,
    AgentsGone,
    AgentsUnread,
    BoxAgents,
    Ending,
    box_status,
    in_story_order,
    lead,
)
from hbtui.core.foundation.lazy import later

if TYPE_CHECKING:
    from hbtui.core.agents.lifecycle import Stopped
    from hbtui.core.agents.watch import AgentWatch

__all__ = [
    "ENDED",
    "ERROR",
    "IDLE",
    "NEEDS_YOU",
    "NO_AGENT",
    "SEND_MAX",
    "WORKING",
    "AgentBusy",
    "AgentSession",
    "AgentWatch",
    "AgentsGone",
    "AgentsUnread",
    "BoxAgents",
    "Ending",
    "Stopped",
    "box_status",
    "in_story_order",
    "lead",
]

# These live beside the box operations or the archive format: each loads when first used.
__getattr__ = later(__name__, {"AgentWatch": "watch", "Stopped": "lifecycle"})
