"""The box lifecycle: listing, new, start, stop, rm, adopt, repair, and what
runs inside a box (enter, exec, logs, the web UI).

Long operations are async and report progress through a `Report` callable;
any failure or cancellation undoes what the operation made (machine,
registry row, port) before the error leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from hbtui import __version__
from hbtui.config import (
    MAX_CPUS,
    MAX_MEMORY_MIB,
    Config,
    image_problem,
    port_problem,
    split_list,
)
from hbtui.core import credentials as creds
from hbtui.core import guest, remakes
from hbtui.core import recipe as recipes
from hbtui.core.bases import BaseBook, NewPlan, StaleBase
from hbtui.core.hosts import Host, HostPool, WebAccess
from hbtui.core.oplock import BoxLocks
from hbtui.core.passphrase import PassphraseSource, get_secrets_passphrase
from hbtui.core.ports import PortSlot, allocate, port_map
from hbtui.core.registry import (
    FAILED,
    PROVISIONING,
    READY,
    WORK_MISSING,
    Boxes,
    BoxRecord,
    Registry,
)
from hbtui.core.remakes import Remake, RemakeJournal
from hbtui.core.scratch import scratch
from hbtui.core.secrets import Secrets
from hbtui.core.specs import NewSpec
from hbtui.core.views import MISSING, ORPHAN, BoxListing, BoxView, Busy, ProvisionLog, view_of
from hbtui.engine import EngineError, Machine, MachineNotFound, MachineSpec
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import (
    Event,
    LogLine,
    MachineState,
    Notice,
    Phase,
    Report,
    Reserved,
    Stage,
    ignore,
)
from hbtui.names import LOCAL, check_name, host_flag
from hbtui.paths import Paths, make_folder

T = TypeVar("T")


async def to_the_end(work: Awaitable[T]) -> T:
    """Await `work` to its end even when the caller is cancelled meanwhile, then let the
    cancellation go on: what removes, restores or restarts is never cut off half-way (a
    bare shield leaves it to be cancelled when the process's loop closes)."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


async def done_despite_cancel(work: Awaitable[T]) -> T:
    """Await the last step of an operation whose work is done to its end; a cancellation
    meanwhile is absorbed, so the caller hears that it succeeded, not "interrupted"."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        result = await task
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        return result


EGRESS_LABEL = "hbtui.egress"
CREDENTIALS_LABEL = "hbtui.credentials"


class BoxNotFound(HbtuiError):
    pass


def check_sizes(cpus: int, memory_mib: int, port: int | None) -> None:
    """The numbers a box is made with, against the rules the config's keys have too."""
    if not 1 <= cpus <= MAX_CPUS:
        raise UsageError(f"--cpus must be 1-{MAX_CPUS} (got {cpus})")
    if not 256 <= memory_mib <= MAX_MEMORY_MIB:
        raise UsageError(f"--mem must be 256-{MAX_MEMORY_MIB} MiB, 4 TiB (got {memory_mib})")
    if port is not None and port_problem(port):
        raise UsageError(f"--port {port}: {port_problem(port)}")


def shown_value(text: str, most: int = 80) -> str:
    """A value the user typed, quoted and cut to fit one line of an error."""
    return repr(text) if len(text) <= most else repr(text[:most]) + f"… ({len(text)} characters)"


class BoxOperations:
    """Every operation on boxes, on every host: list, make, start, stop, remove, adopt,
    repair, and the ways into a box; with the registry, the locks and the secrets."""

    def __init__(
        self,
        paths: Paths,
        config: Config,
        hosts: HostPool,
        secrets_passphrase: PassphraseSource | None = None,
    ) -> None:
        self.paths = paths
        self.config = config
        self.hosts = hosts
        self.registry = Registry(paths.registry_file)
        self.locks = BoxLocks(paths.locks_dir / "boxes")
        self.bases = BaseBook(paths.data_dir / "bases")
        self.remakes = RemakeJournal(paths.data_dir / "remakes")
        self.secrets = Secrets(
            paths,
            config,
            secrets_passphrase or (lambda confirm: get_secrets_passphrase(confirm=confirm)),
        )

    def secret_env(
        self, record: BoxRecord | None, bound: dict[str, str] | None = None
    ) -> dict[str, str]:
        """The values of a box's credentials, by the variable each is bound to: what its
        engine `start` (and nothing else) gets in its environment. `bound` is what an
        existing machine was made with (a preset's variable may have changed since)."""
        if record is None:
            return {}
        env = {}
        for name in split_list(record.credentials):
            var = (bound or {}).get(name) or creds.preset(self.config, name).env_var
            env[var] = self.secrets.get(name)
        return env

    def _bindings(self, record: BoxRecord) -> str:
        """`PRESET=VARIABLE,...`: the bindings a machine of `record` is made with."""
        names = split_list(record.credentials)
        return ",".join(f"{n}={creds.preset(self.config, n).env_var}" for n in names)

    def busy(self, name: str, host_name: str, state: str = MachineState.RUNNING) -> Busy | None:
        """What another process holds the box for now, or what an interrupted operation
        left it in. This process's own operations are its front end's to show: a listing
        read while one ended must not outlive it as "busy". A box not running has no
        services to return (`start` resumes them), so its lapsing quiesce is not news."""
        if self.remakes.pending(host_name, name) is not None:
            return Busy("remake", repair=remakes.hint(name, host_name))
        record = self.locks.record(host_name, name)
        if record is None:
            return None
        if record.alive:
            return None if record.pid == os.getpid() else Busy(record.operation, record.pid)
        if state == MachineState.RUNNING and record.quiesced_until > time.time():
            return Busy(record.operation, lease_end=record.quiesced_until)
        return None

    @staticmethod
    def _with_keys(view: BoxView, stored: set[str]) -> BoxView:
        missing = tuple(n for n in view.credentials if n not in stored)
        return replace(view, keys_missing=missing) if missing else view

    def _with_busy(self, view: BoxView) -> BoxView:
        busy = self.busy(view.name, view.host, view.state)
        return replace(view, busy=busy) if busy else view

    # -- listing ------------------------------------------------------------------

    async def list_host(
        self, host_name: str, registry: Boxes, *, include_foreign: bool = False
    ) -> list[BoxView]:
        host = await self.hosts.get(host_name)
        machines = {m.name: m for m in await host.engine.list()}
        rows = registry.on_host(host_name)
        stored = set(self.secrets.names()) if any(r.credentials for r in rows) else set()
        views = [
            self._with_keys(self._with_busy(view_of(r, machines.get(r.name), host)), stored)
            for r in rows
        ]
        known = {r.name for r in rows}
        for m in machines.values():
            if m.name not in known and (m.is_hbtui or include_foreign):
                views.append(view_of(None, m, host))
        return sorted(views, key=lambda v: v.name)

    async def list_boxes(
        self, *, include_foreign: bool = False, hosts: list[str] | None = None
    ) -> BoxListing:
        """Every host at once; a remote host that cannot be reached is reported, never
        fatal. This machine's own failures (a damaged registry, an engine that fails or a
        wrong state dir) are errors, not "unreachable"."""
        names = hosts or self.hosts.names()
        for name in names:
            if name not in self.hosts.names():
                raise UsageError(f"unknown host {name!r}; see: hbtui hosts ls")
        registry = self.registry.read()
        results = await asyncio.gather(
            *(self.list_host(h, registry, include_foreign=include_foreign) for h in names),
            return_exceptions=True,
        )
        boxes: list[BoxView] = []
        errors: dict[str, str] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, BaseException):
                remote_trouble = isinstance(result, HbtuiError | OSError | asyncio.TimeoutError)
                if name == LOCAL or not remote_trouble:
                    raise result
                errors[name] = str(result) or type(result).__name__
            else:
                boxes.extend(result)
        return BoxListing(boxes, errors)

    async def get(self, name: str, host_name: str = LOCAL) -> BoxView:
        host = await self.hosts.get(host_name)
        record = self.registry.read().get(name, host_name)
        machine = await host.engine.find(name)
        if record is None and (machine is None or not machine.is_hbtui):
            where = "" if host_name == LOCAL else f" on {host_name}"
            if machine is not None:
                raise BoxNotFound(
                    f"{name!r}{where} is a smolvm machine hbtui did not make; manage it with smolvm"
                )
            raise BoxNotFound(f"no box named {name!r}{where} (see: hbtui ls)")
        return self._with_busy(view_of(record, machine, host))

    async def require(self, name: str, host_name: str) -> tuple[Host, BoxView]:
        """The box and its host, refusing a row whose machine is gone, and a box whose
        remake was interrupted (only `repair` may touch it: its disk is in a pack)."""
        self.refuse_pending_remake(name, host_name)
        view = await self.get(name, host_name)
        if view.kind == MISSING:
            raise BoxNotFound(
                f"box {name!r} has no machine any more (it was deleted outside "
                f"hbtui); remove the row with: hbtui rm --force {name}{host_flag(host_name)}"
            )
        return await self.hosts.get(host_name), view

    def refuse_pending_remake(self, name: str, host_name: str) -> None:
        remake = self.remakes.pending(host_name, name)
        if remake is not None:
            raise remakes.RemakePending(
                f"box {name!r} is being made again from its disk, and the process doing it "
                f"(pid {remake.pid}) is gone; the disk is safe in {remake.pack}",
                hint=f"finish it with: {remakes.hint(name, host_name)}",
            )

    async def finish_remake(self, host: Host, remake: Remake, report: Report) -> BoxRecord:
        """Make the box's machine from its journalled pack (see `core/remakes.py`)."""
        return await remakes.finish(
            host,
            self.registry,
            self.remakes,
            remake,
            lambda record, pack: self.spec(record, record.port, pack),
            lambda: self.boot(host, remake.name),
            report,
        )

    async def ports(self, host_name: str = LOCAL) -> list[PortSlot]:
        host = await self.hosts.get(host_name)
        labelled = _labelled_ports(await host.engine.list())
        return await port_map(
            self.registry.read(), host_name, host.port_range, host.busy_ports, labelled
        )

    # -- new ---------------------------------------------------------------------

    def plan(
        self, host_name: str, image: str, recipe_dir: Path, recipe: str, *, use_base: bool = True
    ) -> NewPlan:
        """How `new` makes a box of this recipe and image: from a base, or not and why."""
        if use_base and not self.config.defaults.use_bases:
            return NewPlan(None, "full provisioning: [defaults] use_bases is false")
        problem = recipes.base_problem(recipe_dir)
        if use_base and problem:
            return NewPlan(None, f"full provisioning: {problem}, so it has no bases")
        return self.bases.plan(
            host_name,
            image,
            recipe_dir,
            recipe,
            use_base=use_base,
            recipe_flag=self._recipe_flag(recipe_dir),
        )

    def _recipe_flag(self, recipe_dir: Path) -> str:
        """` --recipe DIR` unless DIR is the recipe a verb uses without one."""
        try:
            usual = self.recipe_dir(None)
        except HbtuiError:
            usual = None
        return "" if recipe_dir == usual else f" --recipe {shlex.quote(str(recipe_dir))}"

    def recipe_dir(self, recipe: Path | None) -> Path:
        """The recipe a box is made with: the one asked for, the configured one, ours."""
        setting = self.config.recipe_setting()
        chosen = recipe or (Path(setting) if setting else recipes.default_recipe_dir())
        return recipes.check_recipe(chosen)

    async def new(
        self,
        spec: NewSpec,
        *,
        keep_provisioning: bool = False,
        report: Report = ignore,
    ) -> BoxView:
        """Create, provision and start a box: from a base of its recipe and image when
        there is one (only the recipe's per-box step runs), else with the whole recipe.
        With `keep_provisioning` the row stays `provisioning` (owned by this process)
        for a caller that has more to do."""
        name, host_name = spec.name, spec.host
        check_name(name)
        cpus = spec.cpus if spec.cpus is not None else self.config.defaults.cpus
        memory_mib = (
            spec.memory_mib if spec.memory_mib is not None else self.config.defaults.memory_mib
        )
        check_sizes(cpus, memory_mib, spec.port)
        if spec.image is not None and image_problem(spec.image):
            raise UsageError(f"--image {shown_value(spec.image)}: {image_problem(spec.image)}")
        image = spec.image or self.config.defaults.image
        wanted = list(spec.credentials) if spec.credentials is not None else None
        presets = creds.chosen(self.config, wanted)
        allow = list(spec.allow) if spec.allow is not None else None
        policy = creds.egress_for(self.config, spec.egress, allow, presets)
        permissions = creds.agent_permissions_for(spec.agent_permissions, policy.mode, presets)
        recipe_dir = self.recipe_dir(spec.recipe)
        recipe_version = recipes.recipe_version(recipe_dir)  # hashed before taking the lock
        plan = self.plan(host_name, image, recipe_dir, recipe_version, use_base=spec.use_base)
        if plan.stale:
            raise StaleBase(f"{plan.why}: not using it", hint=plan.hint)
        base = plan.base
        report(Phase(f"{name}: {plan.why}" + (f" ({plan.hint})" if plan.hint else "")))
        return await self.make(
            BoxRecord(
                name=name,
                host=host_name,
                port=spec.port or 0,
                image=image,
                cpus=cpus,
                memory_mib=memory_mib,
                recipe=recipe_version,
                base=base.id if base else "",
                branchable=(
                    self.config.defaults.branchable if spec.branchable is None else spec.branchable
                ),
                credentials=",".join(p.name for p in presets),
                egress=policy.mode,
                allow=",".join(policy.allow),
                agent_permissions=permissions,
            ),
            recipe_dir,
            pack=Path(base.pack) if base else None,
            start=spec.start,
            keep_provisioning=keep_provisioning,
            report=report,
        )

    async def make(  # noqa: C901 (named in pyproject.toml)
        self,
        wanted: BoxRecord,
        recipe_dir: Path,
        *,
        pack: Path | None,
        branch_of: BoxRecord | None = None,
        start: bool = True,
        keep_provisioning: bool = False,
        report: Report = ignore,
    ) -> BoxView:
        """Reserve the row and a port, make the machine, provision it, wait for executor;
        undo it all on failure. The machine is created from `pack` or branched from the
        running box `branch_of` (then only the per-box step runs), else created from the
        image (the whole recipe runs). `wanted.port` 0: any free port."""
        name, host_name = wanted.name, wanted.host
        host = await self.hosts.get(host_name)
        secrets = self.secret_env(wanted)  # a missing secret stops it before anything is made
        report(Phase("reserving a port"))
        async with self.registry.transaction() as boxes:
            if boxes.get(name, host_name) is not None:
                raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
            machines = await host.engine.list()  # one listing: the name check and the ports
            if any(m.name == name for m in machines):
                raise UsageError(
                    f"a smolvm machine named {name!r} already exists; pick another name"
                )
            chosen = await allocate(
                boxes,
                host_name,
                host.port_range,
                host.busy_ports,
                wanted=wanted.port or None,
                labelled=_labelled_ports(machines),
            )
            # An engine branch keeps its source's port inside, forwarded from its own.
            inner = branch_of.inner_port if branch_of else chosen
            boxes.put(
                replace(
                    wanted,
                    port=chosen,
                    guest_port=inner if inner != chosen else 0,
                    status=PROVISIONING,
                    owner_pid=os.getpid(),
                )
            )

        report(Reserved(host_name, name, chosen))
        log_path = self.new_provision_log_path(name, host_name)
        created = False
        try:
            if branch_of is not None:
                report(
                    Phase(f"branching {branch_of.name} into {name} (port {chosen})", Stage.CREATE)
                )
                making = host.engine.branch(
                    branch_of.name,
                    name,
                    ports=((chosen, inner),),
                    labels=_labels(chosen, wanted, self._bindings(wanted)),
                    branchable=wanted.branchable,
                    secrets=secrets,
                )
            else:
                report(Phase(f"creating machine {name} (port {chosen})", Stage.CREATE))
                making = host.engine.create(self.spec(wanted, chosen, pack))
            # A create or branch cut off half-way can leave engine state no delete finds:
            # let it finish even when cancelled, then roll back what it made.
            creating = asyncio.ensure_future(making)
            try:
                await asyncio.shield(creating)
            except asyncio.CancelledError:
                with contextlib.suppress(Exception):
                    await creating
                created = creating.done() and not creating.cancelled() and not creating.exception()
                raise
            created = True
            if branch_of is None:
                report(Phase(f"starting {name}"))
                try:
                    await host.engine.start(name, branchable=wanted.branchable, secrets=secrets)
                except EngineError as exc:
                    exc.hint = "the machine could not boot; `hbtui doctor` explains why"
                    raise
            whole = pack is None and branch_of is None
            with scratch(self.paths, "recipe") as tmp:
                await guest.provision(
                    host,
                    name,
                    inner,
                    recipe_dir,
                    log_path,
                    report,
                    scratch_dir=tmp,
                    script=recipes.PROVISION if whole else recipes.FIRST_BOOT,
                    settings=creds.recipe_settings(wanted),
                )
            await guest.wait_ready(host, name, chosen, report)
            if not start:
                report(Phase(f"stopping {name} (--no-start)"))
                await guest.quiesce(host, name, report)
                await host.engine.stop(name)
            # Inside the rollback too: a cancel here would leave a box its caller never
            # got (a base build's builder stayed behind, half-made).
            machine = await host.engine.find(name)
            if keep_provisioning:
                rec = self.registry.read().get(name, host_name)
            else:
                rec = await self._ready(host, name, report)
        except BaseException as exc:
            await asyncio.shield(self._rollback(host, name, created, report))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                kept = f"; provisioning log: {log_path}" if log_path.exists() else ""
                raise Cancelled(f"cancelled: box {name!r} was rolled back{kept}") from None
            if isinstance(exc, HbtuiError) and log_path.exists():
                exc.hint = exc.hint or f"provisioning log: {log_path}"
            if isinstance(exc, EngineError) and pack is not None and wanted.base:
                exc.hint = exc.hint or (
                    f"the base {wanted.base} may be damaged: hbtui base verify; "
                    f"or make the box from scratch with --no-base"
                )
            raise
        return view_of(rec, machine, host)

    def spec(self, wanted: BoxRecord, port: int, pack: Path | None) -> MachineSpec:
        """The machine of a box: its port forwarded to the one inside, its workload, labels,
        credential bindings and egress policy."""
        inner = wanted.guest_port or port
        return MachineSpec(
            name=wanted.name,
            image=wanted.image,
            cpus=wanted.cpus,
            memory_mib=wanted.memory_mib,
            ports=((port, inner),),
            labels=_labels(port, wanted, self._bindings(wanted)),
            network=True,
            workload=tuple(recipes.workload_command(inner)),
            from_pack=pack,
            credentials=tuple(
                creds.preset(self.config, n).engine_spec() for n in split_list(wanted.credentials)
            ),
            block_private=wanted.egress == creds.PRIVATE_BLOCKED,
            allow_hosts=tuple(split_list(wanted.allow))
            if wanted.egress == creds.ALLOW_LIST
            else (),
        )

    async def ready(self, name: str, host_name: str, report: Report = ignore) -> None:
        """The end of a `make` kept provisioning: the box is ready, and says where."""
        await self._ready(await self.hosts.get(host_name), name, report)

    async def _ready(self, host: Host, name: str, report: Report) -> BoxRecord | None:
        rec = await self.registry.update(name, host.name, status=READY, owner_pid=0, error="")
        if rec is not None:
            report(Phase(f"{name} is ready at {host.url(rec.port)}", Stage.DONE))
        return rec

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
                        f"remove it with: hbtui rm --force {name}{host_flag(host.name)}"
                    )
                )
                await self.registry.update(
                    name, host.name, status=FAILED, owner_pid=0, error="rollback failed"
                )
                return
        async with self.registry.transaction() as boxes:
            boxes.remove(name, host.name)

    # -- provisioning logs -------------------------------------------------------

    def _provision_logs_dir(self, host_name: str) -> Path:
        """Local boxes' logs at the top, each remote host's in a folder of its own."""
        top = self.paths.provision_logs_dir
        return top if host_name == LOCAL else top / host_name

    def new_provision_log_path(self, name: str, host_name: str) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        folder = make_folder(self._provision_logs_dir(host_name), 0o755)
        return folder / f"{name}-{stamp}.log"

    def provision_logs(self, name: str, host_name: str = LOCAL) -> list[Path]:
        """Every provisioning log of a box, oldest first (its own only: box `x`'s are
        not `x-9`'s, so no glob on the name)."""
        folder = self._provision_logs_dir(host_name)
        if os.path.lexists(folder) and not folder.is_dir():
            raise UsageError(f"{folder} is a file; provisioning logs are kept in a folder there")
        if not folder.is_dir():
            return []
        pattern = re.compile(re.escape(name) + r"-\d{8}T\d{6}Z\.log")
        return sorted(p for p in folder.iterdir() if pattern.fullmatch(p.name))

    async def provision_log(
        self, name: str, host_name: str = LOCAL, *, tail: int | None = None
    ) -> ProvisionLog | None:
        """The last provisioning log, its step markers read as the live run reported them."""
        logs = self.provision_logs(name, host_name)
        if not logs:
            return None
        return await asyncio.to_thread(_read_provision_log, logs[-1], tail)

    # -- start / stop / rm / adopt ------------------------------------------------

    def refuse_unprovisioned(self, view: BoxView) -> None:
        """A box whose recipe did not finish is not started or entered as if it had."""
        flag = host_flag(view.host)
        if view.provisioning == FAILED and view.error == WORK_MISSING:
            raise HbtuiError(
                f"box {view.name!r} failed: {WORK_MISSING}; remove it (hbtui rm {view.name}"
                f"{flag}) and make it again"
            )
        if view.provisioning == FAILED:
            why = f" ({view.error})" if view.error else ""
            raise HbtuiError(
                f"box {view.name!r} failed provisioning{why}; run the recipe again with: "
                f"hbtui repair {view.name}{flag}, or remove it: hbtui rm {view.name}{flag}"
            )
        if view.provisioning == PROVISIONING:
            raise HbtuiError(
                f"box {view.name!r} is still being provisioned; wait until it is ready"
            )

    async def boot(self, host: Host, name: str) -> None:
        """Start the machine, branchable if the box was made so."""
        record = self.registry.read().get(name, host.name)
        bound = (
            bound_variables(await host.engine.find(name)) if record and record.credentials else {}
        )
        await host.engine.start(
            name,
            branchable=bool(record and record.branchable),
            secrets=self.secret_env(record, bound),
        )

    async def start(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> BoxView:
        host, view = await self.require(name, host_name)
        self.refuse_unprovisioned(view)
        report(Phase(f"starting {name}"))
        await self.boot(host, name)
        await guest.resume(host, name, report)
        if view.port and view.provisioning == READY:
            await guest.wait_ready(host, name, view.port, report, timeout=90)
        return await self.get(name, host_name)

    async def stop(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> BoxView:
        host, view = await self.require(name, host_name)
        if view.state == MachineState.RUNNING:
            if view.provisioning == FAILED:
                # Its recipe may not have installed the guest tools: no quiesce to ask for.
                report(Notice(f"{name} failed provisioning: stopping it without quiescing"))
            else:
                await guest.quiesce(host, name, report)
            report(Phase(f"stopping {name}"))
            await host.engine.stop(name)
            guest.note_quiesced(0)
        else:
            report(Notice(f"{name} is not running ({view.state})"))
        return await self.get(name, host_name)

    async def remove(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> BoxView:
        """Delete the machine and the row; returns the box as it was."""
        host = await self.hosts.get(host_name)
        view = await self.get(name, host_name)
        if view.kind != MISSING:
            report(Phase(f"deleting machine {name}"))
            with contextlib.suppress(MachineNotFound):
                await host.engine.delete(name)
        async with self.registry.transaction() as boxes:
            boxes.remove(name, host_name)
        remake = self.remakes.pending(host_name, name)
        if remake is not None:  # the user removes the box: its kept disk goes with it
            await host.files.remove_tree(remake.folder)
            self.remakes.drop(host_name, name)
        self.locks.forget(host_name, name)
        report(Phase(f"removed {name}" + (f" (port {view.port} freed)" if view.port else "")))
        return view

    async def adopt(self, name: str, host_name: str = LOCAL) -> BoxView:
        """Take an orphan (hbtui-labelled machine without a row) back into the registry."""
        view = await self.get(name, host_name)
        if view.kind != ORPHAN:
            what = "a box of hbtui's already" if view.kind == "box" else f"a {view.kind}"
            raise UsageError(f"{name!r} is not an orphan to adopt: it is {what}")
        if view.port is None:
            raise UsageError(f"{name!r} has no hbtui.port label; cannot adopt it")
        host = await self.hosts.get(host_name)
        egress, credentials, allow = _adopted_policy(await host.engine.find(name))
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
                    credentials=credentials,
                    egress=egress,
                    allow=allow,
                )
            )
        return await self.get(name, host_name)

    async def repair(
        self,
        name: str,
        host_name: str = LOCAL,
        *,
        recipe: Path | None = None,
        report: Report = ignore,
    ) -> BoxView:
        """Run the (idempotent) recipe again in an existing box; first, make the machine
        of a box whose remake was interrupted from its kept disk."""
        remake = self.remakes.pending(host_name, name)
        if remake is not None:
            return await self._finish_interrupted_remake(remake, report)
        host, view = await self.require(name, host_name)
        if view.port is None:
            raise UsageError(f"{name!r} has no port; adopt it first: hbtui adopt {name}")
        if view.provisioning == FAILED and view.error == WORK_MISSING:
            self.refuse_unprovisioned(view)  # the recipe cannot put its repository in
        recipe_dir = self.recipe_dir(recipe)
        version = recipes.recipe_version(recipe_dir)  # every file read before a change
        if view.state != MachineState.RUNNING:
            report(Phase(f"starting {name}"))
            await self.boot(host, name)
        record = await self.registry.update(
            name, host_name, status=PROVISIONING, owner_pid=os.getpid()
        )
        inner_port = record.inner_port if record else view.port
        log_path = self.new_provision_log_path(name, host_name)
        try:
            with scratch(self.paths, "recipe") as tmp:
                await guest.provision(
                    host,
                    name,
                    inner_port,
                    recipe_dir,
                    log_path,
                    report,
                    scratch_dir=tmp,
                    settings=creds.recipe_settings(record) if record else None,
                )
            await guest.resume(host, name, report)
            await guest.wait_ready(host, name, view.port, report)
        except (asyncio.CancelledError, KeyboardInterrupt):
            # Interrupted, not failed: the box is as it was (the recipe is idempotent and
            # did not finish), so it keeps its status, and its services come back.
            await asyncio.shield(self._after_interrupted_repair(host, view, report))
            raise Cancelled(
                f"cancelled: the repair of {name!r} stopped part-way; run it again with: "
                f"hbtui repair {name}{host_flag(host_name)}"
            ) from None
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
            recipe=version,
        )
        return await self.get(name, host_name)

    async def _finish_interrupted_remake(self, remake: Remake, report: Report) -> BoxView:
        host = await self.hosts.get(remake.host)
        report(Notice(f"finishing the interrupted remake of {remake.name} from {remake.pack}"))
        remake = replace(remake, pid=os.getpid())  # this process is working on it now
        self.remakes.write(remake)
        await to_the_end(self.finish_remake(host, remake, report))
        if remake.was_running:
            return await self.start(remake.name, remake.host, report=report)
        return await self.get(remake.name, remake.host)

    async def _after_interrupted_repair(self, host: Host, view: BoxView, report: Report) -> None:
        await self.registry.update(
            view.name, view.host, status=view.provisioning or READY, owner_pid=0
        )
        with contextlib.suppress(HbtuiError):
            await guest.resume(host, view.name, report)

    # -- inside a box ------------------------------------------------------------

    async def ensure_running(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> BoxView:
        _host, view = await self.require(name, host_name)
        self.refuse_unprovisioned(view)
        if view.state != MachineState.RUNNING:
            view = await self.start(name, host_name, report=report)
        return view

    async def enter_argv(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> list[str]:
        """The argv for an interactive shell as agent in tmux `main`."""
        await self.ensure_running(name, host_name, report=report)
        host = await self.hosts.get(host_name)
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
        host = await self.hosts.get(host_name)
        return host.engine.interactive_argv(
            name, [f"{recipes.GUEST_BIN}/hb-as-agent", "--", *command], tty=tty
        )

    async def web(self, name: str, host_name: str = LOCAL) -> WebAccess:
        """A URL here reaching the box's executor: its own for a local box, a port
        forward over SSH for a remote one (held until `close()`)."""
        host, view = await self.require(name, host_name)
        if view.port is None:
            raise HbtuiError(f"box {name!r} has no forwarded port")
        return await host.web(view.port)

    async def egress(self, name: str, host_name: str = LOCAL) -> creds.EgressReport:
        host, _view = await self.require(name, host_name)
        record = self.registry.read().get(name, host_name)
        mode = record.egress if record and record.egress else creds.OPEN
        policy = creds.Egress(mode, tuple(split_list(record.allow)) if record else ())
        denials = await host.engine.egress_events(name)
        return creds.EgressReport(name, host_name, policy, denials)

    async def credentials(self, name: str, host_name: str = LOCAL) -> creds.CredentialReport:
        host, view = await self.require(name, host_name)
        record = self.registry.read().get(name, host_name)
        names = split_list(record.credentials) if record else []
        presets = [creds.preset(self.config, n) for n in names]
        missing = [n for n in names if n not in self.secrets.names()]
        plaintext = None
        if view.state == MachineState.RUNNING and view.provisioning == READY:
            managed = [p.env_var for p in creds.presets(self.config).values()]
            plaintext = await guest.plaintext_keys(host, name, managed)
        known = record is None or record.egress != creds.UNKNOWN
        bound = bound_variables(await host.engine.find(name))
        rebound = {
            p.name: bound[p.name] for p in presets if bound.get(p.name, p.env_var) != p.env_var
        }
        return creds.CredentialReport(
            name, host_name, presets, missing, plaintext, known, rebound=rebound
        )

    async def workload_logs(
        self, name: str, host_name: str = LOCAL, *, tail: int | None = None
    ) -> str:
        host, _ = await self.require(name, host_name)
        return await host.engine.logs(name, tail=tail)

    async def follow_logs(
        self, name: str, host_name: str = LOCAL, *, tail: int | None = None
    ) -> AsyncIterator[str]:
        """The workload's output line by line, then new lines as they come."""
        host, _ = await self.require(name, host_name)
        async for line in host.engine.logs_stream(name, tail=tail):
            yield line


def _labels(port: int, record: BoxRecord, bindings: str) -> tuple[tuple[str, str], ...]:
    """What marks a machine as an hbtui box, its port, and the egress policy and credential
    bindings (`PRESET=VARIABLE,...`) it is made with: an orphan is adopted as it is, and a
    preset whose variable changed since is told from the box's binding."""
    labels = [("hbtui", "1"), ("hbtui.port", str(port)), ("hbtui.version", __version__)]
    labels.append((EGRESS_LABEL, record.egress or creds.OPEN))
    if bindings:
        labels.append((CREDENTIALS_LABEL, bindings))
    return tuple(labels)


def bound_variables(machine: Machine | None) -> dict[str, str]:
    """preset -> the variable the machine's binding uses, from its label ({} if none)."""
    text = machine.labels.get(CREDENTIALS_LABEL, "") if machine is not None else ""
    pairs = (item.partition("=") for item in split_list(text))
    return {name: var for name, _, var in pairs}


def _adopted_policy(machine: Machine | None) -> tuple[str, str, str]:
    """An orphan's egress policy and credentials, from the labels hbtui gave its machine
    and the allow list the engine reports (egress, credentials, allow); unknown when it
    carries no such label."""
    labels = machine.labels if machine is not None else {}
    egress = labels.get(EGRESS_LABEL, "")
    if egress not in (creds.OPEN, creds.PRIVATE_BLOCKED, creds.ALLOW_LIST):
        return creds.UNKNOWN, "", ""
    hosts = machine.raw.get("allowed_hosts") if machine is not None else None
    allow = [str(h).removeprefix("=") for h in hosts] if isinstance(hosts, list) else []
    listed = ",".join(allow) if egress == creds.ALLOW_LIST else ""
    return egress, ",".join(bound_variables(machine)), listed


def _labelled_ports(machines: list[Machine]) -> dict[int, str]:
    """port -> machine, for every machine labelled as hbtui's."""
    found: dict[int, str] = {}
    for machine in machines:
        label = machine.labels.get("hbtui.port", "")
        if machine.is_hbtui and label.isdigit():
            found[int(label)] = machine.name
    return found


def _read_provision_log(path: Path, tail: int | None) -> ProvisionLog:
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    if tail is not None:
        lines = lines[-tail:]
    events: list[Event] = []
    for line in lines:
        step = recipes.parse_marker(line)
        events.append(step if step is not None else LogLine(line))
    return ProvisionLog(path, events)
