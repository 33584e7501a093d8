"""The dashboard's terminal driver: a terminal that goes away ends the dashboard as SIGHUP does.

Textual's Linux driver hands every write to a thread through a queue of 30. When the
terminal hangs up, that thread's next write fails (EIO) and the thread dies; the writes
after it fill the queue, and the one after that blocks the event loop's thread for good,
so the dashboard never gets to its SIGHUP handling, its rollbacks or its exit. The
SIGCONT the kernel sends with a hang-up's SIGHUP makes it worse: Textual takes it for the
end of a ctrl+z and starts the screen again on the dead terminal, with a second thread
that dies at once.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any, TextIO

from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver


def hangup_handled() -> bool:
    """SIGHUP has a handler in this process (the dashboard's, installed at mount)."""
    return callable(signal.getsignal(signal.SIGHUP))


class TerminalOutput:
    """The driver's output file. A failed write means the terminal is gone: that write and
    every later one are dropped, so no writer ever waits on it, and `lost` is called."""

    def __init__(self, file: TextIO, lost: Callable[[], None]) -> None:
        self._file = file
        self._lost = lost
        self.gone = False

    def write(self, text: str) -> None:
        self._through(self._file.write, text)

    def flush(self) -> None:
        self._through(self._file.flush)

    def fileno(self) -> int:
        return self._file.fileno()

    def _through(self, call: Callable[..., object], *args: str) -> None:
        if not self.gone:
            try:
                call(*args)
                return
            except OSError:  # EIO: the terminal hung up
                self.gone = True
        self._lost()


class DashboardDriver(LinuxDriver):
    """Textual's Linux driver with output that outlives its terminal, and a screen that
    starts again on SIGCONT only after the dashboard's own ctrl+z stop."""

    def __init__(self, app: Any, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._told = False
        if self._file is not None:
            # Textual's writer thread calls only write, flush and fileno on it.
            self._file = TerminalOutput(self._file, self._terminal_lost)  # type: ignore[assignment]

    def _terminal_lost(self) -> None:
        """The terminal is gone: stop reading it (a hung-up terminal is always readable,
        with nothing, so the input thread would spin), and end as SIGHUP ends the
        dashboard, once it handles SIGHUP (until then the kernel's own one stands)."""
        self.exit_event.set()
        if not self._told and hangup_handled():
            self._told = True
            os.kill(os.getpid(), signal.SIGHUP)

    def _sigcont_application(self, *args: Any) -> None:
        # Textual marks its own suspension; a hang-up's SIGCONT (or a stray `kill -CONT`)
        # comes without one, and its screen is still up.
        if self._must_signal_resume:
            super()._sigcont_application(*args)


def dashboard_driver() -> type[Driver] | None:
    """The driver `hbtui` runs on: ours, unless Textual was told another one
    (`textual serve` names its web driver in TEXTUAL_DRIVER)."""
    return None if os.environ.get("TEXTUAL_DRIVER") else DashboardDriver
