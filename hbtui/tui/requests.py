"""What a dialog or a key asks the dashboard to run: one Service call for one box.

A request knows the operation's word, whether it makes its box, the box it concerns and
the Service call that runs it; the App only starts it (`HbtuiApp.run_request`). Requests
that name a box by host and name share `BoxRequest`; those carrying a spec take their box
from it (`SpecRequest`). Requests with more than a box live beside their dialogs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from hbtui.tui.activity import BoxKey

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from hbtui.core.service import Service
    from hbtui.events import Report


class Request(Protocol):
    """The operation it starts, the box it concerns (None: no box), and the call."""

    operation: ClassVar[str]  # "new", "save", ...: the word the log and notifications use
    makes: ClassVar[bool]  # it makes its box (new, branch, load)

    @property
    def key(self) -> BoxKey | None: ...

    @property
    def holds(self) -> BoxKey | None:
        """Another box the operation holds while it runs (a branch's source), or None."""
        ...

    def call(self, service: Service, report: Report) -> Awaitable[object]: ...


class _Boxed(Protocol):
    @property
    def host(self) -> str: ...

    @property
    def name(self) -> str: ...


class SpecRequest:
    """A request whose box is its spec's (host, name)."""

    spec: _Boxed
    makes: ClassVar[bool] = False

    @property
    def key(self) -> BoxKey:
        return (self.spec.host, self.spec.name)

    @property
    def holds(self) -> BoxKey | None:
        return None


@dataclass(frozen=True)
class BoxRequest:
    """A request that needs only the box's name and host."""

    name: str
    host: str

    operation: ClassVar[str]
    makes: ClassVar[bool] = False

    @property
    def key(self) -> BoxKey:
        return (self.host, self.name)

    @property
    def holds(self) -> BoxKey | None:
        return None


@dataclass(frozen=True)
class StartRequest(BoxRequest):
    operation: ClassVar[str] = "start"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.boxes.start(self.name, self.host, report=report)


@dataclass(frozen=True)
class StopRequest(BoxRequest):
    operation: ClassVar[str] = "stop"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.boxes.stop(self.name, self.host, report=report)


@dataclass(frozen=True)
class PauseRequest(BoxRequest):
    operation: ClassVar[str] = "pause"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.boxes.pause(self.name, self.host, report=report)


@dataclass(frozen=True)
class ResumeRequest(BoxRequest):
    operation: ClassVar[str] = "resume"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.boxes.resume(self.name, self.host, report=report)


@dataclass(frozen=True)
class RemoveRequest(BoxRequest):
    operation: ClassVar[str] = "remove"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.remove(self.name, self.host, report=report)


@dataclass(frozen=True)
class PullRequest(BoxRequest):
    operation: ClassVar[str] = "pull"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.work.pull(self.name, self.host, report=report)


@dataclass(frozen=True)
class LandRequest(BoxRequest):
    """`hbtui pr`: the box's work pulled, its branch pushed, a pull request opened."""

    operation: ClassVar[str] = "pr"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.work.pr(self.name, self.host, report=report)


@dataclass(frozen=True)
class KeepRequest(BoxRequest):
    """Keep one box of a try: its work pulled, the try's other boxes removed."""

    operation: ClassVar[str] = "keep"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.tries.keep(self.name, self.host, report=report)
