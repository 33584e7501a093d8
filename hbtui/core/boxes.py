"""BoxService: every user operation on boxes, shared by the CLI and the dashboard.

Each method is one verb. Long ones are async and report progress through a
`Report` callable; any failure or cancellation undoes what the operation
made (machine, registry row, port, temporary files) before the error leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from hbtui import __version__
from hbtui.config import Config
from hbtui.core import recipe as recipes
from hbtui.core.hosts import Host
from hbtui.core.names import check_name
from hbtui.core.ports import PortSlot, allocate, port_map
from hbtui.core.registry import FAILED, LOCAL, PROVISIONING, READY, BoxRecord, Registry
from hbtui.engine import Engine, EngineError, Machine, MachineNotFound, MachineSpec, locate_engine
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import LogLine, Notice, Phase, Report, Step, ignore
from hbtui.paths import Paths

READY_TIMEOUT = 180.0  # seconds for executor to answer after provisioning
PROVISION_TIMEOUT = 3600.0
QUIESCE_TIMEOUT = 150.0  # hb quiesce/resume wait up to 90 s themselves

# The kinds of rows `ls` shows.
BOX = "box"  # made by hbtui, machine present
MISSING = "missing"  # in the registry, but the engine has no such machine
ORPHAN = "orphan"  # labelled as hbtui's, but not in the registry
FOREIGN = "foreign"  # not made by hbtui (shown with --all)


class BoxNotFound(HbtuiError):
    pass


class ProvisionFailed(HbtuiError):
    pass


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

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class HostListing:
    boxes: list[BoxView]
    errors: dict[str, str]  # host -> why it could not be listed


HostFactory = Callable[[str], Awaitable[Host]]


def _host_flag(host_name: str) -> str:
    return "" if host_name == LOCAL else f" --host {host_name}"


def _iso(ts: int | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def view_of(record: BoxRecord | None, machine: Machine | None, host: Host) -> BoxView:
    if record is not None:
        kind = BOX if machine is not None else MISSING
        return BoxView(
            name=record.name,
            host=record.host,
            kind=kind,
            state=machine.state if machine is not None else MISSING,
            port=record.port,
            url=host.url(record.port),
            image=record.image,
            cpus=machine.cpus if machine and machine.cpus else record.cpus,
            memory_mib=machine.memory_mib if machine and machine.memory_mib else record.memory_mib,
            created=record.created,
            provisioning=record.effective_status(),
            last_save=record.last_save,
            error=record.error,
        )
    assert machine is not None
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


class BoxService:
    def __init__(
        self, paths: Paths, config: Config, *, remote_host_factory: HostFactory | None = None
    ) -> None:
        self.paths = paths
        self.config = config
        self.registry = Registry(paths.registry_file)
        self._hosts: dict[str, Host] = {}
        self._remote_factory = remote_host_factory

    # -- hosts ------------------------------------------------------------------

    def host_names(self) -> list[str]:
        return [LOCAL, *sorted(self.config.hosts)]

    def local_engine(self) -> Engine:
        located = locate_engine(self.config.engine_path_setting())
        return Engine(
            located.path,
            state_dir=self.config.engine_state_dir(),
            timeout=self.config.engine.timeout,
            locks_dir=self.paths.locks_dir,
        )

    async def host(self, name: str = LOCAL) -> Host:
        if name in self._hosts:
            return self._hosts[name]
        if name == LOCAL:
            engine = self.local_engine()
            host = Host(LOCAL, engine, (self.config.ports.low, self.config.ports.high))
        elif name in self.config.hosts:
            if self._remote_factory is None:
                raise UsageError(f"remote host {name!r} needs hbtui.remote, which is not loaded")
            host = await self._remote_factory(name)
        else:
            raise UsageError(
                f"unknown host {name!r}; add it with: hbtui hosts add {name} --ssh USER@HOST"
            )
        await host.engine.check_version()
        self._hosts[name] = host
        return host

    # -- listing ------------------------------------------------------------------

    async def list_host(
        self, host_name: str = LOCAL, *, include_foreign: bool = False
    ) -> list[BoxView]:
        host = await self.host(host_name)
        machines = {m.name: m for m in await host.engine.list()}
        rows = self.registry.read().on_host(host_name)
        views = [view_of(r, machines.get(r.name), host) for r in rows]
        known = {r.name for r in rows}
        for m in machines.values():
            if m.name not in known and (m.is_hbtui or include_foreign):
                views.append(view_of(None, m, host))
        return sorted(views, key=lambda v: v.name)

    async def list_boxes(
        self, *, include_foreign: bool = False, hosts: list[str] | None = None
    ) -> HostListing:
        """Every host at once; an unreachable host is reported, never fatal."""
        names = hosts or self.host_names()
        results = await asyncio.gather(
            *(self.list_host(h, include_foreign=include_foreign) for h in names),
            return_exceptions=True,
        )
        boxes: list[BoxView] = []
        errors: dict[str, str] = {}
        for name, result in zip(names, results, strict=False):
            if isinstance(result, BaseException):
                if not isinstance(result, (HbtuiError, OSError, asyncio.TimeoutError)):
                    raise result
                errors[name] = str(result) or type(result).__name__
            else:
                boxes.extend(result)
        return HostListing(boxes, errors)

    async def get(self, name: str, host_name: str = LOCAL) -> BoxView:
        host = await self.host(host_name)
        record = self.registry.read().get(name, host_name)
        machine = await host.engine.find(name)
        if record is None and (machine is None or not machine.is_hbtui):
            where = "" if host_name == LOCAL else f" on {host_name}"
            if machine is not None:
                raise BoxNotFound(
                    f"{name!r}{where} is a smolvm machine hbtui did not make; manage it with smolvm"
                )
            raise BoxNotFound(f"no box named {name!r}{where} (see: hbtui ls)")
        return view_of(record, machine, host)

    async def ports(self, host_name: str = LOCAL) -> list[PortSlot]:
        host = await self.host(host_name)
        return await port_map(self.registry.read(), host_name, host.port_range, host.busy_ports)

    # -- new ---------------------------------------------------------------------

    async def new(
        self,
        name: str,
        *,
        host_name: str = LOCAL,
        image: str | None = None,
        cpus: int | None = None,
        memory_mib: int | None = None,
        port: int | None = None,
        recipe: Path | None = None,
        start: bool = True,
        keep_provisioning: bool = False,
        report: Report = ignore,
    ) -> BoxView:
        """Create, provision and start a box. With `keep_provisioning` the row stays
        `provisioning` (owned by this process) for a caller that has more to do."""
        check_name(name)
        cpus = cpus if cpus is not None else self.config.defaults.cpus
        memory_mib = memory_mib if memory_mib is not None else self.config.defaults.memory_mib
        if cpus < 1:
            raise UsageError(f"--cpus must be at least 1 (got {cpus})")
        if memory_mib < 256:
            raise UsageError(f"--mem must be at least 256 MiB (got {memory_mib})")
        image = image or self.config.defaults.image
        recipe_dir = recipes.check_recipe(recipe or recipes.default_recipe_dir())
        host = await self.host(host_name)

        report(Phase("reserving a port"))
        async with self.registry.transaction() as boxes:
            if boxes.get(name, host_name) is not None:
                raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
            if await host.engine.find(name) is not None:
                raise UsageError(
                    f"a smolvm machine named {name!r} already exists; pick another name"
                )
            chosen = await allocate(boxes, host_name, host.port_range, host.busy_ports, wanted=port)
            record = BoxRecord(
                name=name,
                host=host_name,
                port=chosen,
                image=image,
                cpus=cpus,
                memory_mib=memory_mib,
                recipe=recipes.recipe_version(recipe_dir),
                status=PROVISIONING,
                owner_pid=os.getpid(),
            )
            boxes.put(record)

        log_path = self._provision_log_path(name, host_name)
        created = False
        try:
            report(Phase(f"creating machine {name} (port {chosen})"))
            spec = MachineSpec(
                name=name,
                image=image,
                cpus=cpus,
                memory_mib=memory_mib,
                ports=((chosen, chosen),),
                labels=(
                    ("hbtui", "1"),
                    ("hbtui.port", str(chosen)),
                    ("hbtui.version", __version__),
                ),
                network=True,
                workload=tuple(recipes.workload_command(chosen)),
            )
            await host.engine.create(spec)
            created = True
            report(Phase(f"starting {name}"))
            try:
                await host.engine.start(name)
            except EngineError as exc:
                exc.hint = "the machine could not boot; `hbtui doctor` explains why"
                raise
            await self._provision(host, name, chosen, recipe_dir, log_path, report)
            await self._wait_ready(host, name, chosen, report)
            if not start:
                report(Phase(f"stopping {name} (--no-start)"))
                await self._quiesce(host, name, report)
                await host.engine.stop(name)
            if keep_provisioning:
                rec = self.registry.read().get(name, host_name)
            else:
                rec = await self.registry.update(name, host_name, status=READY, owner_pid=0)
                report(Phase(f"{name} is ready at {host.url(chosen)}"))
        except BaseException as exc:
            await asyncio.shield(self._rollback(host, name, created, report))
            if isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
                raise Cancelled(
                    f"cancelled: box {name!r} was rolled back; provisioning log: {log_path}"
                ) from None
            if isinstance(exc, HbtuiError) and log_path.exists():
                exc.hint = exc.hint or f"provisioning log: {log_path}"
            raise
        machine = await host.engine.find(name)
        return view_of(rec, machine, host)

    def _provision_log_path(self, name: str, host_name: str) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        folder = self.paths.provision_logs_dir
        folder.mkdir(parents=True, exist_ok=True)
        prefix = "" if host_name == LOCAL else f"{host_name}-"
        return folder / f"{prefix}{name}-{stamp}.log"

    def provision_logs(self, name: str, host_name: str = LOCAL) -> list[Path]:
        prefix = "" if host_name == LOCAL else f"{host_name}-"
        folder = self.paths.provision_logs_dir
        return sorted(folder.glob(f"{prefix}{name}-[0-9]*T*Z.log")) if folder.is_dir() else []

    async def _provision(
        self, host: Host, name: str, port: int, recipe_dir: Path, log_path: Path, report: Report
    ) -> None:
        report(Phase("copying the recipe into the box"))
        with tempfile.TemporaryDirectory(prefix="hbtui-recipe-") as tmp:
            tar_path = Path(tmp) / "recipe.tar"
            recipes.pack_recipe(recipe_dir, tar_path)
            await host.engine.cp_in(name, tar_path, recipes.GUEST_TAR)
        report(Phase("provisioning"))
        last_step: Step | None = None
        stream = host.engine.exec_stream(
            name,
            recipes.provision_command(),
            env={"HB_BOX": name, "HB_PORT": str(port)},
            timeout=PROVISION_TIMEOUT,
        )
        with open(log_path, "a", encoding="utf-8") as log:
            async for line in stream:
                log.write(line + "\n")
                log.flush()
                step = recipes.parse_marker(line)
                if step is not None:
                    last_step = step
                    report(step)
                report(LogLine(line))
        if stream.returncode:
            where = (
                f" at step {last_step.index}/{last_step.total} {last_step.name}"
                if last_step
                else ""
            )
            raise ProvisionFailed(
                f"provisioning {name} failed{where} (exit status {stream.returncode})",
                hint=f"provisioning log: {log_path}",
            )

    async def _wait_ready(
        self, host: Host, name: str, port: int, report: Report, timeout: float = READY_TIMEOUT
    ) -> None:
        report(Phase(f"waiting for executor on port {port}"))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if await host.http_ok(port):
                return
            machine = await host.engine.find(name)
            if machine is None or machine.state not in ("running", "starting"):
                state = machine.state if machine else "gone"
                raise ProvisionFailed(
                    f"box {name} stopped while waiting for executor (state: {state})"
                )
            await asyncio.sleep(0.5)
        raise ProvisionFailed(
            f"executor in {name} did not answer on port {port} within {timeout:g}s",
            hint=f"look at the box's logs: hbtui logs {name}",
        )

    async def _rollback(self, host: Host, name: str, created: bool, report: Report) -> None:
        report(Notice(f"rolling back {name}"))
        if created:
            try:
                await host.engine.delete(name)
            except MachineNotFound:
                pass
            except EngineError as exc:
                report(
                    Notice(
                        f"could not delete machine {name}: {exc}; "
                        f"remove it with: hbtui rm --force {name}{_host_flag(host.name)}"
                    )
                )
                await self.registry.update(
                    name, host.name, status=FAILED, owner_pid=0, error="rollback failed"
                )
                return
        async with self.registry.transaction() as boxes:
            boxes.remove(name, host.name)

    # -- start / stop / rm -------------------------------------------------------

    async def _require(self, name: str, host_name: str) -> tuple[Host, BoxView]:
        view = await self.get(name, host_name)
        if view.kind == MISSING:
            raise BoxNotFound(
                f"box {name!r} has no machine any more (it was deleted outside "
                f"hbtui); remove the row with: hbtui rm --force {name}"
                f"{_host_flag(host_name)}"
            )
        return await self.host(host_name), view

    async def start(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> BoxView:
        host, view = await self._require(name, host_name)
        report(Phase(f"starting {name}"))
        await host.engine.start(name)
        await self._resume(host, name, report)
        if view.port and view.provisioning == READY:
            await self._wait_ready(host, name, view.port, report, timeout=90)
        return await self.get(name, host_name)

    async def stop(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> BoxView:
        host, view = await self._require(name, host_name)
        if view.state == "running":
            await self._quiesce(host, name, report)
            report(Phase(f"stopping {name}"))
            await host.engine.stop(name)
        else:
            report(Notice(f"{name} is not running ({view.state})"))
        return await self.get(name, host_name)

    async def _quiesce(self, host: Host, name: str, report: Report) -> None:
        """Stop executor and the bridge cleanly before the engine's short stop grace."""
        report(Phase(f"quiescing services in {name}"))
        result = await host.engine.exec(
            name, [f"{recipes.GUEST_BIN}/hb", "quiesce"], timeout=QUIESCE_TIMEOUT
        )
        if result.returncode != 0:
            err = result.stderr.decode(errors="replace").strip().splitlines()
            raise HbtuiError(f"could not quiesce {name}: {err[-1] if err else 'hb quiesce failed'}")

    async def _resume(self, host: Host, name: str, report: Report) -> None:
        report(Phase(f"resuming services in {name}"))
        result = await host.engine.exec(
            name, [f"{recipes.GUEST_BIN}/hb", "resume"], timeout=QUIESCE_TIMEOUT
        )
        if result.returncode != 0:
            report(
                Notice(
                    f"hb resume failed in {name}: "
                    f"{result.stderr.decode(errors='replace').strip()[-200:]}"
                )
            )

    async def remove(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> None:
        host = await self.host(host_name)
        view = await self.get(name, host_name)
        if view.kind != MISSING:
            report(Phase(f"deleting machine {name}"))
            with contextlib.suppress(MachineNotFound):
                await host.engine.delete(name)
        async with self.registry.transaction() as boxes:
            boxes.remove(name, host_name)
        report(Phase(f"removed {name}" + (f" (port {view.port} freed)" if view.port else "")))

    async def adopt(self, name: str, host_name: str = LOCAL) -> BoxView:
        """Take an orphan (hbtui-labelled machine without a row) back into the registry."""
        view = await self.get(name, host_name)
        if view.kind != ORPHAN:
            raise UsageError(f"{name!r} is not an orphan (it is {view.kind})")
        if view.port is None:
            raise UsageError(f"{name!r} has no hbtui.port label; cannot adopt it")
        async with self.registry.transaction() as boxes:
            clash = next((r for r in boxes.on_host(host_name) if r.port == view.port), None)
            if clash:
                raise UsageError(f"port {view.port} of {name!r} is used by box {clash.name!r}")
            boxes.put(
                BoxRecord(
                    name=name,
                    host=host_name,
                    port=view.port,
                    image=view.image or "",
                    cpus=view.cpus or 0,
                    memory_mib=view.memory_mib or 0,
                    created=view.created or "",
                    status=READY,
                )
            )
        return await self.get(name, host_name)

    # -- inside a box ------------------------------------------------------------

    async def ensure_running(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> BoxView:
        host, view = await self._require(name, host_name)
        if view.state != "running":
            view = await self.start(name, host_name, report=report)
        if view.provisioning == PROVISIONING:
            raise HbtuiError(f"box {name!r} is still being provisioned; wait until it is ready")
        return view

    async def enter_argv(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> list[str]:
        """The argv for an interactive shell as agent in tmux `main`."""
        await self.ensure_running(name, host_name, report=report)
        host = await self.host(host_name)
        return host.engine.interactive_argv(name, [f"{recipes.GUEST_BIN}/hb-as-agent", "--tmux"])

    async def exec_argv(
        self,
        name: str,
        command: list[str],
        host_name: str = LOCAL,
        *,
        tty: bool = False,
        report: Report = ignore,
    ) -> list[str]:
        """The argv running `command` as agent with the profile, stdin passed through."""
        if not command:
            raise UsageError("exec needs a command after --, like: hbtui exec NAME -- id")
        await self.ensure_running(name, host_name, report=report)
        host = await self.host(host_name)
        return host.engine.interactive_argv(
            name, [f"{recipes.GUEST_BIN}/hb-as-agent", "--", *command], tty=tty
        )

    async def url(self, name: str, host_name: str = LOCAL) -> str:
        view = await self.get(name, host_name)
        if view.url is None:
            raise HbtuiError(f"box {name!r} has no forwarded port")
        return view.url

    async def workload_logs(
        self, name: str, host_name: str = LOCAL, *, tail: int | None = None
    ) -> str:
        host, _ = await self._require(name, host_name)
        return await host.engine.logs(name, tail=tail)

    async def repair(
        self,
        name: str,
        host_name: str = LOCAL,
        *,
        recipe: Path | None = None,
        report: Report = ignore,
    ) -> BoxView:
        """Run the (idempotent) recipe again in an existing box."""
        host, view = await self._require(name, host_name)
        if view.port is None:
            raise UsageError(f"{name!r} has no port; adopt it first: hbtui adopt {name}")
        recipe_dir = recipes.check_recipe(recipe or recipes.default_recipe_dir())
        if view.state != "running":
            report(Phase(f"starting {name}"))
            await host.engine.start(name)
        await self.registry.update(name, host_name, status=PROVISIONING, owner_pid=os.getpid())
        log_path = self._provision_log_path(name, host_name)
        try:
            await self._provision(host, name, view.port, recipe_dir, log_path, report)
            await self._resume(host, name, report)
            await self._wait_ready(host, name, view.port, report)
        except BaseException:
            await self.registry.update(
                name, host_name, status=FAILED, owner_pid=0, error=f"repair failed; log: {log_path}"
            )
            raise
        await self.registry.update(
            name,
            host_name,
            status=READY,
            owner_pid=0,
            error="",
            recipe=recipes.recipe_version(recipe_dir),
        )
        return await self.get(name, host_name)

    # -- archives (hbtui.core.archive_ops does the work) ---------------------------

    async def save(
        self,
        name: str,
        host_name: str = LOCAL,
        *,
        output: Path | None = None,
        passphrase: bytes,
        verify: bool = True,
        report: Report = ignore,
    ) -> Path:
        from hbtui.core import archive_ops

        return await archive_ops.save(
            self,
            name,
            host_name,
            output=output,
            passphrase=passphrase,
            verify_after=verify,
            report=report,
        )

    async def load(
        self,
        archive: Path,
        name: str,
        host_name: str = LOCAL,
        *,
        passphrase: bytes,
        recipe: Path | None = None,
        report: Report = ignore,
    ) -> BoxView:
        from hbtui.core import archive_ops

        return await archive_ops.load(
            self, archive, name, host_name, passphrase=passphrase, recipe=recipe, report=report
        )
