"""A box's port forwarded from the dashboard (`F`, `hbtui forward BOX PORT` in the CLI):
the forwards the dashboard holds. The dialog that asks which port is forward_dialog.py.

Each forward is a worker of the App's: it listens on this machine's 127.0.0.1 for as long
as the dashboard runs and the box runs, and its box's log pane says when it starts and
ends. Until it listens, what it fails on goes back to the dialog.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from textual.worker import get_current_worker

from hbtui.core.foundation import BoxView
from hbtui.errors import HbtuiError
from hbtui.events import LogLine, Notice
from hbtui.tui.failure import Failure
from hbtui.tui.operations import Operation

if TYPE_CHECKING:
    from textual.worker import Worker

    from hbtui.tui.feature import Dashboard
    from hbtui.tui.shell.forward_dialog import ForwardDialog


class PortForwards:
    """The forwards this dashboard holds, each in a worker of the App's: ended when the
    dashboard quits (`close`) or its box stops."""

    def __init__(self, app: Dashboard, browse: Callable[[str, str], None]) -> None:
        self.app = app
        self._browse = browse  # opens a URL as `o` does (a browser, else the URL offered)
        self._workers: set[Worker[None]] = set()

    def ask(self, view: BoxView) -> None:
        """The dialog for a box (it shows the box's forwards, this process's or another's)."""
        from hbtui.tui.shell.forward_dialog import ForwardDialog

        try:
            running = self.app.service.boxes.forward(view.name, view.host).running()
        except (HbtuiError, OSError):
            running = []
        self.app.push_screen(ForwardDialog(view, partial(self._start, view), running))

    def _start(
        self, view: BoxView, dialog: ForwardDialog, port: int, local: int | None, browse: bool
    ) -> Worker[None]:
        worker = self.app.start(partial(self._hold, view, dialog, port, local, browse), "forward")
        self._workers.add(worker)
        return worker

    async def _hold(
        self, view: BoxView, dialog: ForwardDialog, port: int, local: int | None, browse: bool
    ) -> None:
        """Listen until the box stops or the dashboard quits; what it failed on before it
        listened goes back to the dialog."""
        name = view.name
        log = Operation("forward", (view.host, name), self.app)  # the box's log pane
        url = ""
        try:
            forwards = self.app.service.boxes.forward(name, view.host)
            async with forwards.open([port], local_port=local) as forwarding:
                url = forwarding.forwards[0].url
                dialog.listening()
                log.report(
                    LogLine(
                        f"\x1b[36m⇄ forwarding {url} to 127.0.0.1:{port} in {name}, until "
                        f"the dashboard quits or {name} stops\x1b[0m"
                    )
                )
                self.app.notify(url, title=f"{name}:{port} forwarded")
                if browse:
                    self._browse(name, url)
                await forwarding.wait()
        except asyncio.CancelledError:
            if url:
                log.report(Notice(f"the forward {url} to {name}:{port} closed"))
            raise
        except (HbtuiError, OSError) as exc:
            failure = Failure.of(exc)
            if not url:
                dialog.refused(failure)
                return
            log.report(Notice(f"the forward {url} to {name}:{port} ended: {failure.text}"))
            self.app.notify(failure.text, title=f"{name}:{port} forward ended", severity="warning")
        finally:
            self._workers.discard(get_current_worker())
            log.flush()

    async def close(self) -> None:
        """End every forward, and wait until each has let go of its port and relays."""
        workers, self._workers = list(self._workers), set()
        for worker in workers:
            worker.cancel()
        for worker in workers:
            with contextlib.suppress(Exception):
                await worker.wait()
