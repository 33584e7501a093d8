"""`FakeService`: the Service surface the dashboard uses, over in-memory boxes.

Snapshots, Pilot tests and the benchmark must not depend on an engine or on
the clock, so this stands in for `hbtui.core.service.Service` in its shape: the
Service's own methods, and a fake of each feature object (`boxes`, `archives`,
`agents`, ...). It is not a subclass: tests/tui/test_tui.py checks that every
method here has the real one's signature, feature by feature. Boxes live in a
list (`views`), operations report scripted progress events with the shapes the
real core produces, a cancelled operation rolls back as the core does, and every
call is recorded in `calls` (under the name the Service's method had before its
feature objects, as the tests read them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from hbtui.archive.errors import WrongPassphrase
from hbtui.config import Config
from hbtui.core.agents.sessions import AgentSession
from hbtui.core.archives.backups import ArchiveEntry
from hbtui.core.boxes.forward import BoxNotRunning, BoxStopped
from hbtui.core.boxes.listener import HostPortTaken
from hbtui.core.foundation.basebook import Base, NewPlan
from hbtui.core.foundation.forwardbook import Forwarded, check_port
from hbtui.core.foundation.git import RepoSeed, split_repo_ref
from hbtui.core.foundation.hosts import WebAccess
from hbtui.core.foundation.ports import BUSY, FREE, USED, PortSlot
from hbtui.core.foundation.recipe import check_recipe, parse_marker
from hbtui.core.foundation.specs import LoadSpec, NewSpec, SaveSpec
from hbtui.core.foundation.views import (
    BOX,
    BoxDetails,
    BoxListing,
    BoxStats,
    BoxView,
    DetailSection,
    ProvisionLog,
)
from hbtui.core.keys.credentials import BUILT_IN, Preset
from hbtui.core.keys.secrets import SecretInfo
from hbtui.core.tries.book import CheckResult, TryRecord
from hbtui.core.tries.operations import TryRow
from hbtui.core.work.agent import ENDED, AgentEnded, AgentStart
from hbtui.core.work.book import BoxWork, WorkError, WorkRecord
from hbtui.core.work.diff import Commit, FileChange, WorkDiff
from hbtui.core.work.pr import PrRequest, PrResult
from hbtui.core.work.pull import PullResult
from hbtui.core.work.setup import SetupFailed
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import (
    Event,
    LogLine,
    Notice,
    Phase,
    Report,
    Reserved,
    Stage,
    Step,
    Transfer,
    ignore,
)
from hbtui.names import LOCAL, check_name

from support.tui_fake_agents import FakeAgents

if TYPE_CHECKING:
    from hbtui.core.boxes.forward import BoxForwards

NOW = datetime(2026, 11, 29, 12, 0, 0, tzinfo=UTC)


def frozen_clock() -> datetime:
    return NOW


def view(
    name: str,
    port: int,
    *,
    state: str = "running",
    host: str = LOCAL,
    provisioning: str = "ready",
    created: str = "2026-11-29T09:30:00Z",
    error: str = "",
    last_save: str = "",
) -> BoxView:
    return BoxView(
        name=name,
        host=host,
        kind=BOX,
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


async def _nothing() -> None:
    return None


class FakeService:
    """In-memory boxes behind the Service the dashboard calls: its own spanning methods
    (new, branch, remove, close) and a fake of each feature object it reaches."""

    def __init__(
        self,
        boxes: list[BoxView] | None = None,
        *,
        host_errors: dict[str, str] | None = None,
        step_delay: float = 0.0,
    ) -> None:
        self.config = Config()
        self.views = list(boxes if boxes is not None else sample_boxes())
        self.host_errors = dict(host_errors or {})
        self.step_delay = step_delay  # seconds between scripted progress events
        # A new box's steps, and a transfer after its first MiB, last until cancelled: a
        # test that cancels one needs it still running however loaded the machine is
        # (step_delay still times the rollback).
        self.stalled = False
        # Set to an Event, a rollback waits for it: a test sees the app wait for it.
        self.rollback_gate: asyncio.Event | None = None
        self.broken: dict[str, str] = {}  # method name -> the RuntimeError it raises
        self.provision_logs: dict[tuple[str, str], list[str]] = {}  # (host, name) -> lines
        self.calls: list[tuple[Any, ...]] = []
        self.list_calls = 0
        self.closed_forwards: list[str] = []
        self.forwards: list[Forwarded] = []  # the running port forwards, of every process
        self.taken_host_ports: set[int] = set()  # host ports a forward cannot listen on
        self.box_stopped: dict[tuple[str, str], asyncio.Event] = {}  # ends its forwards
        self.usage: dict[str, list[tuple[float, float]]] = {}  # name -> (CPU %, MiB) per call
        self.stats_calls = 0
        self.recipe = Path("/opt/hbtui/recipe")  # the configured recipe, as resolved
        self.backups = Path("/backups")
        self.archive_list: list[ArchiveEntry] = []  # the backups folder, newest first
        self.last: Path | None = None  # the archive picked last
        self.new_specs: dict[str, NewSpec] = {}  # box -> what `new` was asked for
        self.passphrase: bytes | None = None  # what opens the archives (None: anything)
        self.plan = NewPlan(None, "full provisioning: no base of ubuntu:24.04 for this recipe")
        self.stored_secrets: list[str] = ["anthropic"]
        # A box made with a repository runs its setup (None: the repository has none),
        # which prints these lines, and fails once the box is made when `setup_fails`.
        self.setup_lines: list[str] | None = None
        self.setup_fails = False
        self.branch_setups: dict[str, bool] = {}  # branch -> whether its setup was to run
        self.tracked: set[str] = set()  # files git tracks in every repository (not to --copy)
        # The reads a dialog makes (new_plan, secrets, ...): (method, on the event loop's
        # thread?), so a test sees what runs on each key and what runs before a paint.
        self.reads: list[tuple[str, bool]] = []
        self.base_list: list[Base] = []
        self.diffs: dict[tuple[str, str], WorkDiff] = {}  # (host, box) -> its work (new --repo)
        self.more_repos: dict[tuple[str, str], tuple[str, ...]] = {}  # clones past the first
        self.gh_url = ""  # the pull request `pr` opens ("": gh is not installed)
        self.try_records: dict[tuple[str, str], TryRecord] = {}  # (host, try name) -> the try
        self.agent_status: dict[str, str] = {}  # box -> its agent's status (default idle)
        self.checks_gate: asyncio.Event | None = None  # try_rows waits for it (checks running)
        # (host, box) -> its sessions; a running box not here has none
        self.agent_sessions: dict[tuple[str, str], list[AgentSession]] = {}
        self.agent_errors: dict[tuple[str, str], str] = {}  # (host, box) -> why it fails
        self.panes: dict[tuple[str, str, str], str] = {}  # (host, box, pane) -> its screen
        self.agents_calls = 0
        self.pane_asks: list[tuple[str, str, str]] = []  # (host, box, pane) per capture
        # (host, box, session, decision, what it asked for) of each request decided
        self.decided: list[tuple[str, str, str, str, str]] = []
        # The feature objects, as the real Service composes them.
        self.boxes = FakeBoxes(self)
        self.bases = FakeBases(self)
        self.archives = FakeArchives(self)
        self.secrets = FakeSecrets(self)
        self.hosts = FakeHosts(self)
        self.agents = FakeAgents(self)
        self.work = FakeWork(self)
        self.tries = FakeTries(self)

    def _read(self, method: str) -> None:
        self.reads.append((method, threading.current_thread() is threading.main_thread()))

    def _called(self, *call: Any) -> None:
        self.calls.append(call)
        if call[0] in self.broken:
            raise RuntimeError(self.broken[call[0]])

    def _find(self, name: str, host: str) -> int:
        for i, b in enumerate(self.views):
            if (b.name, b.host) == (name, host):
                return i
        raise HbtuiError(f"no box named {name!r} (see: hbtui ls)")

    async def _pause(self) -> None:
        await asyncio.sleep(self.step_delay)

    def _work_of(self, name: str, host: str) -> WorkDiff:
        """The box's work; a WorkError for a box made without a repository."""
        self._find(name, host)
        work = self.diffs.get((host, name))
        if work is None:
            raise WorkError(
                f"box {name} was not made with a repository (hbtui new {name} --repo PATH)"
            )
        return work

    async def close(self) -> None:
        self._called("close")

    async def new(
        self, spec: NewSpec, *, report: Report = ignore, wait_agent: bool = True
    ) -> BoxView:
        name, host = spec.name, spec.host
        check_name(name)
        self._called("new", name, host, spec.port)
        self.new_specs[name] = spec
        if any((b.name, b.host) == (name, host) for b in self.views):  # before anything is made
            raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
        port = spec.port or next(s.port for s in await self.boxes.ports(host) if s.state == FREE)
        report(Reserved(host, name, port))
        report(Phase(f"creating machine {name} (port {port})", Stage.CREATE))
        self.views.append(
            view(name, port, host=host, provisioning="provisioning", created="2026-11-29T12:00:00Z")
        )
        try:
            for i, step in enumerate(("base", "agent-user", "tools"), start=1):
                report(Step(i, 3, step))
                report(LogLine(f"\x1b[32mok\x1b[0m {step} line"))
                if self.stalled:
                    await asyncio.Event().wait()
                await self._pause()
            if name.startswith("fail"):
                raise HbtuiError(f"provisioning {name} failed at step 3/3 tools (exit status 1)")
            if spec.work is not None and spec.work.setup and self.setup_lines is not None:
                report(Phase(f"running the repository's .hbtui/setup.sh in {name}"))
                for line in self.setup_lines:
                    report(LogLine(line))
        except BaseException as exc:
            await asyncio.shield(self._rollback(name, host, report))
            if isinstance(exc, asyncio.CancelledError):
                raise Cancelled(f"cancelled: box {name!r} was rolled back") from None
            raise
        i = self._find(name, host)
        self.views[i] = replace(self.views[i], provisioning="ready")
        report(Phase(f"{name} is ready at {self.views[i].url}", Stage.DONE))
        if spec.work is not None and spec.work.setup and self.setup_fails:
            last = " | ".join((self.setup_lines or [])[-3:])
            raise SetupFailed(
                f"the setup .hbtui/setup.sh in box {name} failed (exit status 1); its last "
                f"lines: {last}; the box stays, made with its clone: hbtui enter {name}"
            )
        if spec.work and spec.work.agent and name.startswith("ends"):  # as Service.new says it
            ended = AgentEnded(AgentStart(name, spec.work.agent, ENDED, 0.4, "", 1, "bad key"))
            ended.view = self.views[i]
            raise ended
        return self.views[i]

    async def _rollback(self, name: str, host: str, report: Report) -> None:
        report(Notice(f"rolling back {name}"))
        await self._pause()
        if self.rollback_gate is not None:
            await self.rollback_gate.wait()
        self.views = [b for b in self.views if (b.name, b.host) != (name, host)]
        self.calls.append(("rolled back", name, host))

    async def branch(
        self,
        source: str,
        name: str,
        host: str = LOCAL,
        *,
        port: int | None = None,
        branchable: bool | None = None,
        setup: bool = True,
        report: Report = ignore,
    ) -> BoxView:
        check_name(name)
        self._called("branch", source, name, host, port)
        self.branch_setups[name] = setup
        src = self.views[self._find(source, host)]
        if any((b.name, b.host) == (name, host) for b in self.views):
            raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
        port = port or next(s.port for s in await self.boxes.ports(host) if s.state == FREE)
        report(Reserved(host, name, port))
        report(Phase(f"branching {source} into {name} (port {port})", Stage.CREATE))
        await self._pause()
        child = replace(src, name=name, port=port, url=f"http://127.0.0.1:{port}/", parent=source)
        self.views.append(child)
        report(Phase(f"{name} is ready at {child.url}", Stage.DONE))
        return child

    async def remove(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        self._called("remove", name, host)
        gone = self.views.pop(self._find(name, host))
        report(Phase(f"removed {name}"))
        return gone


class FakeBoxes:
    """`service.boxes` over the fake's list of views."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    async def listing(
        self, *, include_foreign: bool = False, hosts: list[str] | None = None
    ) -> BoxListing:
        fake = self.fake
        fake.list_calls += 1
        if "list_boxes" in fake.broken:
            raise RuntimeError(fake.broken["list_boxes"])
        return BoxListing(list(fake.views), dict(fake.host_errors))

    async def details(self, name: str, host: str = LOCAL) -> BoxDetails:
        self.fake._called("details", name, host)
        box = self.fake.views[self.fake._find(name, host)]
        sections = [
            DetailSection("Box", [("name", box.name), ("host", box.host), ("state", box.state)]),
            DetailSection("Resources", [("image", box.image or ""), ("CPUs", str(box.cpus))]),
            DetailSection("Network", [("port", str(box.port)), ("URL", box.url or "")]),
            DetailSection(
                "Forwards",
                [
                    (
                        f"port {f.box_port}",
                        f"{f.url} ({'this hbtui' if f.mine else f'pid {f.pid}'})",
                    )
                    for f in self.forward(name, host).running()
                ]
                or [("none", f"hbtui forward {name} PORT")],
            ),
            DetailSection("Labels", [("hbtui", "1"), ("hbtui.port", str(box.port))]),
            DetailSection(
                "Recipe",
                [
                    ("made with version", "5699fbee178d"),
                    ("configured recipe", str(self.fake.recipe)),
                    ("its version", "5699fbee178d"),
                ],
            ),
            DetailSection("Last save", [("when", box.last_save or "never")]),
            DetailSection("Logs", [("provisioning log", f"/logs/provision/{name}.log")]),
        ]
        running = box.state == "running"
        stats = (await self.stats([name], host)).get(name) if running else None
        return BoxDetails(box, sections, {"name": name, "state": box.state}, stats)

    async def stats(self, names: list[str], host: str = LOCAL) -> dict[str, BoxStats]:
        """Each running box's next scripted figure (`usage`), else a steady 12.5% / 300 MiB."""
        fake = self.fake
        fake._called("stats", tuple(names), host)
        found = {}
        boxes = {b.name: b for b in fake.views if b.host == host}  # 500 boxes in the bench
        for name in names:
            box = boxes.get(name)
            if box is None:
                raise HbtuiError(f"no box named {name!r} (see: hbtui ls)")
            if box.state != "running":
                continue
            figures = fake.usage.get(name) or [(12.5, 300.0)]
            cpu, memory = figures[fake.stats_calls % len(figures)]
            found[name] = BoxStats(cpu, memory, float(box.memory_mib or 0))
        fake.stats_calls += 1
        return found

    async def ports(self, host: str = LOCAL) -> list[PortSlot]:
        fake = self.fake
        fake._called("ports", host)
        used = {b.port: b.name for b in fake.views if b.host == host}
        lo, hi = fake.config.ports.low, fake.config.ports.high
        return [
            PortSlot(p, USED, used[p])
            if p in used
            else PortSlot(p, BUSY if p in (4793, 4850) else FREE)
            for p in range(lo, hi + 1)
        ]

    async def start(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        fake = self.fake
        fake._called("start", name, host)
        i = fake._find(name, host)
        report(Phase(f"starting {name}"))
        fake.views[i] = replace(fake.views[i], state="running")
        return fake.views[i]

    async def stop(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        fake = self.fake
        fake._called("stop", name, host)
        i = fake._find(name, host)
        report(Phase(f"stopping {name}"))
        fake.views[i] = replace(fake.views[i], state="stopped")
        fake.box_stopped.pop((host, name), asyncio.Event()).set()
        return fake.views[i]

    async def pause(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        fake = self.fake
        fake._called("pause", name, host)
        i = fake._find(name, host)
        report(Phase(f"pausing {name}"))
        fake.views[i] = replace(fake.views[i], state="paused")
        return fake.views[i]

    async def resume(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        fake = self.fake
        fake._called("resume", name, host)
        i = fake._find(name, host)
        report(Phase(f"resuming {name}"))
        fake.views[i] = replace(fake.views[i], state="running")
        return fake.views[i]

    async def enter_argv(
        self, name: str, host: str = LOCAL, *, report: Report = ignore
    ) -> list[str]:
        self.fake._called("enter_argv", name, host)
        self.fake._find(name, host)
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

    async def web(self, name: str, host: str = LOCAL) -> WebAccess:
        """A local box's own URL; a forward on a fresh port for a remote one."""
        fake = self.fake
        fake._called("web", name, host)
        port = fake.views[fake._find(name, host)].port
        if host == LOCAL:
            return WebAccess(f"http://127.0.0.1:{port}/", _nothing)
        forwards = sum(c[0] == "web" and c[2] != LOCAL for c in fake.calls)

        async def close() -> None:
            fake.closed_forwards.append(name)

        return WebAccess(f"http://127.0.0.1:{40000 + forwards}/", close, forwarded=True)

    def forward(self, name: str, host: str = LOCAL) -> BoxForwards:
        self.fake._find(name, host)
        return FakeForwards(self.fake, name, host)  # type: ignore[return-value]

    async def workload_logs(self, name: str, host: str = LOCAL, *, tail: int | None = None) -> str:
        self.fake._called("workload_logs", name, host)
        return f"\x1b[36mexecutor\x1b[0m listening on 0.0.0.0 for {name}\n"

    async def provision_log(
        self, name: str, host: str = LOCAL, *, tail: int | None = None
    ) -> ProvisionLog | None:
        self.fake._called("provision_log", name, host)
        lines = self.fake.provision_logs.get((host, name))
        if lines is None:
            return None
        events: list[Event] = []
        for line in lines[-tail:] if tail else lines:  # read as the core reads its log
            step = parse_marker(line)
            events.append(step if step is not None else LogLine(line))
        return ProvisionLog(Path(f"/logs/{name}-20261129T093000Z.log"), events)

    def plan(
        self,
        *,
        host: str = LOCAL,
        image: str | None = None,
        recipe: Path | None = None,
        use_base: bool = True,
    ) -> NewPlan:
        self.fake._read("new_plan")
        if not use_base:
            return NewPlan(None, "full provisioning: bases are not used for this box")
        return self.fake.plan

    def recipe_dir(self, recipe: Path | None = None) -> Path:
        """The configured recipe, or a folder checked as the core checks it."""
        self.fake._read("recipe_dir")
        configured = self.fake.recipe
        return configured if recipe in (None, configured) else check_recipe(recipe)


class FakeForwards:
    """`service.boxes.forward(name, host)`: forwards that listen nowhere, kept in the fake's
    `forwards` (as the forward book keeps them), ended by the box's stop."""

    def __init__(self, fake: FakeService, name: str, host: str) -> None:
        self.fake = fake
        self.name = name
        self.host = host

    def running(self) -> list[Forwarded]:
        return [f for f in self.fake.forwards if (f.box, f.host) == (self.name, self.host)]

    @contextlib.asynccontextmanager
    async def open(
        self, ports: Sequence[int], *, local_port: int | None = None
    ) -> AsyncIterator[FakeForwarding]:
        fake = self.fake
        fake._called("forward", self.name, self.host, tuple(ports), local_port)
        for port in ports:
            check_port(port)
        box = fake.views[fake._find(self.name, self.host)]
        if box.state != "running":
            raise BoxNotRunning(f"box {self.name} is not running ({box.state}): start it first")
        if local_port in fake.taken_host_ports:
            raise HostPortTaken(f"port {local_port} on 127.0.0.1 is taken on this machine")
        made = [Forwarded(self.name, self.host, p, local_port or p, os.getpid()) for p in ports]
        stopped = fake.box_stopped.setdefault((self.host, self.name), asyncio.Event())
        fake.forwards += made
        try:
            yield FakeForwarding(tuple(made), stopped, self.name)
        finally:
            fake.forwards = [f for f in fake.forwards if f not in made]
            fake.calls.append(("forward closed", self.name, tuple(ports)))


class FakeForwarding:
    def __init__(self, forwards: tuple[Forwarded, ...], stopped: asyncio.Event, name: str):
        self.forwards = forwards
        self._stopped = stopped
        self._name = name

    async def wait(self) -> NoReturn:
        await self._stopped.wait()
        raise BoxStopped(f"box {self._name} is no longer running (stopped): its forward ended")


class FakeBases:
    """`service.bases`: the fake's list of bases."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    def listing(self, host: str | None = None) -> list[Base]:
        return [b for b in self.fake.base_list if host is None or b.host == host]


class FakeSecrets:
    """`service.secrets`: the built-in presets, and the names stored."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    def presets(self) -> list[Preset]:
        self.fake._read("credential_presets")
        return sorted(BUILT_IN.values(), key=lambda p: p.name)

    def listing(self) -> list[SecretInfo]:
        self.fake._read("secrets")
        return [SecretInfo(n, "file", "2026-11-29T12:00:00Z") for n in self.fake.stored_secrets]


class FakeHosts:
    """`service.hosts`: this machine and the config's hosts."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    def names(self) -> list[str]:
        return [LOCAL, *sorted(self.fake.config.hosts)]


class FakeArchives:
    """`service.archives` over the fake's backups folder (`archive_list`)."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    def folder(self) -> Path:
        return self.fake.backups

    def listing(self) -> list[ArchiveEntry]:
        self.fake._called("list_archives")
        return list(self.fake.archive_list)

    def resolve(self, text: str) -> Path:
        in_backups = self.fake.backups / text
        if any(e.path == in_backups for e in self.fake.archive_list):
            return in_backups
        return Path(text).expanduser().absolute()

    def last(self) -> Path | None:
        return self.fake.last

    def remember(self, archive: Path) -> None:
        self.fake._called("remember_archive", archive)
        self.fake.last = archive

    def kind(self, archive: Path, *, hbx_only: bool = False) -> str:
        """The listed archives, and any existing *.hbx; the real one reads the file's header."""
        self.fake._called("archive_kind", archive)
        listed = next((e for e in self.fake.archive_list if e.path == archive), None)
        if listed is not None:
            return listed.kind
        if not archive.is_file():
            raise UsageError(f"no such archive: {archive}")
        if archive.suffix != ".hbx":
            raise UsageError(
                f"{archive} is neither an hbtui archive (.hbx) nor an old *.tar.gz.gpg backup"
            )
        return "hbx"

    def _open(self, passphrase: bytes) -> None:
        """The archive's key block read, before anything is made (as the core does)."""
        if self.fake.passphrase is not None and passphrase != self.fake.passphrase:
            raise WrongPassphrase("wrong passphrase (or the archive's key block is damaged)")

    async def _transfer(self, label: str, report: Report) -> None:
        total = 8 * 1024 * 1024
        for done in range(0, total + 1, total // 8):
            report(Transfer(done, total, label))
            if self.fake.stalled and done:
                await asyncio.Event().wait()
            await self.fake._pause()

    def output_problem(self, output: Path) -> str | None:
        from hbtui.core.archives.save import output_problem

        return output_problem(Path(output).expanduser().absolute())

    async def save(self, spec: SaveSpec, *, passphrase: bytes, report: Report = ignore) -> Path:
        name, host, output = spec.name, spec.host, spec.output
        self.fake._called("save", name, host, output, passphrase, spec.verify)
        self.fake._find(name, host)
        await self._transfer("writing archive", report)
        return output or Path(f"/backups/{name}.hbx")

    async def load(self, spec: LoadSpec, *, passphrase: bytes, report: Report = ignore) -> BoxView:
        name, host = spec.name, spec.host
        check_name(name)
        self.fake._called("load", spec.archive, name, host, passphrase, spec.recipe)
        self._open(passphrase)
        await self._transfer("checking", report)
        report(Reserved(host, name, 4820))
        report(Phase(f"creating machine {name}", Stage.CREATE))
        made = view(name, 4820, host=host, created="2026-11-29T12:00:00Z")
        self.fake.views.append(made)
        return made

    async def extract(
        self, archive: Path, dest: Path | None = None, *, passphrase: bytes, report: Report = ignore
    ) -> Path:
        self.fake._called("extract", archive, dest, passphrase)
        self._open(passphrase)
        await self._transfer("unpacking", report)
        return dest or archive.with_suffix("")


class FakeWork:
    """`service.work` (docs/work.md) over the fake's diffs."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    async def repo_seed(self, text: str) -> RepoSeed:
        """A folder is a repository at a fixed commit here (the real one asks git)."""
        self.fake._called("repo_seed", text)
        path, ref = split_repo_ref(text)
        if not path.is_dir():
            raise UsageError(f"{path} is not a folder")
        return RepoSeed(path.absolute(), ref, ref or "refs/heads/main", "c" * 40)

    async def repo_copies(self, seed: RepoSeed, paths: Sequence[str]) -> tuple[str, ...]:
        """Each path must be in the seed's work tree (the real one asks git too)."""
        self.fake._called("repo_copies", seed.repo, tuple(paths))
        for text in paths:
            if not (seed.repo / text).exists():
                raise UsageError(f"--copy {text}: {seed.repo / text} does not exist")
            if text in self.fake.tracked:
                raise UsageError(
                    f"--copy {text}: {text} is tracked by git: it is in the clone already"
                )
        return tuple(dict.fromkeys(paths))

    async def diff(
        self, name: str, host: str = LOCAL, *, patch: bool = True, repo: str | None = None
    ) -> WorkDiff:
        self.fake._called("diff", name, host, patch)
        work = self.fake._work_of(name, host)
        return work if patch else replace(work, patch=None)

    async def pull(
        self,
        name: str,
        host: str = LOCAL,
        *,
        wip: bool = False,
        repo: str | None = None,
        report: Report = ignore,
    ) -> PullResult:
        """The box's branch as the core names it in the host repository, or nothing when it
        has no commits since the seed."""
        self.fake._called("pull", name, host, wip, repo)
        work = self.fake._work_of(name, host)
        report(Phase(f"bundling the work in {name}"))
        await self.fake._pause()
        refs = ((f"refs/remotes/box/{name}/{work.branch}", work.head),) if work.commits else ()
        if work.uncommitted and not wip:
            report(Notice(f"{work.uncommitted} file(s) in {name} have uncommitted changes"))
        return PullResult(
            name, host, str(repo) if repo else work.repo, refs, work.uncommitted, "", 4096
        )

    def record(self, name: str, host: str = LOCAL) -> BoxWork:
        """One repository, the diff's (several: `more_repos` of the box)."""
        work = self.fake._work_of(name, host)
        folders = ("project", *self.fake.more_repos.get((host, name), ()))
        clones = [f"/data/home/agent/work/{f}" for f in folders]
        return BoxWork(
            tuple(
                WorkRecord(work.repo, work.seed, "refs/heads/main", c, work.branch) for c in clones
            )
        )

    async def pr(
        self,
        name: str,
        host: str = LOCAL,
        request: PrRequest | None = None,
        *,
        repo: str | None = None,
        report: Report = ignore,
    ) -> PrResult:
        """The pull, then the push said in the box's log; gh's URL when `gh_url` is set."""
        request = request or PrRequest()
        self.fake._called("pr", name, host, request, repo)
        pulled = await self.pull(name, host, repo=repo, report=report)
        work = self.fake._work_of(name, host)
        report(Phase(f"pushing {work.head[:12]} to {request.remote} as {work.branch}"))
        url = self.fake.gh_url
        command = "" if url else f"cd {work.repo} && gh pr create --head {work.branch}"
        return PrResult(
            pulled, request.remote, work.branch, work.head,
            tuple(f"{c.id[:7]} {c.subject}" for c in work.commits), "new branch", url,
            "" if url else "gh is not installed", command,
        )  # fmt: skip


class FakeTries:
    """`service.tries` over the fake's try records."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    def of(self, box: str, host: str = LOCAL) -> tuple[TryRecord, str]:
        self.fake._called("try_of", box, host)
        name, dash, number = box.rpartition("-")
        if not dash or not number.isdigit():
            raise UsageError(f"{box!r} is not a box of a try (NAME-K)")
        record = self.fake.try_records.get((host, name))
        if record is None:
            raise UsageError(f"no try named {name!r} (made with: hbtui try N {name} ...)")
        if box not in record.boxes:
            raise UsageError(f"try {name} has no box {box!r}")
        return record, box

    async def rows(self, name: str, host: str = LOCAL) -> tuple[TryRecord, list[TryRow]]:
        fake = self.fake
        fake._called("try_rows", name, host)
        if fake.checks_gate is not None:
            await fake.checks_gate.wait()
        record = fake.try_records.get((host, name))
        if record is None:
            raise UsageError(f"no try named {name!r} (made with: hbtui try N {name} ...)")
        rows = []
        for box in record.boxes:
            note = record.ended.get(box, "")
            agent = "ended" if note else fake.agent_status.get(box, "idle")
            check = record.checks.get(box)
            try:
                work = fake._work_of(box, host)
            except HbtuiError as exc:
                rows.append(TryRow(box, agent, None, None, None, None, check, exc.message, note))
                continue
            added = sum(f.added or 0 for f in work.files)
            deleted = sum(f.deleted or 0 for f in work.files)
            rows.append(
                TryRow(
                    box, agent, len(work.commits), len(work.files), added, deleted, check,
                    note=note,
                )
            )  # fmt: skip
        return record, rows

    async def keep(
        self, box: str, host: str = LOCAL, *, report: Report = ignore
    ) -> tuple[PullResult, list[str]]:
        record, _ = self.of(box, host)
        fake = self.fake
        fake._called("try_keep", box, host)
        pulled = await fake.work.pull(box, host, report=report)
        removed = []
        for other in record.boxes:
            if other != box:
                await fake.remove(other, host, report=report)
                removed.append(other)
        del fake.try_records[(host, record.name)]
        return pulled, removed


SAMPLE_PATCH = """\
diff --git a/src/io.py b/src/io.py
index 3b18e51..a5c1f2e 100644
--- a/src/io.py
+++ b/src/io.py
@@ -10,4 +10,6 @@ def read(path):
-    with open(path) as f:
-        return f.read()
+    # [bold]not markup[/bold], [red]nor this[/]
+    with open(path, encoding="utf-8") as f:
+        data = f.read()
+    return data.replace("\\r\\n", "\\n")
 # -- writing --
 def write(path, text):
diff --git a/tests/test_io.py b/tests/test_io.py
new file mode 100644
index 0000000..e69de29
--- /dev/null
+++ b/tests/test_io.py
@@ -0,0 +1,3 @@
+def test_read_keeps_text(tmp_path):
+    (tmp_path / "a").write_text("x")
+    assert read(tmp_path / "a") == "x"
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 1111111..0000000
--- a/old.txt
+++ /dev/null
@@ -1 +0,0 @@
-gone
"""


def work_diff(name: str, *, commits: int = 2, patch: str = SAMPLE_PATCH) -> WorkDiff:
    """A box's work as the core reports it: commits on hb/NAME since the seed, three files
    (one changed, one added, one deleted) and the patch (escape-free, as the core makes it)."""
    return WorkDiff(
        box=name,
        host=LOCAL,
        repo="/src/project",
        seed="a" * 40,
        head=("b" * 40) if commits else "a" * 40,
        branch=f"hb/{name}",
        commits=tuple(Commit(f"{k:x}" * 40, f"fix the reader, part {k}") for k in range(commits)),
        files=(
            FileChange("src/io.py", 4, 2),
            FileChange("tests/test_io.py", 3, 0),
            FileChange("old.txt", 0, 1),
        ),
        uncommitted=1,
        patch=patch,
    )


def sample_try(service: FakeService, name: str = "fix", count: int = 3) -> TryRecord:
    """A try of `count` boxes NAME-1.. in the fake, each with work, the first one checked."""
    boxes = [f"{name}-{k}" for k in range(1, count + 1)]
    for k, box in enumerate(boxes):
        service.views.append(view(box, 4900 + k))
        service.diffs[(LOCAL, box)] = work_diff(box, commits=k)
    record = TryRecord(name, "/src/project", "a" * 40, "pytest -q", boxes)
    record.checks[boxes[0]] = CheckResult("b" * 40, 0, "3 passed in 0.12s")
    if count > 1:
        record.checks[boxes[1]] = CheckResult("b" * 40, 1, "FAILED tests/test_io.py::test_read")
    service.try_records[(LOCAL, name)] = record
    return record


def shelf() -> list[ArchiveEntry]:
    """Three archives in the fake's backups folder, newest first (as the core lists them)."""
    return [
        ArchiveEntry(
            Path("/backups/alpha-20261129T110000Z.hbx"),
            "alpha",
            "2026-11-29T11:00:05Z",
            734_003_200,
            "hbx",
            True,
        ),
        ArchiveEntry(
            Path("/backups/beta-20261127T090000Z.hbx"),
            "beta",
            "2026-11-27T09:00:41Z",
            52_428_800,
            "hbx",
            False,
        ),
        ArchiveEntry(
            Path("/backups/web-2025-06-01.tar.gz.gpg"),
            "",
            "2025-06-01T08:00:00Z",
            4096,
            "legacy",
            False,
        ),
    ]
