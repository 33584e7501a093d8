"""A box's web UI (`o`) and a shell in it (`enter`): the two ways into a box.

The browser and the terminal hand-over themselves are system helpers
(system.py); here is when to use them: start a stopped box first if asked,
keep a remote box's forward until the dashboard ends, offer the URL when no
browser answers, suspend the dashboard while the shell runs.
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
from hbtui.tui.messages import ListingWanted, WebReady
from hbtui.tui.operations import Operation
from hbtui.tui.requests import StartRequest
from hbtui.tui.running import Running
from hbtui.tui.system import no_browser_reason

if TYPE_CHECKING:
    from hbtui.core.foundation import WebAccess

STARTABLE = (MachineState.STOPPED, MachineState.CREATED)  # states `o` offers to start a box from


class WebAndShell(Running):
    def action_open_web(self) -> None:
        view = self._need_box()
        if view is None:
            return
        if view.port is None:
            self.notify(f"{view.name} has no forwarded port", severity="warning")
            return
        if view.state in STARTABLE:
            self._offer_start(view)
        elif view.state != MachineState.RUNNING:
            self.notify(f"{view.name} is {view.state}: its web UI is not up", severity="warning")
        else:
            self._open_web(view)

    def _open_web(self, view: BoxView) -> None:
        key = (view.host, view.name)
        if key in self._web:
            self._open(view.name, self._web[key].url)
        else:
            self._start(partial(self._web_access, key), "web")

    def _offer_start(self, view: BoxView) -> None:
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        question = Text.assemble(
            (view.name, "bold"), f" is {view.state}. Start it, then open its web UI?"
        )
        self.push_screen(
            ConfirmDialog("Open web UI", question, yes="Start and open", no="Not now"),
            partial(self._start_then_open, view),
        )

    def _start_then_open(self, view: BoxView, yes: bool | None) -> None:
        if not yes:
            return
        operation = self.run_request(StartRequest(view.name, view.host))
        if operation is not None:
            operation.then = partial(self._open_web, view)

    async def _web_access(self, key: BoxKey) -> None:
        try:
            access = await self.service.web(key[1], key[0])
        except HbtuiError as exc:
            self.notify(describe(exc), title=f"web UI of {key[1]}", severity="error")
            return
        self.post_message(WebReady(key, access))

    def on_web_ready(self, message: WebReady) -> None:
        access = message.access
        if access.forwarded:  # kept while the dashboard runs
            kept = self._web.setdefault(message.key, access)
            if kept is not access:  # two presses raced: one forward is enough
                self._start(partial(self._let_go, access), "web")
            access = kept
        self._open(message.key[1], access.url)

    async def _let_go(self, access: WebAccess) -> None:
        with contextlib.suppress(OSError):  # a forward over a dead connection is gone already
            await access.close()

    def _open(self, name: str, url: str) -> None:
        self._start(partial(self._browse, name, url), "web")

    async def _browse(self, name: str, url: str) -> None:
        """The browser is started off the event loop; with none, the URL is offered."""
        from hbtui.tui.dialogs.url import UrlDialog

        try:
            opened = await asyncio.to_thread(self.opener, url)
        except OSError:
            opened = False
        if opened is False:
            self.push_screen(UrlDialog(name, url, no_browser_reason()))
        else:
            self.notify(url, title=f"opening {name}")

    # -- the shell -----------------------------------------------------------------------------

    def action_enter_box(self) -> None:
        if view := self._need_box():
            self._start(partial(self._enter, view), "enter", exclusive=True)

    async def _enter(self, view: BoxView) -> None:
        # Starting a stopped box reports progress: it goes to the box's log.
        progress = Operation("enter", (view.host, view.name), self)
        try:
            argv = await self.service.enter_argv(view.name, view.host, report=progress.report)
        except HbtuiError as exc:
            self.notify(describe(exc), title=f"cannot enter {view.name}", severity="error")
            return
        try:
            with self.batch_update(), self.suspend():
                status = await self.launcher(argv)
        except SuspendNotSupported:
            self.notify(
                f"this terminal cannot be handed over; run:\n{shlex.join(argv)}",
                title=f"enter {view.name}",
                severity="warning",
                timeout=30,
            )
            return
        except OSError as exc:  # the shell's program could not be started
            self.notify(describe(exc), title=f"enter {view.name} failed", severity="error")
            return
        if status not in (0, 130):
            self.notify(f"the shell in {view.name} exited with status {status}", severity="warning")
        self.post_message(ListingWanted())
