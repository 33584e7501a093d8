"""The one door into the core: `Service`, a facade over the feature objects it composes.

Both front ends (the CLI and the dashboard) get a Service from
`hbtui.wiring.build_service()` and reach the core only through it: each feature is a
public attribute (`service.boxes`, `.bases`, `.archives`, `.secrets`, `.hosts`,
`.agents`, `.work`, `.tries`, `.settings`, `.doctor`), a plain object in its feature
package that checks its names and hosts and holds a box while it changes it. The
Service itself keeps only what spans features. Long operations are async and take a
`report` callable for progress events. A test fake of this shape is all a front end's
tests need.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.config import Config
from hbtui.core.bases import leftovers
from hbtui.core.boxes.core import BoxCore
from hbtui.core.boxes.guard import Guard
from hbtui.core.foundation import scratch
from hbtui.core.foundation.hosts import HostPool, RemoteHosts
from hbtui.core.foundation.shield import done_despite_cancel
from hbtui.core.foundation.workbook import BoxWork, WorkBook
from hbtui.core.keys.passphrase import PassphraseSource
from hbtui.errors import UsageError
from hbtui.events import Report, ignore
from hbtui.names import LOCAL
from hbtui.paths import Paths

if TYPE_CHECKING:
    from hbtui.core.agents.door import Agents
    from hbtui.core.archives.door import Archives
    from hbtui.core.bases.door import Bases
    from hbtui.core.boxes.door import Boxes
    from hbtui.core.boxes.operations import BoxOperations
    from hbtui.core.config.door import Settings
    from hbtui.core.doctor.door import Doctor
    from hbtui.core.foundation.specs import NewSpec
    from hbtui.core.foundation.views import BoxView
    from hbtui.core.hostbook import HostBook
    from hbtui.core.keys.door import Secrets
    from hbtui.core.recipe_check import RecipeCheck
    from hbtui.core.tries.door import Tries
    from hbtui.core.work.door import Work
    from hbtui.engine import Engine


class Service:
    """The feature objects, and the operations that span them. Each feature object is
    made (and its package imported) when first used: a verb loads the features it
    reaches, not all ten (a pull's fixed cost is mostly its start-up)."""

    FEATURES = (
        "boxes", "bases", "archives", "secrets", "hosts", "agents", "work", "tries",
        "settings", "doctor",
    )  # fmt: skip

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
        self._pool = HostPool(paths, config, remote, local_engine)
        self._core = core = BoxCore(paths, config, self._pool, secrets_passphrase)
        self._guard = Guard(core)
        # Packs of killed base builds and remakes that nothing names.
        leftovers.sweep(self._pool.local_bases_dir, core.bases, core.remakes)

    @cached_property
    def _ops(self) -> BoxOperations:
        from hbtui.core.boxes.operations import BoxOperations

        return BoxOperations(self._core)

    @cached_property
    def boxes(self) -> Boxes:
        from hbtui.core.boxes.door import Boxes

        return Boxes(self._ops)

    @cached_property
    def bases(self) -> Bases:
        from hbtui.core.bases.door import Bases

        return Bases(self._ops)

    @cached_property
    def archives(self) -> Archives:
        """A --repo box's work record travels in its archives (spans archives and work)."""
        from hbtui.core.archives.door import Archives
        from hbtui.core.work.travel import WorkLink

        return Archives(self._ops, WorkLink(self.paths))

    @cached_property
    def secrets(self) -> Secrets:
        from hbtui.core.keys.door import Secrets

        return Secrets(self._core.secrets, self.config, self._core.registry)

    @cached_property
    def hosts(self) -> HostBook:
        from hbtui.core.hostbook import HostBook

        return HostBook(self.paths, self.config, self._pool, self._core.registry)

    @cached_property
    def agents(self) -> Agents:
        from hbtui.core.agents.door import Agents

        return Agents(self._core)

    @cached_property
    def work(self) -> Work:
        from hbtui.core.work.door import Work

        return Work(self._core)

    @cached_property
    def tries(self) -> Tries:
        from hbtui.core.tries.door import Tries

        return Tries(self._ops, self.work, self)

    @cached_property
    def settings(self) -> Settings:
        from hbtui.core.config.door import Settings

        return Settings(self.paths, self.config)

    @cached_property
    def doctor(self) -> Doctor:
        from hbtui.core.doctor.door import Doctor

        return Doctor(self.paths, self.config)

    async def close(self) -> None:
        """Let go of remote connections; call once, when the front end is done."""
        await self._pool.close()

    async def new(
        self, spec: NewSpec, *, report: Report = ignore, wait_agent: bool = True
    ) -> BoxView:
        """A new box; with `spec.work`, its repository cloned in and its agent started on
        the task (spans boxes and work: if the work cannot go in, the box is removed
        again). The agent is then waited for (not with `wait_agent` False: a try waits
        for its boxes' agents side by side)."""
        from hbtui.core.work import agent as work_agent
        from hbtui.core.work import operations as work_ops

        work = spec.work
        if work is not None:
            if not spec.start:
                raise UsageError("a box with a repository must start (leave out --no-start)")
            work_ops.check_task(work.task, work.agent)
            work_ops.check_seeds(work.seeds)
        core = self._ops.core
        async with self._guard.holding(spec.name, spec.host, "new"):
            # With work the row stays "provisioning" until the clone is in: a `new` killed
            # on the way leaves a failed box, never a ready one without its repository.
            view = await self._ops.making.new(
                spec, keep_provisioning=work is not None, report=report
            )
            if work is None:
                return view
            book = WorkBook(self.paths)

            async def seed() -> BoxWork:
                return await work_ops.seed_box(core, book, spec.name, spec.host, work, report)

            await work_ops.work_into(self._ops, book, spec.name, spec.host, seed, report)
            # The box is whole: a cancel now is absorbed, not told as an interruption.
            view = await done_despite_cancel(core.get(spec.name, spec.host))
        if work.agent and wait_agent:  # AgentEnded when it ended: the box stays
            clone = work_ops.clone_dir(work.seed)
            try:
                await work_agent.started(core, spec.name, spec.host, clone, work.agent, report)
            except work_agent.AgentEnded as ended:
                ended.view = view
                self.agents.ended_at_start(spec.host, spec.name, work.agent, ended.start.words)
                raise
        return view

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
        """A new box with `source`'s /data and installed state, its own name and port;
        a source made with a repository gives the branch its work too, and the
        repository's setup runs in it unless not `setup` (spans bases and work: the
        branch is ready only once its work is in)."""
        from hbtui.core.bases import instant
        from hbtui.core.work import operations as work_ops

        if name == source:
            raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
        book = WorkBook(self.paths)
        seeded = book.get(host, source)
        async with (
            self._guard.holding(name, host, "branch"),
            self._guard.holding(source, host, "branch"),
        ):
            view = await instant.branch(
                self._ops,
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
            await work_ops.branch_work(
                self._ops, book, seeded, source, name, host, report, setup=setup
            )
            return await done_despite_cancel(self._ops.core.get(name, host))

    async def remove(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        """Delete the box (its machine and row) and the host's record of its work (spans
        boxes and work); returns the box as it was."""
        async with self._guard.holding(name, host, "remove"):
            view = await self._ops.remove(name, host, report=report)
            WorkBook(self.paths).drop(host, name)
            self.agents.forget_start(host, name)
            return view

    async def recipe_check(self, recipe: Path | None = None) -> RecipeCheck:
        """The pins of the recipe `new` would use beside the newest releases on their
        registries (spans boxes' choice of recipe and the registries; changes nothing)."""
        from hbtui.core import recipe_check

        folder = self.boxes.recipe_dir(recipe)
        registries = recipe_check.Registries.from_env(os.environ)
        return await recipe_check.check(folder, registries)
