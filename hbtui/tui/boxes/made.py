"""How a new box is told once made: ready, or made and ready with an agent that ended
before it took its task (the box stays; `new --agent` on the CLI says the same)."""

from __future__ import annotations

from dataclasses import dataclass

from hbtui.core.foundation import BoxView
from hbtui.tui.operations import Operation, Told


@dataclass(frozen=True)
class AgentEndedAtStart:
    """A new box made and ready whose agent ended before it took its task: the box is
    told as made (its row, its log), how its agent ended beside it."""

    view: BoxView
    message: str


def made(operation: Operation, result: object) -> Told:
    if isinstance(result, AgentEndedAtStart):
        return Told(result.message, f"{operation.label}: made; its agent ended", 15)
    return Told(f"{operation.label}: done", "", 4)
