"""Bases as the front ends reach them (`service.bases`): build, list, remove and verify the
bases `new` makes boxes from, and a box made again from its own disk with other
credentials (the same pack-and-create a base is). A branch of a box is the Service's
`branch`: it carries the box's work too.
"""

from __future__ import annotations

from pathlib import Path

from hbtui.core.boxes.guard import Guard
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation.basebook import Base, BaseCheck
from hbtui.core.foundation.views import BoxView
from hbtui.events import Report, ignore
from hbtui.names import LOCAL

# hbtui.core.bases.instant loads on first use: `ls` builds nothing.


class Bases:
    """Bases of a recipe and image on each host, and the remake of a box with new keys."""

    def __init__(self, ops: BoxOperations) -> None:
        self._ops = ops
        self._book = ops.core.bases
        self._guard = Guard(ops.core)

    def listing(self, host: str | None = None) -> list[Base]:
        """Every base's manifest (of one host, or of all)."""
        if host is not None:
            self._guard.host(host)
        return self._book.manifests(host)

    def damaged(self, host: str | None = None) -> list[Path]:
        """Manifest files that are no manifest: `base ls` names them (their packs are kept)."""
        return self._book.damaged(host)

    async def build(
        self,
        *,
        host: str = LOCAL,
        image: str | None = None,
        recipe: Path | None = None,
        report: Report = ignore,
    ) -> Base:
        """A base of the recipe and image: a box provisioned, generalized and packed."""
        from hbtui.core.bases import instant

        self._guard.host(host)
        return await instant.build_base(
            self._ops, host_name=host, image=image, recipe=recipe, report=report
        )

    async def remove(self, ident: str, host: str = LOCAL) -> Base:
        """Forget a base and delete its pack (the boxes made from it keep their disks)."""
        from hbtui.core.bases import instant

        self._guard.host(host)
        return await instant.remove_base(self._ops, ident, host)

    async def verify(self, ident: str | None = None, host: str = LOCAL) -> list[BaseCheck]:
        """Each base's pack (or one's) checked against the hash its manifest keeps."""
        from hbtui.core.bases import instant

        self._guard.host(host)
        return await instant.verify_bases(self._ops, ident, host)

    async def change_credentials(
        self,
        name: str,
        host: str = LOCAL,
        *,
        add: list[str] | None = None,
        remove: list[str] | None = None,
        report: Report = ignore,
    ) -> BoxView:
        """The box made again from its own disk with these credentials bound or unbound
        (the engine binds them only at create), the box held meanwhile."""
        from hbtui.core.bases import instant

        async with self._guard.holding(name, host, "credentials"):
            return await instant.change_credentials(
                self._ops, name, host, add=add or [], remove=remove or [], report=report
            )
