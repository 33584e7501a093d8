"""Typed records parsed from `smolvm machine ls --json`.

The engine's JSON has about 40 keys and grows between versions; we keep the
ones hbtui uses and the raw dict for the rest, tolerating unknown keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hbtui.events import MachineState

HBTUI_LABEL = "hbtui"  # every machine hbtui creates carries hbtui=1


@dataclass(frozen=True)
class Machine:
    name: str
    state: str
    pid: int | None = None
    cpus: int | None = None
    memory_mib: int | None = None
    image: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    port_count: int = 0
    network: bool = False
    created_at: int | None = None
    cmd: list[str] = field(default_factory=list)
    branchable: bool = False  # running so that `machine branch` can branch it
    parent_machine: str | None = None  # the machine this one was branched from
    storage_gb: int | None = None  # its disks' sizes (GiB), when set: None is the engine's
    overlay_gb: int | None = None  # default
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def is_hbtui(self) -> bool:
        return self.labels.get(HBTUI_LABEL) == "1"

    @property
    def running(self) -> bool:
        return self.state == MachineState.RUNNING

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Machine:
        def opt_int(key: str) -> int | None:
            v = d.get(key)
            return v if isinstance(v, int) and not isinstance(v, bool) else None

        labels = d.get("labels") or {}
        ports = d.get("ports")
        return cls(
            name=str(d["name"]),
            state=str(d.get("state") or MachineState.UNKNOWN),
            pid=opt_int("pid"),
            cpus=opt_int("cpus"),
            memory_mib=opt_int("memory_mib"),
            image=d.get("image") if isinstance(d.get("image"), str) else None,
            labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {},
            port_count=ports if isinstance(ports, int) else len(ports or []),
            network=bool(d.get("network")),
            created_at=opt_int("created_at"),
            cmd=[str(c) for c in d.get("cmd") or []],
            branchable=d.get("branchable") is True,
            parent_machine=d.get("parent_machine")
            if isinstance(d.get("parent_machine"), str)
            else None,
            storage_gb=opt_int("storage_gb"),
            overlay_gb=opt_int("overlay_gb"),
            raw=dict(d),
        )


@dataclass(frozen=True)
class ExecResult:
    returncode: int
    stdout: bytes
    stderr: bytes
    dropped: int = 0  # bytes of stdout left out before what was kept (a `tail` bound)

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace")


@dataclass(frozen=True)
class MachineSpec:
    """Everything `machine create` needs for one box."""

    name: str
    image: str  # empty: none, the engine's own small guest (doctor's probe)
    cpus: int
    memory_mib: int
    ports: tuple[tuple[int, int], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    network: bool = True
    workload: tuple[str, ...] = ()
    # A packed machine (`pack create --from-vm`) to make this one from, instead of `image`.
    from_pack: Path | None = None
    # `--credential NAME=ENV_VAR@HOST[,HOST...][:body][:set-header=HEADER]` bindings: the
    # guest sees a placeholder; the engine puts the value in on HTTPS to those hosts.
    credentials: tuple[str, ...] = ()
    block_private: bool = False  # no LAN, cloud metadata or host loopback; internet open
    allow_hosts: tuple[str, ...] = ()  # an allow list of host patterns (`name`, `*.domain`)
