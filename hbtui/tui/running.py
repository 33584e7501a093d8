"""Running operations: start one from a request, route its events, end it, cancel it.

Each running operation is one `Operation` record in `self.operations`. Its
progress events feed the box's `Activity` (its log buffer), so several run
at once and each keeps its own log. A making operation (new, branch, load)
keeps its log to itself until the core has reserved its box, so a name
already taken never touches another box's row. Quitting cancels what runs
and waits for each rollback.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.worker import Worker

from hbtui.core.foundation import BoxView
from hbtui.events import Phase, Reserved
from hbtui.tui import plain
from hbtui.tui.activity import Activity, BoxKey
from hbtui.tui.failure import Failure
from hbtui.tui.operations import Call, Operation, OperationEvents, OperationFinished
from hbtui.tui.queries import Queries
from hbtui.tui.requests import Request

if TYPE_CHECKING:
    from hbtui.tui.dialogs.new import NewBoxDialog

OPERATIONS = "operations"  # the worker group of calls that change something


class Running(Queries):
    def owner(self, key: BoxKey) -> Operation | None:
        """The operation running on this box (a making one once it has reserved it)."""
        return next(
            (o for o in reversed(self.operations) if o.key == key and o.unmade is None), None
        )

    def run_request(self, request: Request) -> Operation | None:
        """Run what a dialog asked for (see run_operation); the box it also holds (a
        branch's source) says so in its row until it ends, and takes no other operation."""
        held = (
            self.activities.setdefault(request.holds, Activity(request.holds))
            if request.holds
            else None
        )
        if held is not None and held.running:
            self.notify(f"{held.key[1]} is busy with {held.operation}", severity="warning")
            return None
        operation = self.run_operation(
            request.key,
            request.operation,
            partial(request.call, self.service),
            makes=request.makes,
        )
        if operation is not None and held is not None and request.key is not None:
            held.hold(request.operation, request.key[1])
            operation.holds = held.key
            self.main.box_changed(held.key)
        return operation

    def run_operation(
        self, key: BoxKey | None, name: str, call: Call, *, makes: bool = False
    ) -> Operation | None:
        """Run one Service call that changes something; its events go to the box's log.

        Returns None (and says why) when the box is busy with another operation.
        A making operation (`makes`: new, load) keeps its log to itself until the
        core has reserved its box: a name already taken, or anything else refused
        before a box exists, never touches another box's row.
        """
        operation = Operation(name, key, self, makes=makes)
        if operation.unmade is None and key is not None:
            activity = self.activities.setdefault(key, Activity(key))
            if activity.running:
                self.notify(f"{key[1]} is busy with {activity.operation}", severity="warning")
                return None
            activity.begin(name)
            self.main.box_changed(key)
        self.operations.append(operation)
        operation.call = call
        operation.worker = self.run_worker(
            partial(self._operate, operation, call),
            group=OPERATIONS,
            exit_on_error=False,
            description=operation.label,
        )
        return operation

    async def _operate(self, operation: Operation, call: Call) -> None:
        result: object = None
        failure: Failure | None = None
        try:
            result = await call(operation.report)
        except asyncio.CancelledError as exc:
            failure = Failure.of(exc)
            raise
        except Exception as exc:  # every end is told, a bug's too: as the operation's failure
            failure = Failure.of(exc)
        finally:
            operation.flush()  # the last events go before the end
            self.post_message(OperationFinished(operation, result, failure))

    def _activity_of(self, operation: Operation) -> Activity | None:
        if operation.unmade is not None:
            return operation.unmade
        return self.activities.get(operation.key) if operation.key is not None else None

    def on_operation_events(self, message: OperationEvents) -> None:
        if not self.is_running:
            return  # the dashboard is closing: its screens are going, nothing is drawn
        operation, key = message.operation, message.operation.key
        unmade = operation.unmade
        if unmade is not None:
            activity: Activity | None = unmade
        else:
            activity = self.activities.setdefault(key, Activity(key)) if key is not None else None
        progress = operation.progress
        for event in message.events:
            if activity is not None:
                activity.apply(event)
            if progress is not None:
                progress.show(event)
        if unmade is not None:
            if not any(isinstance(e, Reserved) for e in message.events):
                return  # nothing made yet: no row to show it in
            self._made(operation, unmade)
        if key is not None:
            self.main.box_changed(key)  # one repaint for the whole burst
            if any(isinstance(e, Phase) for e in message.events):
                self.refresh_listing()  # a new stage: the box's row may have changed too

    def _made(self, operation: Operation, activity: Activity) -> None:
        """The core has reserved the box a making operation makes: it gets its row."""
        assert operation.key is not None
        operation.unmade = None
        self.activities[operation.key] = activity  # a failed attempt's row and log make way
        dialog, operation.dialog = operation.dialog, None
        if dialog is not None:
            dialog.close()
        self.main.follow(operation.key)

    def _refused(self, operation: Operation, failure: Failure) -> None:
        """A making operation ended before any box existed: say so where it was asked."""
        if operation.dialog is not None:
            operation.dialog.refused(failure.text, cancelled=failure.cancelled)
        elif operation.progress is not None:
            operation.progress.finished(failure)
        else:
            self._tell_failure(operation, failure)

    def _tell_failure(self, operation: Operation, failure: Failure) -> None:
        if failure.cancelled:  # a notice: the core has undone what the operation did
            self.notify(failure.text, title=f"{operation.label}: cancelled", timeout=6)
        else:
            self.notify(
                failure.text, title=f"{operation.label} failed", severity="error", timeout=10
            )

    def on_operation_finished(self, message: OperationFinished) -> None:  # noqa: C901 (named in pyproject.toml)
        if not self.is_running:
            return  # the dashboard is closing (see on_operation_events)
        operation, failure, key = message.operation, message.failure, message.operation.key
        if operation in self.operations:
            self.operations.remove(operation)
        self._release_held(operation, failure)
        if failure is not None and failure.wrong_passphrase and operation.ask_again is not None:
            # Only the passphrase was wrong (nothing was made): ask for it again, the rest
            # of the request kept, instead of a failure to close and a form to fill again.
            if operation.progress is not None:
                operation.progress.finished(None)  # closes it
            operation.ask_again(failure)
            return
        if operation.unmade is not None:
            if failure is not None:
                self._refused(operation, failure)
                if failure.locked:
                    self._ask_to_unlock(operation, again=None)  # the dialog's Create tries again
            self.refresh_listing()
            return
        activity = self.activities.get(key) if key is not None else None
        if failure is not None and failure.locked:
            if key is not None and activity is not None:
                activity.halt("waiting for the secrets passphrase")
                self.main.box_changed(key)
            self._ask_to_unlock(operation, again=operation.call)
            return
        if activity is not None:
            if failure is not None and failure.hint and not failure.cancelled:
                activity.append(f"\x1b[2m{failure.hint}\x1b[0m")
            activity.finish(failure)
        if failure is not None:
            self._tell_failure(operation, failure)
        elif operation.name == "save":
            self.notify(f"saved to {message.result}", title=f"{operation.label}: done", timeout=10)
        elif operation.name == "extract":
            self.notify(f"extracted into {message.result}", title="extract: done", timeout=10)
        elif operation.name in ("pull", "keep"):  # what landed in the host repository
            from hbtui.tui.work.landed import landed

            self.notify(landed(message.result), title=f"{operation.label}: done", timeout=15)
        else:
            self.notify(f"{operation.label}: done", timeout=4)
        if operation.progress is not None:
            operation.progress.finished(failure)
        if operation.then is not None and failure is None:
            operation.then()
        if key is not None:
            if operation.name == "remove" and failure is None:
                self.activities.pop(key, None)  # the box is gone, and its log with it
                self.main.box_reported(key, None)
            elif isinstance(message.result, BoxView):  # the box as the call left it
                self.main.box_reported(key, message.result)
            else:
                self.main.box_changed(key)
        self.refresh_listing()

    def _release_held(self, operation: Operation, failure: Failure | None) -> None:
        """The box the operation held (a branch's source) is its own again."""
        held = self.activities.get(operation.holds) if operation.holds else None
        if held is None or not held.running:
            return
        how = "done" if failure is None else "rolled back" if failure.cancelled else "failed"
        held.let_go(f"{operation.label}: {how}")
        self.main.box_changed(held.key)

    def _ask_to_unlock(self, operation: Operation, again: Call | None) -> None:
        """The secrets file's passphrase, in a dialog (one at a time, for every operation
        that waits for it); each waiting operation runs again once the file is open."""
        from hbtui.tui.dialogs.secrets import SecretsPassphraseDialog

        if again is not None:
            self._after_unlock.append(
                partial(self.run_operation, operation.key, operation.name, again)
            )
        if self._unlocking:
            return
        self._unlocking = True
        self.push_screen(SecretsPassphraseDialog(self.service, operation.label), self._unlocked)

    def _unlocked(self, unlocked: bool | None) -> None:
        self._unlocking = False
        waiting, self._after_unlock = self._after_unlock, []
        for run_again in waiting if unlocked else ():
            run_again()

    def _show_progress(self, operation: Operation | None, title: str) -> None:
        from hbtui.tui.archives.progress import ProgressScreen

        if operation is not None:
            screen = ProgressScreen(operation, title)
            operation.progress = screen
            self.push_screen(screen)

    def on_new_box_dialog_requested(self, message: NewBoxDialog.Requested) -> None:
        """Create was pressed: the dialog stays (locked) until the box exists or was refused."""
        operation = self.run_request(message.request)
        if operation is not None:
            operation.dialog = message.dialog
            message.dialog.cancel_request = operation.cancel

    # -- cancelling, and quitting --------------------------------------------------------------

    def action_cancel_operation(self) -> None:
        """Cancel the selected box's running operation, once confirmed; the core rolls back."""
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        view = self._need_box()
        if view is None:
            return
        operation = self.owner((view.host, view.name))
        if operation is None:
            self.notify(f"nothing is running on {view.name}", severity="warning")
            return
        question = Text.assemble(
            "Cancel ",
            (operation.label, "bold"),
            "? The core rolls back what it has done so far "
            "(a box being made is removed, a box being saved is resumed).",
        )
        self.push_screen(
            ConfirmDialog("Cancel operation", question, yes="Cancel it", no="Keep going"),
            partial(self._cancel_confirmed, operation),
        )

    def _cancel_confirmed(self, operation: Operation, yes: bool | None) -> None:
        if yes and operation.worker is not None and not operation.worker.is_finished:
            operation.cancel()
            self.notify(f"{operation.label}: cancelling, rolling back…", timeout=4)

    def _running_operations(self) -> list[Worker[Any]]:
        return [w for w in self.workers if w.group == OPERATIONS and not w.is_finished]

    async def action_quit(self) -> None:
        """Quit; with operations running, ask first: they are cancelled, and their
        rollback waited for."""
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        if self._quitting:
            return  # already winding up: the quit screen shows how far
        running = self._running_operations()
        if not running:
            self.exit(return_code=self._exit_status)
            return
        question = Text(
            f"{len(running)} operation(s) running: "
            + ", ".join(w.description for w in running)
            + ".\nQuitting cancels them and waits until each has rolled back "
            "(a box being made is removed, a box being saved is resumed)."
        )
        self.push_screen(
            ConfirmDialog("Quit?", question, yes="Cancel them and quit", no="Keep working"),
            lambda yes: self._shut_down() if yes else None,
        )

    def _shut_down(self) -> None:
        """Cancel every operation, show their rollback, exit once they have all ended."""
        from hbtui.tui.dialogs.confirm import QuitScreen

        if self._quitting:
            return
        self._quitting = True
        running = self._running_operations()
        if not running:
            self.exit(return_code=self._exit_status)
            return
        for worker in running:
            worker.cancel()
        self.push_screen(QuitScreen(partial(self._rollback_progress, running)))

    def _rollback_progress(self, workers: list[Worker[Any]]) -> list[Text]:
        """One line per cancelled operation: rolled back, or the last thing it reported."""
        lines = []
        for worker in workers:
            if worker.is_finished:
                lines.append(Text.assemble(("✓ ", "green"), worker.description, " rolled back"))
                continue
            operation = next((o for o in self.operations if o.worker is worker), None)
            activity = self._activity_of(operation) if operation is not None else None
            last = plain.row(activity.lines[-1]) if activity and activity.lines else Text()
            lines.append(Text.assemble(("⟳ ", "yellow"), worker.description, ": ", last))
        return lines
