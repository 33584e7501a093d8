"""The keys that act on boxes: each opens its dialog (or acts at once) and runs the
request the dialog returns.

Dialogs are imported when first used: the first frame does not need them.
A box busy with an operation, here or in another hbtui process, is refused
before any dialog is filled.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.core.foundation import BoxView
from hbtui.errors import HbtuiError
from hbtui.tui.activity import BoxKey
from hbtui.tui.failure import Failure
from hbtui.tui.requests import StartRequest, StopRequest
from hbtui.tui.shell.controller import WebAndShell

if TYPE_CHECKING:
    from hbtui.tui.dialogs.archive import ExtractRequest, LoadRequest, SaveRequest
    from hbtui.tui.dialogs.branch import BranchRequest
    from hbtui.tui.dialogs.new import NewBoxDialog
    from hbtui.tui.requests import RemoveRequest


class BoxActions(WebAndShell):
    _new_dialog: NewBoxDialog | None = None  # composed at its first opening, then kept

    def _chosen(self) -> list[BoxView]:
        """The marked boxes (a bulk action), else the selected one."""
        views = self.main.chosen_views()
        if not views:
            self.notify("select a box first", severity="warning")
        return views

    def _refuse_busy(self, view: BoxView) -> bool:
        """Say so (before any dialog is filled) when the box is busy with an operation,
        here or in another hbtui process (the core's per-box lock)."""
        activity = self.activities.get((view.host, view.name))
        if activity is not None and activity.running:
            busy = activity.operation
        elif view.busy is not None and view.busy.held:  # another process runs one on it
            busy = str(view.busy)
        else:
            return False
        self.notify(
            f"{view.name} is busy with {busy}; try again when it is done", severity="warning"
        )
        return True

    def _taken(self) -> set[BoxKey]:
        """(host, name) of every box listed or being made: names a new box cannot have."""
        listing = self.main.listing
        taken = {(b.host, b.name) for b in listing.boxes} if listing is not None else set()
        return taken | {key for key, a in self.activities.items() if a.running}

    def action_new_box(self, port: int | None = None) -> None:
        """The new-box dialog (with `port` picked, from the port allocator); it posts its
        request (see Running.on_new_box_dialog_requested) and stays until the box exists.
        It is composed once and kept (installed) for the next time: composing its widgets
        was most of what opening it cost; opened again, it starts as a new one would."""
        from hbtui.tui.dialogs.new import NewBoxDialog

        dialog = self._new_dialog
        if dialog is not None and dialog not in self.screen_stack:
            dialog.reopen(self._taken(), port=port)
        else:
            dialog = NewBoxDialog(self.service, self._taken(), port=port)
            if self._new_dialog is None:
                self._new_dialog = dialog
                self.install_screen(dialog, "new-box")
        self.push_screen(dialog)

    def action_branch_box(self) -> None:
        from hbtui.tui.dialogs.branch import BranchDialog

        view = self._need_box()
        if view is None or self._refuse_busy(view):
            return
        self.push_screen(BranchDialog(self.service, view, self._taken()), self._branch)

    def _branch(self, request: BranchRequest | None) -> None:
        if request is not None:
            self.run_request(request)

    def action_start_box(self) -> None:
        for view in self._chosen():
            self.run_request(StartRequest(view.name, view.host))
        self.main.clear_marks()

    def action_stop_box(self) -> None:
        for view in self._chosen():
            self.run_request(StopRequest(view.name, view.host))
        self.main.clear_marks()

    def action_remove_box(self) -> None:
        from hbtui.tui.dialogs.remove import RemoveDialog

        view = self._need_box()
        if view is None:
            return
        key = (view.host, view.name)
        if not self.main.listed(key):
            # A row for a creation that failed: nothing exists, just forget it.
            activity = self.activities.get(key)
            if activity is not None and activity.running:
                self.notify(f"{view.name} is busy with {activity.operation}", severity="warning")
            else:
                self.activities.pop(key, None)
                self.main.redraw()
            return
        if not self._refuse_busy(view):
            self.push_screen(RemoveDialog(view), self._remove)

    def _remove(self, request: RemoveRequest | None) -> None:
        if request is not None:
            self.run_request(request)

    def action_save_box(self) -> None:
        from hbtui.tui.dialogs.archive import SaveDialog

        views = self._chosen()
        if any(self._refuse_busy(view) for view in views):
            return
        if len(views) == 1:
            self.push_screen(SaveDialog(self.service, views[0]), self._save)
        elif views:
            from hbtui.tui.dialogs.bulk import BulkSaveDialog

            self.push_screen(BulkSaveDialog(self.service, views), partial(self._save_all, views))

    def _save_all(self, views: list[BoxView], request: SaveRequest | None) -> None:
        """One passphrase for every marked box; each saves to the backups folder, and its
        progress shows in its row and log (one progress window per box would pile up)."""
        if request is None:
            return
        self.main.clear_marks()
        for view in views:
            self.run_request(
                replace(request, spec=replace(request.spec, name=view.name, host=view.host))
            )

    def _save(self, request: SaveRequest | None) -> None:
        if request is not None:
            self._show_progress(self.run_request(request), f"Saving {request.spec.name}")

    def action_load_box(
        self, again: LoadRequest | None = None, failure: Failure | None = None
    ) -> None:
        """The Load dialog; `again`: the request whose passphrase was wrong, to ask for the
        passphrase once more (its archive, name and host kept, `failure` said)."""
        from hbtui.tui.dialogs.archive import LoadDialog

        why = failure.text if failure is not None else ""
        self.push_screen(LoadDialog(self.service, self._taken(), again, why), self._load)

    def _remember(self, archive: Path) -> None:
        """The archive picked, offered first by the next Load or Extract (in any run)."""
        try:
            self.service.remember_archive(archive)
        except HbtuiError as exc:
            self.notify(exc.message, title="cannot remember the archive", severity="warning")

    def _load(self, request: LoadRequest | None) -> None:
        if request is None:
            return
        spec = request.spec
        self._remember(spec.archive)
        operation = self.run_request(request)
        if operation is not None:
            operation.ask_again = partial(self.action_load_box, request)
        self._show_progress(operation, f"Loading {spec.archive.name} into {spec.name}")

    def action_extract_archive(
        self, again: ExtractRequest | None = None, failure: Failure | None = None
    ) -> None:
        """The Extract dialog (`again`, `failure`: as for Load)."""
        from hbtui.tui.dialogs.archive import ExtractDialog

        why = failure.text if failure is not None else ""
        self.push_screen(ExtractDialog(self.service, (), again, why), self._extract)

    def _extract(self, request: ExtractRequest | None) -> None:
        if request is None:
            return
        self._remember(request.archive)
        operation = self.run_request(request)
        if operation is not None:
            operation.ask_again = partial(self.action_extract_archive, request)
        self._show_progress(operation, f"Extracting {request.archive.name}")

    def action_help(self) -> None:
        from hbtui.tui.help import HelpScreen

        self.push_screen(HelpScreen(self.keymap))
