"""What every box operation stands on: the registry, locks, bases, remakes and secrets; a
box's listing, its view, its machine's spec and labels, its provisioning logs. The
operations that take it: hbtui.core.boxes.make (new, make) and hbtui.core.boxes.operations
(the rest, and the one object the other features take).
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from hbtui import __version__, boxtext
from hbtui.config import (
    MAX_CPUS,
    MAX_MEMORY_MIB,
    Config,
    port_problem,
    split_list,
)
from hbtui.core.boxes import remakes
from hbtui.core.boxes.remakes import RemakeJournal
from hbtui.core.foundation import recipe as recipes
from hbtui.core.foundation.basebook import BaseBook, NewPlan
from hbtui.core.foundation.forwardbook import ForwardBook
from hbtui.core.foundation.hosts import Host, HostPool
from hbtui.core.foundation.oplock import BoxLocks
from hbtui.core.foundation.ports import PortSlot, port_map
from hbtui.core.foundation.registry import (
    FAILED,
    PROVISIONING,
    WORK_MISSING,
    BoxRecord,
    Registry,
    Rows,
)
from hbtui.core.foundation.views import MISSING, BoxListing, BoxView, Busy, ProvisionLog, view_of
from hbtui.core.foundation.workbook import WorkBook
from hbtui.core.keys import credentials as creds
from hbtui.core.keys.passphrase import PassphraseSource, get_secrets_passphrase
from hbtui.core.keys.secrets import SecretStore
from hbtui.engine import Machine, MachineSpec
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import (
    Event,
    LogLine,
    MachineState,
)
from hbtui.names import LOCAL, host_flag
from hbtui.paths import Paths, make_folder

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


class BoxCore:
    """A box's state and how it is read: the context the making, the box operations and
    every other feature take (nothing here changes a box)."""

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
        self.forwards = ForwardBook(paths.data_dir / "forwards")
        self.work = WorkBook(paths)
        self.secrets = SecretStore(
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

    def bindings(self, record: BoxRecord) -> str:
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

    async def _with_work(self, view: BoxView) -> BoxView:
        """Where the box's work is: its repository and branch, and how far ahead of its
        seed its last pull found it (the host's files only, never the box)."""
        work = self.work.place(view.host, view.name)
        if work is None:
            return view
        first = work.first  # where its agent works; `inspect` names every one
        ahead = await self.work.ahead(first, view.name)
        return replace(view, repo=first.repo, branch=first.branch, ahead=ahead)

    def _with_busy(self, view: BoxView) -> BoxView:
        busy = self.busy(view.name, view.host, view.state)
        return replace(view, busy=busy) if busy else view

    # -- listing ------------------------------------------------------------------

    async def list_host(
        self, host_name: str, registry: Rows, *, include_foreign: bool = False
    ) -> list[BoxView]:
        host = await self.hosts.get(host_name)
        machines = {m.name: m for m in await host.engine.list()}
        rows = registry.on_host(host_name)
        stored = set(self.secrets.names()) if any(r.credentials for r in rows) else set()
        views = list(
            await asyncio.gather(
                *(
                    self._with_work(
                        self._with_keys(
                            self._with_busy(view_of(r, machines.get(r.name), host)), stored
                        )
                    )
                    for r in rows
                )
            )
        )
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
                errors[name] = boxtext.line(str(result) or type(result).__name__)
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
        return await self._with_work(self._with_busy(view_of(record, machine, host)))

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

    async def require_remakeable(
        self, name: str, host_name: str, doing: str
    ) -> tuple[Host, BoxView, BoxRecord]:
        """The box, its host and its row, for an operation that packs it and makes it
        again (a branch, a credentials change): a box made whole, not paused, not an orphan."""
        host, view = await self.require(name, host_name)
        self.refuse_unprovisioned(view)
        self.refuse_paused(view, doing)
        record = self.registry.read().get(name, host_name)
        if record is None:
            raise UsageError(f"{name!r} is an orphan; adopt it first: hbtui adopt {name}")
        return host, view, record

    def refuse_pending_remake(self, name: str, host_name: str) -> None:
        remake = self.remakes.pending(host_name, name)
        if remake is not None:
            raise remakes.RemakePending(
                f"box {name!r} is being made again from its disk, and the process doing it "
                f"(pid {remake.pid}) is gone; the disk is safe in {remake.pack}",
                hint=f"finish it with: {remakes.hint(name, host_name)}",
            )

    async def ports(self, host_name: str = LOCAL) -> list[PortSlot]:
        host = await self.hosts.get(host_name)
        labelled = labelled_ports(await host.engine.list())
        return await port_map(
            self.registry.read(), host_name, host.port_range, host.busy_ports, labelled
        )

    # -- a new box's plan, recipe and machine --------------------------------------

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
            labels=labels_for(port, wanted, self.bindings(wanted)),
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

    def refuse_paused(self, view: BoxView, doing: str) -> None:
        """A paused box holds its processes in the engine's saved execution: an operation
        that needs it running or stopped says, in one line, to resume it first."""
        if view.state in (MachineState.PAUSED, MachineState.PAUSING):
            flag = host_flag(view.host)
            raise UsageError(
                f"box {view.name!r} is paused; resume it first (hbtui resume {view.name}{flag}),"
                f" then {doing}"
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


def labels_for(port: int, record: BoxRecord, bindings: str) -> tuple[tuple[str, str], ...]:
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


def adopted_policy(machine: Machine | None) -> tuple[str, str, str]:
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


def labelled_ports(machines: list[Machine]) -> dict[int, str]:
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
        # Box text: a log an older hbtui wrote holds it as the box said it.
        events.append(step if step is not None else LogLine(boxtext.colours(line)))
    return ProvisionLog(path, events)
