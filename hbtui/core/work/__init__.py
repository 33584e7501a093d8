"""Work in and out of boxes: a repository in, its diff and pull, the agent on its task."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbtui.core.foundation.lazy import later

if TYPE_CHECKING:
    from hbtui.core.work.agent import AgentEnded, AgentStart
    from hbtui.core.work.diff import WorkDiff
    from hbtui.core.work.operations import AGENTS, TASK_MAX, check_task
    from hbtui.core.work.pr import PrRequest, PrResult
    from hbtui.core.work.pull import PullResult
    from hbtui.core.work.setup import SetupFailed

__all__ = [
    "AGENTS",
    "TASK_MAX",
    "AgentEnded",
    "AgentStart",
    "PrRequest",
    "PrResult",
    "PullResult",
    "SetupFailed",
    "WorkDiff",
    "check_task",
]

# These live beside the box operations or the archive format: each loads when first used.
__getattr__ = later(
    __name__,
    {
        "AGENTS": "operations",
        "AgentEnded": "agent",
        "AgentStart": "agent",
        "PrRequest": "pr",
        "PrResult": "pr",
        "PullResult": "pull",
        "SetupFailed": "setup",
        "TASK_MAX": "operations",
        "WorkDiff": "diff",
        "check_task": "operations",
    },
)
