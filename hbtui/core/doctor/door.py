"""`hbtui doctor` as the front ends reach it (`service.doctor`): can this host run boxes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from hbtui.config import Config
from hbtui.paths import Paths

if TYPE_CHECKING:
    from hbtui.checks import Check
    from hbtui.core.doctor.checks import DoctorReport

# hbtui.core.doctor.checks loads on first use: only `doctor` pays for probing the platform.


class Doctor:
    """This machine's checks, and with a probe, a throwaway machine booted."""

    def __init__(self, paths: Paths, config: Config) -> None:
        self._paths = paths
        self._config = config

    async def run(
        self, *, probe: bool = False, report: Callable[[Check], None] | None = None
    ) -> DoctorReport:
        """Can this host run boxes; `report` hears each check as it is made."""
        from hbtui.core.doctor.checks import run_doctor

        return await run_doctor(self._paths, self._config, probe=probe, report=report)
