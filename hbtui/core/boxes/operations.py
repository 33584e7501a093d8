"""The box lifecycle: start, stop, rm, adopt, repair, and the ways into a box (enter,
exec, logs, the web UI). BoxOperations is the object every other feature holds; it is
composed of the box's context (hbtui.core.boxes.core: the registry, listing and a box's
machine) and its making (hbtui.core.boxes.make: `new` and `make`).

Long operations are async and report progress through a `Report` callable;
any failure or cancellation undoes what the operation made (machine,
registry row, port) before the error leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

from hbtui import boxtext
from hbtui.config import (
    split_list,
)
from hbtui.core.boxes import guest, remakes
from hbtui.core.boxes.core import BoxCore, adopted_policy, bound_variables
from hbtui.core.boxes.make import BoxMaking
from hbtui.core.boxes.remakes import Remake
from hbtui.core.foundation import recipe as recipes
from hbtui.core.foundation.hosts import Host, WebAccess
from hbtui.core.foundation.registry import (
    FAILED,
    PROVISIONING,
    READY,
    WORK_MISSING,
    BoxRecord,
)
from hbtui.core.foundation.shield import to_the_end
from hbtui.core.foundation.views import MISSING, ORPHAN, BoxView
from hbtui.core.keys import credentials as creds
from hbtui.engine import MachineNotFound
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import (
    MachineState,
    Notice,
    Phase,
    Report,
    ignore,
)
from hbtui.names import LOCAL, host_flag


class BoxOperations:
    """Every operation on boxes, on every host, unchecked and unlocked: the box's context
    (`core`: the registry, locks, secrets, listing), its making (`making`: new, make), and
    start, stop, remove, adopt, repair and the ways into a box here. What every other
    feature takes; the front ends reach boxes through `hbtui.core.boxes.door.Boxes`."""

    def __init__(self, core: BoxCore) -> None:
        self.core = core
        self.making = BoxMaking(core)

    async def finish_remake(self, host: Host, remake: Remake, report: Report) -> BoxRecord:
        """Make the box's machine from its journalled pack (see `core/boxes/remakes.py`)."""
        return await remakes.finish(
            host,
            self.core.registry,
            self.core.remakes,
            remake,
            lambda record, pack: self.core.spec(record, record.port, pack),
            lambda: self.core.boot(host, remake.name),
            report,
        )

    # -- start / stop / rm / adopt ------------------------------------------------

    async def start(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> BoxView:
        """Boot the box and bring its services back; a paused box is resumed instead,
        every process going on where it was."""
        host, view = await self.core.require(name, host_name)
        self.core.refuse_unprovisioned(view)
        if view.state == MachineState.PAUSED:
            return await self._resume(host, view, report)
        report(Phase(f"starting {name}"))
        await self.core.boot(host, name)
        await guest.resume(host, name, report)
        if view.port and view.provisioning == READY:
            await guest.wait_ready(host, name, view.port, report, timeout=90)
        return await self.core.get(name, host_name)

    async def stop(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> BoxView:
        host, view = await self.core.require(name, host_name)
        self.core.refuse_paused(
            view, f"stop it, or remove it: hbtui rm {name}{host_flag(host_name)}"
        )
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
        return await self.core.get(name, host_name)

    async def pause(self, name: str, host_name: str = LOCAL, *, report: Report = ignore) -> BoxView:
        """Pause a running box: the engine saves its RAM and disks and stops it there, so
        its processes, tmux and agents go on at `resume` as after a laptop's sleep."""
        host, view = await self.core.require(name, host_name)
        if view.state == MachineState.PAUSED:
            report(Notice(f"{name} is paused already"))
            return view
        if view.state != MachineState.RUNNING:
            raise UsageError(f"box {name!r} is {view.state}: only a running box can be paused")
        report(Phase(f"pausing {name}"))
        await host.engine.pause(name)
        return await self.core.get(name, host_name)

    async def resume(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> BoxView:
        """Go on with a paused box's saved execution."""
        host, view = await self.core.require(name, host_name)
        if view.state == MachineState.RUNNING:
            report(Notice(f"{name} is running, not paused"))
            return view
        if view.state != MachineState.PAUSED:
            raise UsageError(
                f"box {name!r} is {view.state}, not paused; start it with: "
                f"hbtui start {name}{host_flag(host_name)}"
            )
        return await self._resume(host, view, report)

    async def _resume(self, host: Host, view: BoxView, report: Report) -> BoxView:
        report(Phase(f"resuming {view.name}"))
        await host.engine.resume(view.name)
        return await self.core.get(view.name, view.host)

    async def remove(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> BoxView:
        """Delete the machine and the row; returns the box as it was."""
        host = await self.core.hosts.get(host_name)
        view = await self.core.get(name, host_name)
        if view.kind != MISSING:
            report(Phase(f"deleting machine {name}"))
            with contextlib.suppress(MachineNotFound):
                await host.engine.delete(name)
        async with self.core.registry.transaction() as boxes:
            boxes.remove(name, host_name)
        remake = self.core.remakes.pending(host_name, name)
        if remake is not None:  # the user removes the box: its kept disk goes with it
            await host.files.remove_tree(remake.folder)
            self.core.remakes.drop(host_name, name)
        self.core.locks.forget(host_name, name)
        report(Phase(f"removed {name}" + (f" (port {view.port} freed)" if view.port else "")))
        return view

    async def adopt(self, name: str, host_name: str = LOCAL) -> BoxView:
        """Take an orphan (hbtui-labelled machine without a row) back into the registry."""
        view = await self.core.get(name, host_name)
        if view.kind != ORPHAN:
            what = "a box of hbtui's already" if view.kind == "box" else f"a {view.kind}"
            raise UsageError(f"{name!r} is not an orphan to adopt: it is {what}")
        if view.port is None:
            raise UsageError(f"{name!r} has no hbtui.port label; cannot adopt it")
        host = await self.core.hosts.get(host_name)
        egress, credentials, allow = adopted_policy(await host.engine.find(name))
        async with self.core.registry.transaction() as boxes:
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
        return await self.core.get(name, host_name)

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
        remake = self.core.remakes.pending(host_name, name)
        if remake is not None:
            return await self._finish_interrupted_remake(remake, report)
        host, view = await self.core.require(name, host_name)
        if view.port is None:
            raise UsageError(f"{name!r} has no port; adopt it first: hbtui adopt {name}")
        if view.provisioning == FAILED and view.error == WORK_MISSING:
            self.core.refuse_unprovisioned(view)  # the recipe cannot put its repository in
        self.core.refuse_paused(view, "repair it")
        recipe_dir = self.core.recipe_dir(recipe)
        version = recipes.recipe_version(recipe_dir)  # every file read before a change
        if view.state != MachineState.RUNNING:
            report(Phase(f"starting {name}"))
            await self.core.boot(host, name)
        record = await self.core.registry.update(
            name, host_name, status=PROVISIONING, owner_pid=os.getpid()
        )
        inner_port = record.inner_port if record else view.port
        log_path = self.core.new_provision_log_path(name, host_name)
        try:
            await guest.provision(
                host,
                name,
                inner_port,
                recipe_dir,
                log_path,
                report,
                paths=self.core.paths,
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
            await self.core.registry.settle(
                name, host_name, FAILED, f"repair failed; log: {log_path}"
            )
            raise
        await self.core.registry.settle(name, host_name, READY, recipe=version)
        return await self.core.get(name, host_name)

    async def _finish_interrupted_remake(self, remake: Remake, report: Report) -> BoxView:
        host = await self.core.hosts.get(remake.host)
        report(Notice(f"finishing the interrupted remake of {remake.name} from {remake.pack}"))
        remake = replace(remake, pid=os.getpid())  # this process is working on it now
        self.core.remakes.write(remake)
        await to_the_end(self.finish_remake(host, remake, report))
        if remake.was_running:
            return await self.start(remake.name, remake.host, report=report)
        return await self.core.get(remake.name, remake.host)

    async def _after_interrupted_repair(self, host: Host, view: BoxView, report: Report) -> None:
        await self.core.registry.update(
            view.name, view.host, status=view.provisioning or READY, owner_pid=0
        )
        with contextlib.suppress(HbtuiError):
            await guest.resume(host, view.name, report)

    # -- inside a box ------------------------------------------------------------

    async def ensure_running(
        self, name: str, host_name: str = LOCAL, *, report: Report = ignore
    ) -> BoxView:
        _host, view = await self.core.require(name, host_name)
        self.core.refuse_unprovisioned(view)
        if view.state != MachineState.RUNNING:
            view = await self.start(name, host_name, report=report)
        return view

    async def as_agent_argv(
        self, name: str, host_name: str, args: list[str], *, tty: bool, report: Report
    ) -> list[str]:
        """The argv handing this terminal to `hb-as-agent ARGS` in the box (as agent, with
        its profile, stdin passed through), the box started first if it is not."""
        await self.ensure_running(name, host_name, report=report)
        host = await self.core.hosts.get(host_name)
        return host.engine.interactive_argv(
            name, [f"{recipes.GUEST_BIN}/hb-as-agent", *args], tty=tty
        )

    async def web(self, name: str, host_name: str = LOCAL) -> WebAccess:
        """A URL here reaching the box's executor: its own for a local box, a port
        forward over SSH for a remote one (held until `close()`)."""
        host, view = await self.core.require(name, host_name)
        if view.port is None:
            raise HbtuiError(f"box {name!r} has no forwarded port")
        return await host.web(view.port)

    async def egress(self, name: str, host_name: str = LOCAL) -> creds.EgressReport:
        host, _view = await self.core.require(name, host_name)
        record = self.core.registry.read().get(name, host_name)
        mode = record.egress if record and record.egress else creds.OPEN
        policy = creds.Egress(mode, tuple(split_list(record.allow)) if record else ())
        denials = [_plain_event(e) for e in await host.engine.egress_events(name)]
        return creds.EgressReport(name, host_name, policy, denials)

    async def credentials(self, name: str, host_name: str = LOCAL) -> creds.CredentialReport:
        host, view = await self.core.require(name, host_name)
        record = self.core.registry.read().get(name, host_name)
        names = split_list(record.credentials) if record else []
        presets = [creds.preset(self.core.config, n) for n in names]
        missing = [n for n in names if n not in self.core.secrets.names()]
        plaintext = None
        if view.state == MachineState.RUNNING and view.provisioning == READY:
            managed = [p.env_var for p in creds.presets(self.core.config).values()]
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
        """The workload's output, with only its colours (it is the box's: hbtui.boxtext)."""
        host, _ = await self.core.require(name, host_name)
        return boxtext.colours(await host.engine.logs(name, tail=tail))

    async def follow_logs(
        self, name: str, host_name: str = LOCAL, *, tail: int | None = None
    ) -> AsyncIterator[str]:
        """The workload's output line by line, then new lines as they come (each with
        only its colours, as `workload_logs`)."""
        host, _ = await self.core.require(name, host_name)
        async for line in host.engine.logs_stream(name, tail=tail):
            yield boxtext.colours(line)


def _plain_event(event: dict[str, object]) -> dict[str, object]:
    """A refused connection as the engine recorded it: the names in it are the box's
    (the host it tried), so its text is made plain; numbers stay numbers."""
    return {
        boxtext.line(str(key), 100): value
        if value is None or isinstance(value, bool | int | float)
        else boxtext.line(str(value), 300)
        for key, value in event.items()
    }
