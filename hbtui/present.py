"""How both front ends word and colour the same facts: ages, sizes, states.

Styles are rich style strings, which Textual's Text understands too, so the
CLI's table and the dashboard's table colour a state alike.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from hbtui.events import MachineState

STATE_STYLE = {
    MachineState.RUNNING: "green",
    MachineState.PAUSED: "blue",
    MachineState.PAUSING: "cyan",
    MachineState.STOPPED: "yellow",
    MachineState.CREATED: "cyan",
    MachineState.STARTING: "cyan",
    MachineState.STOPPING: "cyan",
    MachineState.CREATING: "cyan",
    MachineState.FAILED: "bold red",
    MachineState.MISSING: "red",
    "unreachable": "red",
    "orphan": "magenta",
}
# An agent session's status (hbtui.core.agents.sessions.STATUSES): its colour and its mark.
AGENT_STYLE = {
    "needs-you": "bold yellow",
    "working": "cyan",
    "idle": "green",
    "ended": "dim",
    "error": "red",
}
AGENT_ICON = {"needs-you": "●", "working": "◐", "idle": "○", "ended": "·", "error": "✗"}
PROVISION_STYLE = {"ready": "green", "provisioning": "cyan", "failed": "bold red"}


@lru_cache(maxsize=4096)
def _parse_created(created: str) -> datetime | None:
    try:
        return datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None


def age(created: str | None, now: datetime | None = None) -> str:
    """`3d`, `5h`, `12m`, `40s` since an ISO UTC time; "" when there is none."""
    then = _parse_created(created) if created else None
    if then is None:
        return ""
    return elapsed(((now or datetime.now(UTC)) - then).total_seconds())


def elapsed(seconds: float) -> str:
    """`3d`, `5h`, `12m`, `40s`: the largest whole unit."""
    secs = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{max(secs, 0)}s"


def human_bytes(n: float) -> str:
    """`512 B`, `1.5 MiB`, ... up to TiB."""
    unit = "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            break
        n /= 1024
    return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"


def duration(seconds: float) -> str:
    """`m:ss`, or `h:mm:ss` from an hour on."""
    whole = int(seconds)
    if whole >= 3600:
        return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"
    return f"{whole // 60}:{whole % 60:02d}"
