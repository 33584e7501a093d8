"""`hbtui doctor --probe`: does a machine really boot here? A throwaway one is made,
started, asked to run `true`, stopped and deleted, in a private engine state folder,
and each stage is one line saying how long it took, or how it failed.

The machine has no image (the engine's own small guest), so the probe pulls nothing
and needs no network. Whatever happens, Ctrl-C included, the machine is deleted and
the folder removed before the probe returns; a delete that fails says so, and leaves
the folder for a look.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable

from hbtui.checks import Check
from hbtui.core.foundation.shield import to_the_end
from hbtui.engine import Engine, EngineError, MachineNotFound, MachineSpec
from hbtui.schema import plain

MACHINE = "hbtui-probe"
# The engine keeps a machine's sockets in its state folder, at most this far below it
# (.cache/smolvm/vms/<16 hex>/agent.sock); a Unix socket's path has at most 104 bytes
# (macOS; 107 on Linux).
SOCKET_DEPTH = 46
SOCKET_PATH_MAX = 104
CALL_TIMEOUT = 60.0  # a create, exec, stop or delete of a machine with no image
START_TIMEOUT = 120.0  # a real guest boots in under a second; one that cannot took 1-20 s


def _short_temp() -> str:
    """The temporary folder, when the probe's state fits below it with the engine's
    sockets (a long TMPDIR, macOS's for one, does not), else /tmp."""
    room = SOCKET_PATH_MAX - SOCKET_DEPTH - len("/hbtui-probe-12345678")
    here = tempfile.gettempdir()
    return here if len(os.fsencode(here)) <= room else "/tmp"


def _took(began: float) -> str:
    seconds = time.monotonic() - began
    return f"{seconds:.2f} s" if seconds < 1 else f"{seconds:.1f} s"


class _Failed(Exception):
    """`true` ran in the guest and failed: the engine did its part, the guest did not."""


class Probe:
    """One throwaway machine's way through the stages; `report` hears each line."""

    def __init__(self, engine: Engine, report: Callable[[Check], None]) -> None:
        self.binary, self.runner = engine.binary, engine.runner
        self.report = report
        self.checks: list[Check] = []
        self.booted = False

    def _line(self, stage: str, ok: bool, detail: str, fix: str = "") -> None:
        check = Check(f"probe {stage}", ok, detail, fix=fix)
        self.checks.append(check)
        self.report(check)

    async def _stage(
        self, stage: str, work: Awaitable[object], fix: str = "", left: str = ""
    ) -> bool:
        """Run one stage and say how it went; `left` names the stages a failure skips."""
        began = time.monotonic()
        try:
            await work
        except (EngineError, _Failed) as exc:
            skipped = f" ({left} not tried)" if left else ""
            self._line(
                stage, False, f"failed after {_took(began)}{skipped}: {plain(str(exc))}", fix
            )
            return False
        except asyncio.CancelledError:
            self._line(stage, False, f"interrupted after {_took(began)}")
            raise
        self._line(stage, True, _took(began))
        return True

    async def _true(self) -> None:
        done = await self.engine.exec(MACHINE, ["true"], timeout=CALL_TIMEOUT)
        if done.returncode != 0:
            raise _Failed(f"`true` exited with status {done.returncode}")

    async def run(self, boot_fix: str = "") -> list[Check]:
        """The stages, then the clean-up, whatever stopped them. `boot_fix`: what to do
        when the start fails, as far as the host checks know."""
        self.folder = tempfile.mkdtemp(prefix="hbtui-probe-", dir=_short_temp())
        self.engine = Engine(
            self.binary, state_dir=self.folder, runner=self.runner, timeout=CALL_TIMEOUT
        )
        started = False
        try:
            spec = MachineSpec(name=MACHINE, image="", cpus=1, memory_mib=512, network=False)
            if await self._stage("create", self.engine.create(spec), left="start, exec"):
                started = await self._stage(
                    "start",
                    self.engine.start(MACHINE, timeout=START_TIMEOUT),
                    fix=boot_fix,
                    left="exec",
                )
            if started:
                self.booted = await self._stage("exec", self._true())
        finally:
            await to_the_end(self._clean_up(started))
        return self.checks

    async def _clean_up(self, started: bool) -> None:
        if started:
            await self._stage("stop", self.engine.stop(MACHINE))
        began = time.monotonic()
        try:
            await self.engine.delete(MACHINE)
        except MachineNotFound:  # never made: the create failed or was cut off
            self._line("delete", True, f"nothing to remove ({_took(began)})")
        except EngineError as exc:
            self._line(
                "delete",
                False,
                f"failed: {plain(str(exc))}; the throwaway machine's state is in {self.folder}",
                fix=f"remove it with: {self.engine.binary} --state-dir {self.folder} "
                f"machine delete --name {MACHINE} --force",
            )
            return
        else:
            self._line("delete", True, _took(began))
        shutil.rmtree(self.folder, ignore_errors=True)
