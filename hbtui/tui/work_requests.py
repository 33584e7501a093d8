"""The requests of the work keys that change something (pull, keep), and what their
notification says landed in the host repository (Running shows it when they end)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from hbtui.tui.activity import BoxKey

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from hbtui.core.service import Service
    from hbtui.core.work import PullResult
    from hbtui.events import Report


@dataclass(frozen=True)
class PullRequest:
    name: str
    host: str

    operation: ClassVar[str] = "pull"
    makes: ClassVar[bool] = False

    @property
    def key(self) -> BoxKey:
        return (self.host, self.name)

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.pull(self.name, self.host, report=report)


@dataclass(frozen=True)
class KeepRequest:
    """Keep one box of a try: its work pulled, the try's other boxes removed."""

    name: str
    host: str

    operation: ClassVar[str] = "keep"
    makes: ClassVar[bool] = False

    @property
    def key(self) -> BoxKey:
        return (self.host, self.name)

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.try_keep(self.name, self.host, report=report)


def _pulled(result: PullResult) -> str:
    if not result.refs:
        said = f"{result.box} has no commits since its seed; nothing pulled"
    else:
        said = "\n".join(f"{ref} → {sha[:12]}" for ref, sha in result.refs)
        said += f"\nin {result.repo}"
    if result.uncommitted and not result.wip:
        said += f"\n{result.uncommitted} file(s) uncommitted in the box, not pulled"
    return said


def landed(result: object) -> str:
    """What a pull or keep brought into the host repository, for its notification."""
    from hbtui.core.work import PullResult

    if isinstance(result, PullResult):
        return _pulled(result)
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], PullResult):
        removed = ", ".join(result[1]) or "nothing"
        return f"{_pulled(result[0])}\nremoved {removed}"
    return "done"
