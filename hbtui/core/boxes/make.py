"""Making a box: `new` (from a base, or the whole recipe) and `make`, which also makes
branches, reserving the row and a port, making the machine, provisioning it, waiting for
its executor, and undoing all of it on a failure or a cancel.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import replace
from pathlib import Path

from hbtui.config import (
    image_problem,
)
from hbtui.core.boxes import guest
from hbtui.core.boxes.core import BoxCore, check_sizes, labelled_ports, labels_for, shown_value
from hbtui.core.foundation import recipe as recipes
from hbtui.core.foundation.basebook import StaleBase
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.ports import allocate
from hbtui.core.foundation.registry import (
    FAILED,
    PROVISIONING,
    READY,
    WORK_MISSING,
    BoxRecord,
)
from hbtui.core.foundation.specs import NewSpec
from hbtui.core.foundation.views import BoxView, view_of
from hbtui.core.keys import credentials as creds
from hbtui.engine import EngineError, MachineNotFound
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import (
    Notice,
    Phase,
    Report,
    Reserved,
    Stage,
    ignore,
)
from hbtui.names import check_name, host_flag


class BoxMaking:
    """`new` and `make`: the one place a box is made (from the image, a pack or an engine
    branch) and rolled back; over the box's context (`BoxCore`)."""

    def __init__(self, core: BoxCore) -> None:
        self.core = core

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
        cpus = spec.cpus if spec.cpus is not None else self.core.config.defaults.cpus
        memory_mib = (
            spec.memory_mib if spec.memory_mib is not None else self.core.config.defaults.memory_mib
        )
        check_sizes(cpus, memory_mib, spec.port)
        self._refuse_taken(name, host_name, spec.port)
        if spec.image is not None and image_problem(spec.image):
            raise UsageError(f"--image {shown_value(spec.image)}: {image_problem(spec.image)}")
        image = spec.image or self.core.config.defaults.image
        wanted = list(spec.credentials) if spec.credentials is not None else None
        presets = creds.chosen(self.core.config, wanted)
        allow = list(spec.allow) if spec.allow is not None else None
        policy = creds.egress_for(self.core.config, spec.egress, allow, presets)
        permissions = creds.agent_permissions_for(spec.agent_permissions, policy.mode, presets)
        recipe_dir = self.core.recipe_dir(spec.recipe)
        recipe_version = recipes.recipe_version(recipe_dir)  # hashed before taking the lock
        plan = self.core.plan(host_name, image, recipe_dir, recipe_version, use_base=spec.use_base)
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
                    self.core.config.defaults.branchable
                    if spec.branchable is None
                    else spec.branchable
                ),
                credentials=",".join(p.name for p in presets),
                egress=policy.mode,
                allow=",".join(policy.allow),
                agent_permissions=permissions,
                # Written ahead (a view shows it once the box failed): a box killed before
                # its repository went in is not repaired into a "ready" one without it.
                error=WORK_MISSING if spec.work is not None else "",
            ),
            recipe_dir,
            pack=Path(base.pack) if base else None,
            start=spec.start,
            keep_provisioning=keep_provisioning,
            report=report,
        )

    def _refuse_taken(self, name: str, host_name: str, port: int | None) -> None:
        """A name or port another box has, refused before the plan is told (make checks
        again, in its transaction: this is the early word, not the guard)."""
        boxes = self.core.registry.read()
        if boxes.get(name, host_name) is not None:
            raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
        owner = next((r.name for r in boxes.on_host(host_name) if port and r.port == port), "")
        if owner:
            raise UsageError(f"port {port} is already used by box {owner!r}")

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
        host = await self.core.hosts.get(host_name)
        secrets = self.core.secret_env(wanted)  # a missing secret stops it before anything is made
        report(Phase("reserving a port"))
        async with self.core.registry.transaction() as boxes:
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
                labelled=labelled_ports(machines),
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
        log_path = self.core.new_provision_log_path(name, host_name)
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
                    labels=labels_for(chosen, wanted, self.core.bindings(wanted)),
                    branchable=wanted.branchable,
                    secrets=secrets,
                )
            else:
                report(Phase(f"creating machine {name} (port {chosen})", Stage.CREATE))
                making = host.engine.create(self.core.spec(wanted, chosen, pack))
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
            await guest.provision(
                host,
                name,
                inner,
                recipe_dir,
                log_path,
                report,
                paths=self.core.paths,
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
                rec = self.core.registry.read().get(name, host_name)
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

    async def ready(self, name: str, host_name: str, report: Report = ignore) -> None:
        """The end of a `make` kept provisioning: the box is ready, and says where."""
        await self._ready(await self.core.hosts.get(host_name), name, report)

    async def _ready(self, host: Host, name: str, report: Report) -> BoxRecord | None:
        rec = await self.core.registry.settle(name, host.name, READY)
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
                await self.core.registry.settle(name, host.name, FAILED, "rollback failed")
                return
        async with self.core.registry.transaction() as boxes:
            boxes.remove(name, host.name)
