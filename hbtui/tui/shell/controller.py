"""A box's web UI (`o`), a shell in it (`enter`) and its ports forwarded (`F`,
forward.py): the ways into a box.

The browser and the terminal hand-over themselves are system helpers
(system.py, and the App's `hand_over`); here is when to use them: start a stopped box
first if asked, keep a remote box's forward until the dashboard ends, offer the URL when
no browser answers, suspend the dashboard while the shell runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from functools import partial
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import SuspendNotSupported

from hbtui.core.foundation import BoxView
from hbtui.errors import HbtuiError
from hbtui.events import MachineState
from hbtui.tui.activity import BoxKey
from hbtui.tui.failure import describe
from hbtui.tui.feature import Dashboard, Feature
from hbtui.tui.messages import ListingWanted
from hbtui.tui.operations import Operation
from hbtui.tui.requests import StartRequest
from hbtui.tui.shell.forward import PortForwards
from hbtui.tui.system import no_browser_reason

if TYPE_CHECKING:
    from hbtui.core.foundation import WebAccess

STARTABLE = (MachineState.STOPPED, MachineState.CREATED)  # states `o` offers to start a box from


class Shell(Feature):
    def __init__(self, app: Dashboard) -> None:
        super().__init__(app)
        self.web: dict[BoxKey, WebAccess] = {}  # forwards kept until the dashboard ends
        self.forwards = PortForwards(app, self._open)  # ports forwarded (F), held as long

    # -- the web UI ----------------------------------------------------------------------------

    def action_open_web(self) -> None:
        view = self.need_box()
        if view is None:
            return
        if view.port is None:
            self.app.notify(f"{view.name} has no forwarded port", severity="warning")
            return
        if view.state in STARTABLE:
            self._offer_start(view)
        elif view.state != MachineState.RUNNING:
            said = f"{view.name} is {view.state}: its web UI is not up"
            self.app.notify(said, severity="warning")
        else:
            self._open_web(view)

    def _open_web(self, view: BoxView) -> None:
        key = (view.host, view.name)
        if key in self.web:
            self._open(view.name, self.web[key].url)
        else:
            self.app.start(partial(self._web_access, key), "web")

    def _offer_start(self, view: BoxView) -> None:
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        question = Text.assemble(
            (view.name, "bold"), f" is {view.state}. Start it, then open its web UI?"
        )
        self.app.push_screen(
            ConfirmDialog("Open web UI", question, yes="Start and open", no="Not now"),
            partial(self._start_then_open, view),
        )

    def _start_then_open(self, view: BoxView, yes: bool | None) -> None:
        if not yes:
            return
        operation = self.app.run_request(StartRequest(view.name, view.host))
        if operation is not None:
            operation.then = partial(self._open_web, view)

    async def _web_access(self, key: BoxKey) -> None:
        try:
            access = await self.service.boxes.web(key[1], key[0])
        except HbtuiError as exc:
            self.app.notify(describe(exc), title=f"web UI of {key[1]}", severity="error")
            return
        if access.forwarded:  # kept while the dashboard runs
            kept = self.web.setdefault(key, access)
            if kept is not access:  # two presses raced: one forward is enough
                self.app.start(partial(self._let_go, access), "web")
            access = kept
        self._open(key[1], access.url)

    async def _let_go(self, access: WebAccess) -> None:
        with contextlib.suppress(OSError):  # a forward over a dead connection is gone already
            await access.close()

    async def close(self) -> None:
        """Let go of the port and web forwards kept while the dashboard ran."""
        await self.forwards.close()
        kept, self.web = list(self.web.values()), {}
        for access in kept:
            await self._let_go(access)

    def _open(self, name: str, url: str) -> None:
        self.app.start(partial(self._browse, name, url), "web")

    async def _browse(self, name: str, url: str) -> None:
        """The browser is started off the event loop; with none, the URL is offered."""
        from hbtui.tui.shell.url import UrlDialog

        try:
            opened = await asyncio.to_thread(self.app.opener, url)
        except OSError:
            opened = False
        if opened is False:
            self.app.push_screen(UrlDialog(name, url, no_browser_reason()))
        else:
            self.app.notify(url, title=f"opening {name}")

    # -- a port forwarded ----------------------------------------------------------------------

    def action_forward(self) -> None:
        view = self.need_box()
        if view is None:
            return
        if view.state != MachineState.RUNNING:
            said = f"{view.name} is {view.state}: a forward reaches a running box (start it first)"
            self.app.notify(said, severity="warning")
            return
        self.forwards.ask(view)

    # -- the shell -----------------------------------------------------------------------------

    def action_enter(self) -> None:
        if view := self.need_box():
            self.app.start(partial(self._enter, view), "enter", exclusive=True)

    async def _enter(self, view: BoxView) -> None:
        # Starting a stopped box reports progress: it goes to the box's log.
        progress = Operation("enter", (view.host, view.name), self.app)
        try:
            argv = await self.service.boxes.enter_argv(view.name, view.host, report=progress.report)
        except HbtuiError as exc:
            said = describe(exc)
            self.app.notify(said, title=f"cannot enter {view.name}", severity="error")
            return
        try:
            status = await self.app.hand_over(argv)
        except SuspendNotSupported:
            self.app.notify(
                f"this terminal cannot be handed over; run:\n{shlex.join(argv)}",
                title=f"enter {view.name}",
                severity="warning",
                timeout=30,
            )
            return
        except OSError as exc:  # the shell's program could not be started
            said = describe(exc)
            self.app.notify(said, title=f"enter {view.name} failed", severity="error")
            return
        if status not in (0, 130):
            said = f"the shell in {view.name} exited with status {status}"
            self.app.notify(said, severity="warning")
        self.app.post_message(ListingWanted())
