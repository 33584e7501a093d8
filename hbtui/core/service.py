"""The one door into the core: every user operation is one method of `Service`.

Both front ends (the CLI and the dashboard) get a Service from
`hbtui.wiring.build_service()` and call nothing else of the core to act on
boxes, archives or hosts. Each method delegates to the module that does the
work (boxes, archives, hostbook, doctor); long ones are async and take a
`report` callable for progress events. A test fake of this one class is all
a front end's tests need.
"""

from __future__ import annotations

import contextlib
import os
import weakref
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.config import Config, HostSettings, read_config_table, split_list
from hbtui.core.agents.watch import AgentWatchOperations
from hbtui.core.archives import backups
from hbtui.core.archives.backups import ArchiveEntry
from hbtui.core.bases import leftovers
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation import scratch
from hbtui.core.foundation.basebook import Base, BaseCheck, NewPlan
from hbtui.core.foundation.hosts import HostKeyOffer, HostPool, HostReport, RemoteHosts, WebAccess
from hbtui.core.foundation.ports import PortSlot
from hbtui.core.foundation.recipe import recipe_version
from hbtui.core.foundation.shield import done_despite_cancel
from hbtui.core.foundation.specs import LoadSpec, NewSpec, SaveSpec
from hbtui.core.foundation.views import BoxDetails, BoxListing, BoxStats, BoxView, ProvisionLog
from hbtui.core.hostbook import HostBook
from hbtui.core.keys import credentials as creds
from hbtui.core.keys.credentials import CredentialReport, EgressReport, Preset
from hbtui.core.keys.passphrase import PassphraseSource
from hbtui.core.keys.secrets import SecretInfo
from hbtui.core.tries.operations import TryOperations
from hbtui.core.work import agent as work_agent
from hbtui.core.work.book import WorkBook
from hbtui.core.work.operations import WorkOperations, branch_work, check_task, clone_dir
from hbtui.errors import UsageError
from hbtui.events import Report, ignore
from hbtui.names import LOCAL, check_name
from hbtui.paths import Paths

if TYPE_CHECKING:
    from hbtui.checks import Check
    from hbtui.core.boxes.forward import BoxForwards
    from hbtui.core.config.edit import Changed
    from hbtui.core.doctor.checks import DoctorReport
    from hbtui.core.recipe_check import RecipeCheck
    from hbtui.engine import Engine

# hbtui.core.archives (files, save, load) and hbtui.core.doctor.checks load on first
# use: a verb like `ls` should not pay for tar, tempfile or platform probing at start-up.


class Service(AgentWatchOperations, WorkOperations, TryOperations):
    def __init__(
        self,
        paths: Paths,
        config: Config,
        *,
        remote: Callable[[], RemoteHosts] | None = None,
        secrets_passphrase: PassphraseSource | None = None,
        local_engine: Engine | None = None,
    ) -> None:
        """`secrets_passphrase`: where the encrypted secrets file's passphrase comes from
        (default: the environment, else a prompt on the terminal). `local_engine`: this
        machine's engine when the front end made it early (see hbtui.wiring)."""
        self.paths = paths
        self.config = config
        scratch.sweep(paths)  # plaintext a killed hbtui left behind
        self._hosts = HostPool(paths, config, remote, local_engine)
        self._boxes = BoxOperations(paths, config, self._hosts, secrets_passphrase)
        # Packs of killed base builds and remakes that nothing names.
        leftovers.sweep(self._hosts.local_bases_dir, self._boxes.bases, self._boxes.remakes)
        self._book = HostBook(paths, config, self._hosts, self._boxes.registry)
        self._watches = weakref.WeakSet()  # the agents' status streams (AgentWatchOperations)

    async def close(self) -> None:
        """Let go of remote connections; call once, when the front end is done."""
        await self._hosts.close()

    # -- boxes -------------------------------------------------------------------

    def host_names(self) -> list[str]:
        return self._hosts.names()

    async def list_boxes(
        self, *, include_foreign: bool = False, hosts: list[str] | None = None
    ) -> BoxListing:
        return await self._boxes.list_boxes(include_foreign=include_foreign, hosts=hosts)

    @contextlib.asynccontextmanager
    async def _holding(self, name: str, host: str, operation: str) -> AsyncIterator[None]:
        """A changing operation: a valid name on a known host, and the box to itself."""
        self._box(name, host)
        async with self._boxes.locks.hold(host, name, operation):
            yield

    def _box(self, name: str, host: str) -> None:
        """Every verb checks the name (so `-rf` never reaches the engine) and the host."""
        check_name(name)
        self._known_host(host)

    def _known_host(self, host: str) -> None:
        if host not in self._hosts.names():
            raise UsageError(f"unknown host {host!r}; see: hbtui hosts ls")

    async def get(self, name: str, host: str = LOCAL) -> BoxView:
        self._box(name, host)
        return await self._boxes.get(name, host)

    async def ports(self, host: str = LOCAL) -> list[PortSlot]:
        return await self._boxes.ports(host)

    async def details(self, name: str, host: str = LOCAL) -> BoxDetails:
        """Everything known about one box (`hbtui inspect`, the dashboard's details view)."""
        from hbtui.core.boxes import details

        self._box(name, host)
        return await details.details(self._boxes, self.backups_dir(), name, host)

    async def stats(self, names: list[str], host: str = LOCAL) -> dict[str, BoxStats]:
        """CPU and memory of these running boxes; a box the engine says nothing of is left out."""
        from hbtui.core.boxes import details

        self._known_host(host)
        for name in names:
            check_name(name)
        return await details.stats(self._boxes, names, host)

    async def new(
        self, spec: NewSpec, *, report: Report = ignore, wait_agent: bool = True
    ) -> BoxView:
        """`spec.work`: a repository to clone in the box and an agent to start on a task;
        if that fails, the box is removed again. The agent is then waited for (not with
        `wait_agent` False: a try waits for its boxes' agents side by side)."""
        work = spec.work
        if work is not None:
            if not spec.start:
                raise UsageError("a box with a repository must start (leave out --no-start)")
            check_task(work.task, work.agent)
        async with self._holding(spec.name, spec.host, "new"):
            # With work the row stays "provisioning" until the clone is in: a `new` killed
            # on the way leaves a failed box, never a ready one without its repository.
            view = await self._boxes.new(spec, keep_provisioning=work is not None, report=report)
            if work is None:
                return view
            await self._put_work(spec.name, spec.host, work, report)
            # The box is whole: a cancel now is absorbed, not told as an interruption.
            view = await done_despite_cancel(self._boxes.get(spec.name, spec.host))
        if work.agent and wait_agent:  # AgentEnded when it ended: the box stays
            clone = clone_dir(work.seed)
            try:
                await work_agent.started(
                    self._boxes, spec.name, spec.host, clone, work.agent, report
                )
            except work_agent.AgentEnded as ended:
                ended.view = view
                raise
        return view

    def new_plan(
        self,
        *,
        host: str = LOCAL,
        image: str | None = None,
        recipe: Path | None = None,
        use_base: bool = True,
    ) -> NewPlan:
        """How `new` would make a box: from which base (fast), or why with the whole recipe."""
        recipe_dir = self._boxes.recipe_dir(recipe)
        return self._boxes.plan(
            host,
            image or self.config.defaults.image,
            recipe_dir,
            recipe_version(recipe_dir),
            use_base=use_base,
        )

    async def branch(
        self,
        source: str,
        name: str,
        host: str = LOCAL,
        *,
        port: int | None = None,
        branchable: bool | None = None,
        report: Report = ignore,
    ) -> BoxView:
        """A new box with `source`'s /data and installed state, its own name and port."""
        from hbtui.core.bases import instant

        if name == source:
            raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
        work = WorkBook(self.paths)
        seeded = work.get(host, source)
        async with self._holding(name, host, "branch"), self._holding(source, host, "branch"):
            view = await instant.branch(
                self._boxes,
                source,
                name,
                host_name=host,
                port=port,
                branchable=branchable,
                keep_provisioning=seeded is not None,
                report=report,
            )
            if seeded is None:
                return view
            # Its clone goes on as the branch's own work (ready only then, as in `new`).
            await branch_work(self._boxes, work, seeded, source, name, host, report)
            return await done_despite_cancel(self._boxes.get(name, host))

    # -- keys and network --------------------------------------------------------------

    def credential_presets(self) -> list[Preset]:
        return sorted(creds.presets(self.config).values(), key=lambda p: p.name)

    def unlock_secrets(self, passphrase: bytes) -> None:
        """Open the encrypted secrets file with a passphrase the front end asked for
        (the dashboard's dialog); SecretsError when it does not open it."""
        self._boxes.secrets.unlock(passphrase)

    def secrets(self) -> list[SecretInfo]:
        """Every stored secret: its name, where it is kept, the boxes using it (no value)."""
        used: dict[str, list[str]] = {}
        for record in self._boxes.registry.read():
            for name in split_list(record.credentials):
                where = "" if record.host == LOCAL else f"@{record.host}"
                used.setdefault(name, []).append(record.name + where)
        return self._boxes.secrets.listing(used)

    def credential_preset(self, name: str) -> Preset:
        """The preset of that name; a one-line error naming the known ones if none."""
        return creds.preset(self.config, name)

    def set_secret(self, name: str, value: str) -> SecretInfo:
        self.credential_preset(name)  # only what a box can use
        return self._boxes.secrets.put(name, value)

    def remove_secret(self, name: str) -> tuple[list[str], str]:
        """Forget a secret: the boxes that used it (they will not start without it), and
        why its value stays in its store ("" when it was deleted)."""
        users = next((s.boxes for s in self.secrets() if s.name == name), ())
        left = self._boxes.secrets.remove(name)
        return list(users), left

    async def credentials(self, name: str, host: str = LOCAL) -> CredentialReport:
        self._box(name, host)
        return await self._boxes.credentials(name, host)

    async def change_credentials(
        self,
        name: str,
        host: str = LOCAL,
        *,
        add: list[str] | None = None,
        remove: list[str] | None = None,
        report: Report = ignore,
    ) -> BoxView:
        from hbtui.core.bases import instant

        async with self._holding(name, host, "credentials"):
            return await instant.change_credentials(
                self._boxes, name, host, add=add or [], remove=remove or [], report=report
            )

    async def egress(self, name: str, host: str = LOCAL) -> EgressReport:
        self._box(name, host)
        return await self._boxes.egress(name, host)

    # -- bases -----------------------------------------------------------------------

    def bases(self, host: str | None = None) -> list[Base]:
        if host is not None:
            self._known_host(host)
        return self._boxes.bases.manifests(host)

    def damaged_bases(self, host: str | None = None) -> list[Path]:
        """Manifest files that are no manifest: `base ls` names them (their packs are kept)."""
        return self._boxes.bases.damaged(host)

    async def build_base(
        self,
        *,
        host: str = LOCAL,
        image: str | None = None,
        recipe: Path | None = None,
        report: Report = ignore,
    ) -> Base:
        from hbtui.core.bases import instant

        self._known_host(host)
        return await instant.build_base(
            self._boxes, host_name=host, image=image, recipe=recipe, report=report
        )

    async def remove_base(self, ident: str, host: str = LOCAL) -> Base:
        from hbtui.core.bases import instant

        self._known_host(host)
        return await instant.remove_base(self._boxes, ident, host)

    async def verify_bases(self, ident: str | None = None, host: str = LOCAL) -> list[BaseCheck]:
        from hbtui.core.bases import instant

        self._known_host(host)
        return await instant.verify_bases(self._boxes, ident, host)

    def recipe_dir(self, recipe: Path | None = None) -> Path:
        """The recipe folder `new` would use (checked)."""
        return self._boxes.recipe_dir(recipe)

    async def recipe_check(self, recipe: Path | None = None) -> RecipeCheck:
        """The recipe's pins beside the newest releases on their registries (changes nothing)."""
        from hbtui.core import recipe_check

        folder = self.recipe_dir(recipe)
        registries = recipe_check.Registries.from_env(os.environ)
        return await recipe_check.check(folder, registries)

    async def start(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        async with self._holding(name, host, "start"):
            return await self._boxes.start(name, host, report=report)

    async def stop(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        async with self._holding(name, host, "stop"):
            return await self._boxes.stop(name, host, report=report)

    async def remove(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        async with self._holding(name, host, "remove"):
            view = await self._boxes.remove(name, host, report=report)
            self._work.drop(host, name)
            return view

    async def adopt(self, name: str, host: str = LOCAL) -> BoxView:
        async with self._holding(name, host, "adopt"):
            return await self._boxes.adopt(name, host)

    async def repair(
        self, name: str, host: str = LOCAL, *, recipe: Path | None = None, report: Report = ignore
    ) -> BoxView:
        async with self._holding(name, host, "repair"):
            return await self._boxes.repair(name, host, recipe=recipe, report=report)

    async def enter_argv(
        self, name: str, host: str = LOCAL, *, report: Report = ignore
    ) -> list[str]:
        self._box(name, host)
        return await self._boxes.enter_argv(name, host, report=report)

    async def exec_argv(
        self,
        name: str,
        command: list[str],
        host: str = LOCAL,
        *,
        tty: bool = False,
        report: Report = ignore,
    ) -> list[str]:
        self._box(name, host)
        return await self._boxes.exec_argv(name, command, host, tty=tty, report=report)

    async def web(self, name: str, host: str = LOCAL) -> WebAccess:
        self._box(name, host)
        return await self._boxes.web(name, host)

    def forward(self, name: str, host: str = LOCAL) -> BoxForwards:
        """A box's port forwards (`hbtui forward`, `hbtui open BOX:PORT`): `open(ports)`
        holds new ones while its block lasts, `running()` lists those of every process."""
        from hbtui.core.boxes.forward import BoxForwards
        from hbtui.core.foundation.forwardbook import ForwardBook

        self._box(name, host)
        return BoxForwards(self._boxes, ForwardBook(self.paths.data_dir / "forwards"), name, host)

    async def workload_logs(self, name: str, host: str = LOCAL, *, tail: int | None = None) -> str:
        self._box(name, host)
        return await self._boxes.workload_logs(name, host, tail=tail)

    def follow_logs(
        self, name: str, host: str = LOCAL, *, tail: int | None = None
    ) -> AsyncIterator[str]:
        self._box(name, host)
        return self._boxes.follow_logs(name, host, tail=tail)

    async def provision_log(
        self, name: str, host: str = LOCAL, *, tail: int | None = None
    ) -> ProvisionLog | None:
        self._box(name, host)
        return await self._boxes.provision_log(name, host, tail=tail)

    # -- archives ------------------------------------------------------------------

    def backups_dir(self) -> Path:
        return self.config.backups_dir(self.paths)

    def archive_kind(self, archive: Path, *, hbx_only: bool = False) -> str:
        """Whether a file is an .hbx archive ("hbx") or an old *.tar.gz.gpg ("legacy");
        a one-line error for anything else, and with `hbx_only` for an old backup too."""
        from hbtui.core.archives import files as archives

        path = Path(archive).expanduser().absolute()
        kind = archives.archive_kind(path)
        if hbx_only and kind != archives.HBX:
            raise UsageError(
                f"{path} is an old gpg backup; verify checks .hbx archives (extract it to check it)"
            )
        return kind

    def archive_info(self, archive: Path) -> dict[str, object]:
        from hbtui.core.archives import files as archives

        return archives.archive_info(archive)

    def list_archives(self) -> list[ArchiveEntry]:
        """The backups folder's archives to pick from, newest first."""
        return backups.list_archives(self.paths, self.backups_dir())

    def resolve_archive(self, text: str) -> Path:
        """A typed archive path; a relative one is looked for in the backups folder first."""
        return backups.resolve_archive(text, self.backups_dir())

    def last_archive(self) -> Path | None:
        """The archive picked last in a Load or Extract (in any run), if it is still there:
        what "last archive" means everywhere (a box's newest save is `newest_archive`)."""
        return backups.last_choice(self.paths)

    def remember_archive(self, archive: Path) -> None:
        backups.remember_choice(self.paths, archive)

    def save_output_problem(self, output: Path) -> str | None:
        """What stops a save writing its archive at `output` (None: nothing)."""
        from hbtui.core.archives import save as archive_save

        return archive_save.output_problem(Path(output).expanduser().absolute())

    async def save(self, spec: SaveSpec, *, passphrase: bytes, report: Report = ignore) -> Path:
        from hbtui.core.archives import save as archive_save

        async with self._holding(spec.name, spec.host, "save"):
            saved = await archive_save.save(
                self._boxes,
                spec.name,
                spec.host,
                output=spec.output,
                passphrase=passphrase,
                verify_after=spec.verify,
                report=report,
            )
        if spec.verify:
            backups.mark_verified(self.paths, saved)
        return saved

    async def load(self, spec: LoadSpec, *, passphrase: bytes, report: Report = ignore) -> BoxView:
        from hbtui.core.archives import load as archive_load

        async with self._holding(spec.name, spec.host, "load"):
            return await archive_load.load(
                self._boxes,
                spec.archive,
                spec.name,
                spec.host,
                passphrase=passphrase,
                recipe=spec.recipe,
                report=report,
            )

    async def extract(
        self, archive: Path, dest: Path | None = None, *, passphrase: bytes, report: Report = ignore
    ) -> Path:
        from hbtui.core.archives import files as archives

        return await archives.extract(
            self.paths, archive, dest, passphrase=passphrase, report=report
        )

    async def verify(self, archive: Path, *, passphrase: bytes, report: Report = ignore) -> int:
        from hbtui.core.archives import files as archives

        checked = await archives.verify(archive, passphrase=passphrase, report=report)
        backups.mark_verified(self.paths, archive)
        return checked

    # -- remote hosts ----------------------------------------------------------------

    def hosts(self) -> dict[str, HostSettings]:
        return self._book.listing()

    def host_port_range(self, name: str) -> str:
        return self._book.port_range(name)

    def add_host(
        self,
        name: str,
        *,
        ssh: str,
        identity: str = "",
        smolvm: str = "",
        state_dir: str = "",
        ports: str = "",
    ) -> HostSettings:
        """Add a remote host to config.toml, checked first (see HostBook.add)."""
        asked = HostSettings(
            ssh=ssh, identity=identity, smolvm=smolvm, state_dir=state_dir, ports=ports
        )
        return self._book.add(name, asked)

    async def remove_host(self, name: str, *, force: bool = False) -> list[str]:
        return await self._book.remove(name, force=force)

    async def check_host(self, name: str) -> HostReport:
        return await self._book.check(name)

    async def host_key(self, name: str) -> HostKeyOffer:
        return await self._book.offered_key(name)

    def trust_host(self, offer: HostKeyOffer, *, expected: str | None = None) -> None:
        self._book.trust(offer, expected=expected)

    # -- this machine ------------------------------------------------------------------

    async def doctor(
        self, *, probe: bool = False, report: Callable[[Check], None] | None = None
    ) -> DoctorReport:
        """Can this host run boxes; `report` hears each check as it is made."""
        from hbtui.core.doctor.checks import run_doctor

        return await run_doctor(self.paths, self.config, probe=probe, report=report)

    def config_path(self) -> Path:
        return self.paths.config_file

    def config_listing(self) -> str:
        """The settings in force as TOML, each marked with its source (default, file,
        environment)."""
        from hbtui.core.config.text import listing

        return listing(self.config, read_config_table(self.paths))

    def config_template(self) -> str:
        """Every setting with its default and what it is for, as commented TOML."""
        from hbtui.core.config.text import template

        return template()

    def config_set(self, key: str, value: str) -> Changed:
        """Set one setting in config.toml, checked as loading checks it; the rest of the
        file (comments too) stays as it was."""
        from hbtui.core.config.edit import set_value

        return set_value(self.paths, key, value)

    def config_edit(self, run_editor: Callable[[Path], None], again: Callable[[str], bool]) -> str:
        """config.toml edited by the user through `run_editor`, saved once it loads."""
        from hbtui.core.config.edit import edit

        return edit(self.paths, run_editor, again)
