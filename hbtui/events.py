"""Progress events that long operations emit and both front ends render.

A core operation takes a `Report` callable and calls it with these events;
the CLI turns them into rich progress bars and log lines, the dashboard into
its log pane, progress bars and notifications. The core never formats output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Phase:
    """A new stage of an operation began ("creating machine", "verifying")."""

    message: str


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


Event = Phase | LogLine | Step | Transfer | Notice
Report = Callable[[Event], None]


def ignore(_event: Event) -> None:
    """A Report for callers that do not show progress."""
