"""Progress events that long operations emit and both front ends render.

A core operation takes a `Report` callable and calls it with these events;
the CLI turns them into rich progress bars and log lines, the dashboard into
its log pane, progress bars and notifications. The core never formats output.

What a front end acts on travels as data, never as the wording of a message:
`Reserved` says a box's name and port are taken, `Phase.stage` names the
stages a front end shows, `MachineState` names the states. A message's text
is for people; rewording one changes nothing else.

A message or a step's name may quote a box (its stderr, a step it named, a file in its
archive): each is made one plain line (`hbtui.boxtext.line`) as the event is made, so
no front end has to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from hbtui import boxtext


class Stage(StrEnum):
    """The stages of making or loading a box that a front end shows as steps."""

    CHECK = "check"  # an archive is decrypted and checked before anything is made
    CREATE = "create"  # the box's machine is created (or branched)
    RESTORE = "restore"  # an archive's /data is copied into the box
    DONE = "done"  # the box is ready (made, or loaded)


class MachineState:
    """A box's state as rows show it: the engine's word for its machine, or, for a
    box an operation is making (or failed to), the dashboard's."""

    RUNNING = "running"
    PAUSED = "paused"  # its RAM and disks saved by the engine; `resume` goes on from there
    PAUSING = "pausing"  # the engine's word while its pause saves
    STOPPED = "stopped"
    CREATED = "created"  # made, never started
    STARTING = "starting"
    STOPPING = "stopping"  # the dashboard's word while its stop runs
    UNKNOWN = "unknown"  # the engine said nothing
    MISSING = "missing"  # in the registry, but the engine has no such machine
    CREATING = "creating"  # being made, no machine listed yet
    FAILED = "failed"  # making it failed


@dataclass(frozen=True)
class Phase:
    """A new stage of an operation began ("creating machine", "verifying"); `stage` says
    which, for the stages a front end keys on (None: it only informs)."""

    message: str
    stage: Stage | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", boxtext.line(self.message))


@dataclass(frozen=True)
class Reserved:
    """A box's name and port are reserved on `host`: from here on the operation has made
    something, and the box has a row (a refusal before this touched no box)."""

    host: str
    name: str
    port: int


@dataclass(frozen=True)
class LogLine:
    """One line of output from a child process (ANSI colours kept)."""

    text: str
    stream: str = "stdout"


@dataclass(frozen=True)
class Step:
    """A recipe step marker: step `index` of `total` named `name` began."""

    index: int
    total: int
    name: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", boxtext.line(self.name, 200))


@dataclass(frozen=True)
class Transfer:
    """Bytes moved so far; `total` is None when the size is unknown."""

    done: int
    total: int | None
    label: str = ""


@dataclass(frozen=True)
class Notice:
    """Something went wrong but the operation carried on (or rolled back)."""

    message: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "message", boxtext.line(self.message))


Event = Phase | Reserved | LogLine | Step | Transfer | Notice
Report = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """A Report for callers that do not show progress."""
