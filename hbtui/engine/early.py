"""The local engine's `machine ls`, started before the dashboard imports its screens.

A dashboard start is mostly imports (Textual, the screens) and then one engine listing
for the first rows. Started first, the listing runs while the imports do, and the first
`Engine.list()` takes its answer instead of starting another process. It is asked once:
a failure is forgotten, and the ordinary call that follows says what went wrong.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess

from hbtui.environment import child_env


class EarlyListing:
    def __init__(self, argv: list[str]) -> None:
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # a terminal's Ctrl-C is the dashboard's, as for every call
            env=child_env(),
        )

    async def output(self, timeout: float) -> bytes | None:
        """What the listing printed, or None when it failed (or was taken already)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        try:
            out, _ = await asyncio.to_thread(proc.communicate, timeout=timeout)
        except subprocess.TimeoutExpired:
            _end(proc)
            return None
        except asyncio.CancelledError:
            # The dashboard is ending: the thread waiting on the listing must end too, or
            # the interpreter's exit waits for it as long as the engine takes.
            with contextlib.suppress(OSError):
                proc.kill()
            raise
        return out if proc.returncode == 0 else None

    def close(self) -> None:
        """Never asked for (the dashboard quit first): end it."""
        proc, self._proc = self._proc, None
        if proc is not None:
            _end(proc)


def _end(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        proc.kill()
    proc.communicate()
