"""What each cell of the box table says: the columns, and each row's text.

Pure functions of a box, its activity, the time and its live figures: the table
(box_table.py) decides only where the text goes and when a row is drawn again.
"""

from __future__ import annotations

from datetime import datetime

from rich.text import Text

from hbtui import boxtext
from hbtui.core.agents import BoxAgents
from hbtui.core.foundation import BOX, MISSING, BoxStats, BoxView
from hbtui.events import MachineState
from hbtui.present import AGENT_ICON, AGENT_STYLE, PROVISION_STYLE, STATE_STYLE, age, elapsed
from hbtui.tui.activity import Activity
from hbtui.tui.agents.state import lead
from hbtui.tui.requests import PauseRequest, ResumeRequest, StartRequest, StopRequest

COLUMNS = (
    ("name", "Box"),
    ("host", "Host"),
    ("state", "State"),
    ("port", "Port"),
    ("agent", "Agent"),
    ("branch", "Branch"),
    ("url", "URL"),
    ("image", "Image"),
    ("cpus", "CPUs"),
    ("mem", "Memory"),
    ("live", "CPU · Mem"),
    ("keys", "Keys"),
    ("prov", "Provisioning"),
    ("age", "Age"),
)

BAR_WIDTH = 8

# What a row's state says while the dashboard's own start, stop, pause or resume runs.
PASSING = {
    StartRequest.operation: MachineState.STARTING,
    StopRequest.operation: MachineState.STOPPING,
    PauseRequest.operation: MachineState.PAUSING,
    ResumeRequest.operation: MachineState.STARTING,
}


def progress_text(activity: Activity) -> Text:
    """A text progress bar for the row of a box whose recipe is running."""
    step = activity.step
    if step is None or step.total <= 0:
        return Text(activity.phase, style="cyan")
    filled = round(BAR_WIDTH * (step.index - 1) / step.total)
    text = Text("━" * filled, style="cyan")
    text.append("━" * (BAR_WIDTH - filled), style="grey35")
    text.append(f" {step.index}/{step.total} {step.name}", style="cyan")
    return text


def url_style(view: BoxView) -> str:
    """A URL that answers is underlined; one of a box that is not running is dimmed."""
    if not view.url:
        return ""
    return "underline" if view.state == MachineState.RUNNING else "dim"


def usage_text(usage: BoxStats | None) -> Text:
    """A running box's CPU and memory, as the engine last measured them."""
    if usage is None:
        return Text("")
    cpu = "  ?%" if usage.cpu_percent is None else f"{usage.cpu_percent:3.0f}%"
    memory = "    ?" if usage.memory_mib is None else f"{usage.memory_mib:5.0f}"
    return Text(f"{cpu} {memory} MiB", justify="right")


# How wide a box's figures are (`  3%   512 MiB`; wider only past 99,999 MiB).
USAGE_WIDTH = usage_text(BoxStats(0.0, 0.0)).cell_len


def keys_text(view: BoxView) -> Text:
    """🔒 when every key the box uses is held by the engine (its secret stored), ⚠ with
    the ones whose secret is missing (the box will not start), nothing without keys."""
    if view.keys_missing:
        return Text(f"⚠ {','.join(view.keys_missing)}", style="yellow")
    if view.credentials:
        return Text(f"🔒 {len(view.credentials)}", style="green")
    return Text("")


def branch_text(view: BoxView) -> Text:
    """The branch of the box's clone (`new --repo`), and the commits its last pull found
    past the seed (`hb/b1 ↑3`); nothing for a box without a repository."""
    text = Text(view.branch)
    if view.ahead:
        text.append(f" ↑{view.ahead}", style="dim")
    return text


def agent_text(row: BoxAgents, now: datetime) -> Text:
    """The box's leading agent session: its mark, status and how long it has been so
    (`● needs-you 4s`), `+2` for more sessions; why the box could not be asked, in red."""
    if row.error:
        return Text(f"✗ {boxtext.line(row.error)}", style="red")
    session = lead(row)
    if session is None:
        return Text("")
    status = session.status
    text = Text(f"{AGENT_ICON.get(status, '?')} {status}", style=AGENT_STYLE.get(status, ""))
    if session.since is not None:
        text.append(f" {elapsed(max(0.0, now.timestamp() - session.since))}", style="dim")
    if len(row.sessions) > 1:
        text.append(f" +{len(row.sessions) - 1}", style="dim")
    return text


def cells(
    view: BoxView,
    activity: Activity | None,
    now: datetime,
    usage: BoxStats | None = None,
    agent: Text | None = None,
) -> tuple[Text, ...]:
    shown_state = view.state
    if activity is not None and activity.making:  # listed before its machine exists: "missing"
        shown_state = MachineState.CREATING
    elif activity is not None and activity.running and activity.operation in PASSING:
        shown_state = PASSING[activity.operation]
    elif view.being_made:
        shown_state = MachineState.CREATING  # being made (by this or another hbtui), no machine yet
    state = shown_state if view.kind in (BOX, MISSING) else f"{shown_state} ({view.kind})"
    if activity is not None and activity.running:
        prov = progress_text(activity)
    elif (
        activity is not None
        and (failure := activity.standing_failure(view.state, view.provisioning)) is not None
    ):
        prov = Text(f"✗ {activity.operation}: {failure.text}", style="bold red")
    else:
        # The error names the step that failed, as the box's recipe called it.
        label = view.provisioning + (f": {boxtext.line(view.error)}" if view.error else "")
        prov = Text(label, style=PROVISION_STYLE.get(view.provisioning, ""))
        if view.busy:  # another process's operation, or what an interrupted one left
            prov.append(f" · {view.busy}", style="yellow")
    return (
        Text(view.name, style="bold"),
        Text(view.host),
        Text(state, style=STATE_STYLE.get(shown_state, STATE_STYLE.get(view.kind, ""))),
        Text(str(view.port or ""), justify="right"),
        agent or Text(""),
        branch_text(view),
        Text(view.url or "", style=url_style(view)),
        Text(view.image or ""),
        Text(str(view.cpus or ""), justify="right"),
        Text(f"{view.memory_mib} MiB" if view.memory_mib else "", justify="right"),
        usage_text(usage if view.state == MachineState.RUNNING else None),
        keys_text(view),
        prov,
        Text(age(view.created, now), justify="right"),
    )


def matches(view: BoxView, needle: str) -> bool:
    if not needle:
        return True
    hay = " ".join(
        (
            view.name,
            view.host,
            view.state,
            view.kind,
            view.image or "",
            view.provisioning,
            str(view.port or ""),
            view.branch,
        )
    ).lower()
    return all(word in hay for word in needle.lower().split())
