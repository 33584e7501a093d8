"""The checks a feature object makes before it acts on a box: a valid name (so `-rf`
never reaches the engine), a known host, and the box held for a changing operation."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from hbtui.core.boxes.core import BoxCore
from hbtui.errors import UsageError
from hbtui.names import check_name


class Guard:
    """Every door's checks over one box context: each feature object holds one."""

    def __init__(self, core: BoxCore) -> None:
        self._core = core

    def host(self, host: str) -> None:
        """A host the config names (or this machine); one line naming how to see them."""
        if host not in self._core.hosts.names():
            raise UsageError(f"unknown host {host!r}; see: hbtui hosts ls")

    def box(self, name: str, host: str) -> None:
        """A box's name checked, on a known host."""
        check_name(name)
        self.host(host)

    @contextlib.asynccontextmanager
    async def holding(self, name: str, host: str, operation: str) -> AsyncIterator[None]:
        """A changing operation: a valid name on a known host, and the box to itself."""
        self.box(name, host)
        async with self._core.locks.hold(host, name, operation):
            yield
