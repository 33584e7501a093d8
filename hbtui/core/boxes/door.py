"""Boxes as the front ends reach them (`service.boxes`): each method checks the name and
the host first, and one that changes a box holds it for as long as it runs, so this is a
safe door on its own. The work is done by BoxOperations, which every other feature takes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.core.boxes.guard import Guard
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation.basebook import NewPlan
from hbtui.core.foundation.hosts import WebAccess
from hbtui.core.foundation.ports import PortSlot
from hbtui.core.foundation.recipe import recipe_version
from hbtui.core.foundation.views import BoxDetails, BoxListing, BoxStats, BoxView, ProvisionLog
from hbtui.core.keys.credentials import CredentialReport, EgressReport
from hbtui.errors import UsageError
from hbtui.events import Report, ignore
from hbtui.names import LOCAL, check_name

if TYPE_CHECKING:
    from hbtui.core.boxes.forward import BoxForwards

# hbtui.core.boxes.details loads on first use: `ls` does not inspect.


class Boxes:
    """Listing, reading and changing boxes: start, stop, pause, resume, adopt, repair, the
    ways in."""

    def __init__(self, ops: BoxOperations) -> None:
        self._ops = ops
        self._core = ops.core
        self._guard = Guard(ops.core)

    # -- reading -------------------------------------------------------------------

    async def listing(
        self, *, include_foreign: bool = False, hosts: list[str] | None = None
    ) -> BoxListing:
        """Every box on every host (or these); a remote host that fails is a row's error."""
        return await self._core.list_boxes(include_foreign=include_foreign, hosts=hosts)

    async def get(self, name: str, host: str = LOCAL) -> BoxView:
        """One box as it is now (BoxNotFound when there is none)."""
        self._guard.box(name, host)
        return await self._core.get(name, host)

    async def ports(self, host: str = LOCAL) -> list[PortSlot]:
        """The host's port range: each port free, used by a box, or busy."""
        return await self._core.ports(host)

    async def details(self, name: str, host: str = LOCAL) -> BoxDetails:
        """Everything known about one box (`hbtui inspect`, the dashboard's details view)."""
        from hbtui.core.boxes import details

        self._guard.box(name, host)
        backups = self._core.config.backups_dir(self._core.paths)
        return await details.details(self._core, backups, name, host)

    async def stats(self, names: list[str], host: str = LOCAL) -> dict[str, BoxStats]:
        """CPU and memory of these running boxes; a box the engine says nothing of is left out."""
        from hbtui.core.boxes import details

        self._guard.host(host)
        for name in names:
            check_name(name)
        return await details.stats(self._core, names, host)

    def plan(
        self,
        *,
        host: str = LOCAL,
        image: str | None = None,
        recipe: Path | None = None,
        use_base: bool = True,
    ) -> NewPlan:
        """How `new` would make a box: from which base (fast), or why with the whole recipe."""
        recipe_dir = self._core.recipe_dir(recipe)
        return self._core.plan(
            host,
            image or self._core.config.defaults.image,
            recipe_dir,
            recipe_version(recipe_dir),
            use_base=use_base,
        )

    def recipe_dir(self, recipe: Path | None = None) -> Path:
        """The recipe folder `new` would use (checked)."""
        return self._core.recipe_dir(recipe)

    async def credentials(self, name: str, host: str = LOCAL) -> CredentialReport:
        """The box's credentials: bound, missing from the store, or in plain text inside."""
        self._guard.box(name, host)
        return await self._ops.credentials(name, host)

    async def egress(self, name: str, host: str = LOCAL) -> EgressReport:
        """The box's egress policy and the connections the engine refused it."""
        self._guard.box(name, host)
        return await self._ops.egress(name, host)

    # -- changing ------------------------------------------------------------------

    async def start(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        """Boot the box and bring its services back."""
        async with self._guard.holding(name, host, "start"):
            return await self._ops.start(name, host, report=report)

    async def stop(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        """Quiesce the box's services, then stop its machine."""
        async with self._guard.holding(name, host, "stop"):
            return await self._ops.stop(name, host, report=report)

    async def pause(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        """Save the box's RAM and disks in the engine and stop it there: its processes,
        tmux and agents go on at `resume`."""
        async with self._guard.holding(name, host, "pause"):
            return await self._ops.pause(name, host, report=report)

    async def resume(self, name: str, host: str = LOCAL, *, report: Report = ignore) -> BoxView:
        """Go on with a paused box where it was paused."""
        async with self._guard.holding(name, host, "resume"):
            return await self._ops.resume(name, host, report=report)

    async def adopt(self, name: str, host: str = LOCAL) -> BoxView:
        """Take an orphan (an hbtui machine without a row) back into the registry."""
        async with self._guard.holding(name, host, "adopt"):
            return await self._ops.adopt(name, host)

    async def repair(
        self, name: str, host: str = LOCAL, *, recipe: Path | None = None, report: Report = ignore
    ) -> BoxView:
        """Run the recipe again in the box (or finish its interrupted remake first)."""
        async with self._guard.holding(name, host, "repair"):
            return await self._ops.repair(name, host, recipe=recipe, report=report)

    # -- the ways in -----------------------------------------------------------------

    async def enter_argv(
        self, name: str, host: str = LOCAL, *, report: Report = ignore
    ) -> list[str]:
        """The argv of a shell in the box's tmux (the box started first if it is not)."""
        self._guard.box(name, host)
        return await self._ops.as_agent_argv(name, host, ["--tmux"], tty=True, report=report)

    async def exec_argv(
        self,
        name: str,
        command: list[str],
        host: str = LOCAL,
        *,
        tty: bool = False,
        report: Report = ignore,
    ) -> list[str]:
        """The argv that runs `command` in the box as its agent user."""
        self._guard.box(name, host)
        if not command:
            raise UsageError("exec needs a command after --, like: hbtui exec NAME -- id")
        return await self._ops.as_agent_argv(name, host, ["--", *command], tty=tty, report=report)

    async def web(self, name: str, host: str = LOCAL) -> WebAccess:
        """A URL on this machine that reaches the box's web UI (a forward for a remote box)."""
        self._guard.box(name, host)
        return await self._ops.web(name, host)

    def forward(self, name: str, host: str = LOCAL) -> BoxForwards:
        """A box's port forwards (`hbtui forward`, `hbtui open BOX:PORT`): `open(ports)`
        holds new ones while its block lasts, `running()` lists those of every process."""
        from hbtui.core.boxes.forward import BoxForwards

        self._guard.box(name, host)
        return BoxForwards(self._core, self._core.forwards, name, host)

    async def workload_logs(self, name: str, host: str = LOCAL, *, tail: int | None = None) -> str:
        """The box's workload output, only its colours kept."""
        self._guard.box(name, host)
        return await self._ops.workload_logs(name, host, tail=tail)

    def follow_logs(
        self, name: str, host: str = LOCAL, *, tail: int | None = None
    ) -> AsyncIterator[str]:
        """The workload's output, then each new line as it comes."""
        self._guard.box(name, host)
        return self._ops.follow_logs(name, host, tail=tail)

    async def provision_log(
        self, name: str, host: str = LOCAL, *, tail: int | None = None
    ) -> ProvisionLog | None:
        """The box's last provisioning log, its steps read as the live run told them."""
        self._guard.box(name, host)
        return await self._core.provision_log(name, host, tail=tail)
