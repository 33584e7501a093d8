"""The keys for a box's work (docs/work.md): its diff (`u`), pulling it into the host
repository (`P`), pushing it as a pull request (`L`, asked first), and the compare view
of the try it belongs to (`T`, keep with `k`).

Reading a diff or a try changes nothing and runs in a worker like the other questions;
pull, pr and keep change the host repository (pr the remote too, keep removes boxes), so
they run as operations, in the box's row and log, cancellable, and say what landed when
they end.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from hbtui.errors import HbtuiError
from hbtui.tui.activity import BoxKey
from hbtui.tui.failure import Failure, describe
from hbtui.tui.feature import Feature
from hbtui.tui.operations import Operation, Teller, Told
from hbtui.tui.requests import KeepRequest, LandRequest, PullRequest
from hbtui.tui.work.landed import landed, pushed

if TYPE_CHECKING:
    from hbtui.tui.work.compare import TryScreen


def pulled(operation: Operation, result: object) -> Told:
    """What a pull or keep brought into the host repository."""
    return Told(landed(result), f"{operation.label}: done", 15)


def landed_pr(operation: Operation, result: object) -> Told:
    """What a pr pushed, and its pull request's URL or the command that opens one."""
    from hbtui.core.work import PrResult

    said = pushed(result) if isinstance(result, PrResult) else "done"
    return Told(said, f"{operation.label}: done", 30)


class Work(Feature):
    # How each one's success is told (the App looks its operations up here).
    TOLD: ClassVar[dict[str, Teller]] = {"pull": pulled, "keep": pulled, "pr": landed_pr}

    def action_diff(self) -> None:
        if view := self.need_box():
            self.open_diff((view.host, view.name))

    def open_diff(self, key: BoxKey) -> None:
        self.app.start(partial(self._diff, key), "diff", exclusive=True)

    async def _diff(self, key: BoxKey) -> None:
        """The box's diff in its view (prepared in a thread once the view is up); a box
        without work (or not running) is one notification, and no view opens."""
        from hbtui.tui.work.diff import DiffScreen, prepare

        host, name = key
        try:
            diff = await self.service.work.diff(name, host)
        except HbtuiError as exc:
            self.app.notify(describe(exc), title=f"diff {name}", severity="error", timeout=8)
            return
        screen = DiffScreen(key)
        await self.app.push_screen(screen)
        shown = await asyncio.to_thread(prepare, diff)
        if screen in self.app.screen_stack:  # (not closed meanwhile)
            screen.show(shown)

    def action_pull(self) -> None:
        if view := self.need_box():
            self.app.run_request(PullRequest(view.name, view.host))

    def action_pr(self) -> None:
        """Asks first, naming where the work goes: it changes the remote."""
        from rich.text import Text

        from hbtui.tui.dialogs.confirm import ConfirmDialog

        view = self.need_box()
        if view is None:
            return
        try:
            work = self.service.work.record(view.name, view.host)
        except HbtuiError as exc:
            self.app.notify(describe(exc), title=f"pr {view.name}", severity="error", timeout=8)
            return
        if len(work.repos) > 1:
            names = ", ".join(r.name for r in work.repos)
            self.app.notify(
                f"{view.name} has {len(work.repos)} repositories ({names}): "
                f"hbtui pr {view.name} --repo NAME",
                title=f"pr {view.name}",
                severity="warning",
                timeout=8,
            )
            return
        question = Text.assemble(
            "Pull ", (view.name, "bold"), f"'s work into {work.first.repo}, push ",
            (work.first.branch, "bold"), " to ", ("origin", "bold"), " as ",
            (work.first.branch, "bold"), " and open a pull request (with gh, when logged in)?",
        )  # fmt: skip
        self.app.push_screen(
            ConfirmDialog(f"Pull request from {view.name}", question, yes="Push", no="Not now"),
            partial(self._land, LandRequest(view.name, view.host)),
        )

    def _land(self, request: LandRequest, yes: bool | None) -> None:
        if yes:
            self.app.run_request(request)

    def action_try(self) -> None:
        """The compare view of the try the selected box belongs to (NAME-K)."""
        from hbtui.tui.work.compare import TryScreen

        view = self.need_box()
        if view is None:
            return
        try:
            record, box = self.service.tries.of(view.name, view.host)
        except HbtuiError as exc:
            self.app.notify(describe(exc), title=f"try of {view.name}", severity="warning")
            return
        self.app.push_screen(TryScreen(record.name, view.host, box))

    def ask_try_rows(self, screen: TryScreen) -> None:
        self.app.start(partial(self._try_rows, screen), "try")

    async def _try_rows(self, screen: TryScreen) -> None:
        """The try's rows (its checks may run meanwhile); a view closed by then is left be."""
        try:
            record, rows = await self.service.tries.rows(screen.try_name, screen.host)
        except Exception as exc:  # the view says why, whatever broke
            if screen in self.app.screen_stack:
                screen.show(None, [], Failure.of(exc))
            return
        if screen in self.app.screen_stack:
            screen.show(record, rows)

    def keep(self, screen: TryScreen, box: str) -> None:
        """Keep `box` (confirmed in the view): its work pulled, the try's other boxes removed."""
        operation = self.app.run_request(KeepRequest(box, screen.host))
        if operation is not None:
            operation.then = partial(self._kept, screen)

    def _kept(self, screen: TryScreen) -> None:
        """The try is gone once a box was kept: back to the boxes."""
        if self.app.screen is screen:
            self.app.pop_screen()
