"""A BoxService with an in-memory listing, for dashboard tests that need fixed data.

Snapshots and the benchmark must not depend on an engine or on the clock, so
this subclass replaces only what talks to the engine (listing, ports, the
lifecycle calls) with a small scripted world; names, progress events and
errors still have the shapes the real core produces.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from hbtui.config import Config
from hbtui.core.boxes import BoxService, BoxView, HostListing
from hbtui.core.names import check_name
from hbtui.core.ports import BUSY, FREE, USED, PortSlot
from hbtui.errors import HbtuiError
from hbtui.events import LogLine, Phase, Report, Step, Transfer, ignore
from hbtui.paths import Paths

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def frozen_clock() -> datetime:
    return NOW


def view(
    name: str,
    port: int,
    *,
    state: str = "running",
    host: str = "local",
    provisioning: str = "ready",
    created: str = "2026-11-29T09:30:00Z",
    error: str = "",
    last_save: str = "",
) -> BoxView:
    return BoxView(
        name=name,
        host=host,
        kind="box",
        state=state,
        port=port,
        url=f"http://127.0.0.1:{port}/",
        image="ubuntu:24.04",
        cpus=2,
        memory_mib=4096,
        created=created,
        provisioning=provisioning,
        error=error,
        last_save=last_save,
    )


def sample_boxes() -> list[BoxView]:
    return [
        view("alpha", 4791, last_save="2026-11-28T18:00:00Z"),
        view("beta", 4795, state="stopped", created="2026-11-27T08:00:00Z"),
        view(
            "gamma",
            4802,
            provisioning="failed",
            error="step 3/6 agent-tools",
            created="2026-11-29T11:58:20Z",
        ),
        view("delta", 4810, host="lab", created="2026-11-20T10:00:00Z"),
    ]


class StaticService(BoxService):
    """BoxService over a list of views instead of an engine."""

    def __init__(
        self,
        root: Path,
        boxes: list[BoxView] | None = None,
        *,
        host_errors: dict[str, str] | None = None,
        step_delay: float = 0.0,
    ) -> None:
        paths = Paths(config_dir=root, data_dir=root, log_dir=root / "logs")
        super().__init__(paths, Config())
        self.boxes = list(boxes if boxes is not None else sample_boxes())
        self.host_errors = dict(host_errors or {})
        self.step_delay = step_delay
        self.calls: list[tuple] = []
        self.list_calls = 0

    async def list_boxes(
        self, *, include_foreign: bool = False, hosts: list[str] | None = None
    ) -> HostListing:
        self.list_calls += 1
        return HostListing(list(self.boxes), dict(self.host_errors))

    async def ports(self, host_name: str = "local") -> list[PortSlot]:
        used = {b.port: b.name for b in self.boxes if b.host == host_name}
        lo, hi = self.config.ports.low, self.config.ports.high
        return [
            PortSlot(p, USED, used[p])
            if p in used
            else PortSlot(p, BUSY if p in (4793, 4850) else FREE)
            for p in range(lo, hi + 1)
        ]

    def _find(self, name: str, host: str) -> int:
        for i, b in enumerate(self.boxes):
            if (b.name, b.host) == (name, host):
                return i
        raise HbtuiError(f"no box named {name!r} (see: hbtui ls)")

    async def new(
        self,
        name: str,
        *,
        host_name: str = "local",
        image=None,
        cpus=None,
        memory_mib=None,
        port=None,
        recipe=None,
        start=True,
        report: Report = ignore,
    ) -> BoxView:
        check_name(name)
        self.calls.append(("new", name, port))
        port = port or next(s.port for s in await self.ports(host_name) if s.state == FREE)
        report(Phase(f"creating machine {name} (port {port})"))
        self.boxes.append(
            view(name, port, provisioning="provisioning", created="2026-11-29T12:00:00Z")
        )
        for i, step in enumerate(("base", "agent-user", "tools"), start=1):
            report(Step(i, 3, step))
            report(LogLine(f"::hbtui:: step {i}/3 {step}"))
            report(LogLine(f"\x1b[32mok\x1b[0m {step} line"))
            await asyncio.sleep(self.step_delay)
        if name.startswith("fail"):
            self.boxes.pop()
            raise HbtuiError(f"provisioning {name} failed at step 3/3 tools (exit status 1)")
        ready = replace(self.boxes[-1], provisioning="ready")
        self.boxes[-1] = ready
        report(Phase(f"{name} is ready at {ready.url}"))
        return ready

    async def start(self, name: str, host_name: str = "local", *, report: Report = ignore):
        i = self._find(name, host_name)
        report(Phase(f"starting {name}"))
        self.boxes[i] = replace(self.boxes[i], state="running")
        return self.boxes[i]

    async def stop(self, name: str, host_name: str = "local", *, report: Report = ignore):
        i = self._find(name, host_name)
        report(Phase(f"stopping {name}"))
        self.boxes[i] = replace(self.boxes[i], state="stopped")
        return self.boxes[i]

    async def remove(self, name: str, host_name: str = "local", *, report: Report = ignore):
        self.boxes.pop(self._find(name, host_name))
        report(Phase(f"removed {name}"))

    async def enter_argv(
        self, name: str, host_name: str = "local", *, report: Report = ignore
    ) -> list[str]:
        self._find(name, host_name)
        return [
            "smolvm",
            "machine",
            "exec",
            "--name",
            name,
            "-it",
            "--",
            "/opt/hermes-box/bin/hb-as-agent",
            "--tmux",
        ]

    async def workload_logs(self, name: str, host_name: str = "local", *, tail=None) -> str:
        return f"\x1b[36mexecutor\x1b[0m listening on 0.0.0.0 for {name}\n"

    async def save(
        self,
        name: str,
        host_name: str = "local",
        *,
        output=None,
        passphrase: bytes,
        verify: bool = True,
        report: Report = ignore,
    ) -> Path:
        self._find(name, host_name)
        await self._transfer("writing archive", report)
        return output or self.paths.default_backups_dir / f"{name}.hbx"

    async def _transfer(self, label: str, report: Report) -> None:
        total = 8 * 1024 * 1024
        for done in range(0, total + 1, total // 8):
            report(Transfer(done, total, label))
            await asyncio.sleep(self.step_delay)

    async def load(
        self,
        archive: Path,
        name: str,
        host_name: str = "local",
        *,
        passphrase: bytes,
        recipe: Path | None = None,
        report: Report = ignore,
    ) -> BoxView:
        check_name(name)
        self.calls.append(("load", archive, name, host_name, passphrase, recipe))
        await self._transfer("checking", report)
        report(Phase(f"creating machine {name}"))
        made = view(name, 4820, created="2026-11-29T12:00:00Z")
        self.boxes.append(made)
        return made

    async def extract(
        self, archive: Path, dest: Path | None = None, *, passphrase: bytes, report: Report = ignore
    ) -> Path:
        """Stands in for `archive_ops.extract`, which works on files without a service."""
        self.calls.append(("extract", archive, dest, passphrase))
        await self._transfer("unpacking", report)
        return dest or archive.with_suffix("")
