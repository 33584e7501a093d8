"""What both front ends show of a box: its kind and one `BoxView` row.

A row joins hbtui's registry record (port, provisioning status, last save)
with the engine's machine (state, size); either may be missing, and the
kind says which.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from hbtui import boxtext
from hbtui.config import split_list
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.registry import PROVISIONING, READY, BoxRecord
from hbtui.engine import Machine
from hbtui.events import Event, MachineState

# The kinds of rows `ls` shows.
BOX = "box"  # made by hbtui, machine present
MISSING = "missing"  # in the registry, but the engine has no such machine
ORPHAN = "orphan"  # labelled as hbtui's, but not in the registry
FOREIGN = "foreign"  # not made by hbtui (shown with --all)


@dataclass(frozen=True)
class Busy:
    """Why a box cannot take an operation now: another process holds it for `operation`
    (`pid`), or a holder was killed while the box was quiesced and its services come
    back at `lease_end` (time.time(); `pid` 0), or a killed remake left the box's disk in
    a pack that `repair` makes the machine from."""

    operation: str
    pid: int = 0  # the process holding the box now; 0: none (an interrupted operation's lease)
    lease_end: float = 0.0  # an interrupted quiesce runs out then (0: no lease)
    repair: str = ""  # an interrupted remake kept the box's disk: the command that finishes it

    @property
    def held(self) -> bool:
        """Another process is running `operation` on the box now."""
        return self.pid != 0

    def __str__(self) -> str:
        if self.held:
            return f"{self.operation} (pid {self.pid})"
        if self.repair:
            return f"{self.operation} interrupted: its disk is safe; finish it with: {self.repair}"
        back = datetime.fromtimestamp(self.lease_end).strftime("%H:%M:%S")
        return f"quiesced: {self.operation} was interrupted; services return by {back}"


@dataclass(frozen=True)
class BoxView:
    """One row of `hbtui ls`, as both front ends show it."""

    name: str
    host: str
    kind: str
    state: str
    port: int | None = None
    url: str | None = None
    image: str | None = None
    cpus: int | None = None
    memory_mib: int | None = None
    created: str | None = None
    provisioning: str = ""
    last_save: str = ""
    error: str = ""
    busy: Busy | None = None  # another process's operation on it, or an interrupted one's lease
    base: str = ""  # the base it was made from ("" : the whole recipe ran in it)
    parent: str = ""  # the box it was branched from
    branchable: bool = False  # can be branched at once (started branchable)
    credentials: tuple[str, ...] = ()  # presets whose keys the engine holds for it
    keys_missing: tuple[str, ...] = ()  # of those, the ones with no secret stored
    egress: str = ""  # open | private-blocked | allow-list ("" : unknown, made elsewhere)
    agent_permissions: str = ""  # ask | skip: what its agents may do unasked ("" : unknown)
    repo: str = ""  # the host repository its work came from ("" : made without one)
    branch: str = ""  # its clone's branch, hb/BOX
    ahead: int | None = None  # commits past its seed at its last pull (None: not pulled)

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "busy": str(self.busy) if self.busy else ""}

    @property
    def recipe_done(self) -> bool:
        """Its recipe ran to the end: it has the helper its agents are read with (a box
        whose agents cannot be read is asked about only then)."""
        return self.provisioning == READY

    @property
    def being_made(self) -> bool:
        """Reserved by a live hbtui (`new`, `branch`, `load`) whose machine is not made yet."""
        return self.state == MachineState.MISSING and self.provisioning == PROVISIONING


@dataclass(frozen=True)
class BoxListing:
    """The boxes listed on every host, and the hosts that could not be listed."""

    boxes: list[BoxView]
    errors: dict[str, str]  # host -> why it could not be listed


@dataclass(frozen=True)
class ProvisionLog:
    """A box's last provisioning log: where it is, and its lines as progress events."""

    path: Path
    events: list[Event]


def _iso(ts: int | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def view_of(record: BoxRecord | None, machine: Machine | None, host: Host) -> BoxView:
    if record is not None:
        return BoxView(
            name=record.name,
            host=record.host,
            kind=BOX if machine is not None else MISSING,
            state=machine.state if machine is not None else MISSING,
            port=record.port,
            url=host.url(record.port),
            image=record.image,
            cpus=machine.cpus if machine and machine.cpus else record.cpus,
            memory_mib=machine.memory_mib if machine and machine.memory_mib else record.memory_mib,
            created=record.created,
            provisioning=record.effective_status(),
            last_save=record.last_save,
            # Why it failed: a box still being made has not (its error is what a kill
            # would leave, written ahead). It may quote the box (a step's name, its stderr).
            error=boxtext.line(record.error) if record.effective_status() != PROVISIONING else "",
            base=record.base,
            parent=record.parent,
            branchable=bool(machine and machine.branchable),
            credentials=tuple(split_list(record.credentials)),
            egress=record.egress or "open",
            agent_permissions=record.agent_permissions or "ask",
        )
    if machine is None:
        raise ValueError("a view needs a registry record, a machine, or both")
    port_label = machine.labels.get("hbtui.port", "")
    port = int(port_label) if port_label.isdigit() else None
    return BoxView(
        name=machine.name,
        host=host.name,
        kind=ORPHAN if machine.is_hbtui else FOREIGN,
        state=machine.state,
        port=port,
        url=host.url(port) if port else None,
        image=machine.image,
        cpus=machine.cpus,
        memory_mib=machine.memory_mib,
        created=_iso(machine.created_at),
    )


@dataclass(frozen=True)
class BoxStats:
    """A running box's resource use, as the engine's `machine stats` reported it."""

    cpu_percent: float | None = None  # of one CPU; a box with 4 CPUs can reach 400
    memory_mib: float | None = None  # resident memory of the machine's processes
    memory_limit_mib: float | None = None

    def to_json(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True)
class DetailSection:
    """One titled block of the details view: (label, value) lines, in order."""

    title: str
    fields: list[tuple[str, str]]


@dataclass(frozen=True)
class BoxDetails:
    """Everything known about one box, as `hbtui inspect` and the details view show it.

    A list of sections, so what else a box carries (its base, say) is one more
    section, not a change to every front end.
    """

    view: BoxView
    sections: list[DetailSection]
    engine_record: dict[str, object]  # the engine's raw JSON for the machine ({} if none)
    stats: BoxStats | None = None  # None: not running, or the engine could not say

    def to_json(self) -> dict[str, object]:
        return {
            "box": self.view.to_json(),
            "sections": {s.title: dict(s.fields) for s in self.sections},
            "engine": self.engine_record,
            "stats": self.stats.to_json() if self.stats else None,
        }
