"""Archives: the keys that save a box (`w`, one or every marked box), load an archive
into a new box (`l`) and extract one into a folder (`e`).

Each opens its dialog and runs the request it returns as an operation, its progress in a
window (progress.py); a bulk save shows each box's in its row instead. A passphrase the
archive refuses asks again, the rest of the request kept. The archive picked is offered
first by the next Load or Extract.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from hbtui.core.foundation import BoxView
from hbtui.errors import HbtuiError
from hbtui.tui.failure import Failure
from hbtui.tui.feature import Feature
from hbtui.tui.operations import Operation, Teller, Told

if TYPE_CHECKING:
    from hbtui.tui.archives.dialogs import ExtractRequest, LoadRequest, SaveRequest


def saved(operation: Operation, result: object) -> Told:
    return Told(f"saved to {result}", f"{operation.label}: done", 10)


def extracted(_operation: Operation, result: object) -> Told:
    return Told(f"extracted into {result}", "extract: done", 10)


class Archives(Feature):
    # How each one's success is told (the App looks its operations up here).
    TOLD: ClassVar[dict[str, Teller]] = {"save": saved, "extract": extracted}

    def action_save(self) -> None:
        from hbtui.tui.archives.dialogs import SaveDialog

        views = self.chosen()
        if any(self.refuse_busy(view) for view in views):
            return
        if len(views) == 1:
            self.app.push_screen(SaveDialog(self.service, views[0]), self.save)
        elif views:
            from hbtui.tui.archives.bulk import BulkSaveDialog

            dialog = BulkSaveDialog(self.service, views)
            self.app.push_screen(dialog, partial(self._save_all, views))

    def _save_all(self, views: list[BoxView], request: SaveRequest | None) -> None:
        """One passphrase for every marked box; each saves to the backups folder, and its
        progress shows in its row and log (one progress window per box would pile up)."""
        if request is None:
            return
        self.app.main.clear_marks()
        for view in views:
            self.app.run_request(
                replace(request, spec=replace(request.spec, name=view.name, host=view.host))
            )

    def save(self, request: SaveRequest | None) -> None:
        if request is not None:
            self._show_progress(self.app.run_request(request), f"Saving {request.spec.name}")

    def action_load(self, again: LoadRequest | None = None, failure: Failure | None = None) -> None:
        """The Load dialog; `again`: the request whose passphrase was wrong, to ask for the
        passphrase once more (its archive, name and host kept, `failure` said)."""
        from hbtui.tui.archives.dialogs import LoadDialog

        dialog = LoadDialog(self.service, self.taken(), again, failure)
        self.app.push_screen(dialog, self.load)

    def load(self, request: LoadRequest | None) -> None:
        if request is None:
            return
        spec = request.spec
        self._remember(spec.archive)
        operation = self.app.run_request(request)
        if operation is not None:
            operation.ask_again = partial(self.action_load, request)
        self._show_progress(operation, f"Loading {spec.archive.name} into {spec.name}")

    def action_extract(
        self, again: ExtractRequest | None = None, failure: Failure | None = None
    ) -> None:
        """The Extract dialog (`again`, `failure`: as for Load)."""
        from hbtui.tui.archives.dialogs import ExtractDialog

        self.app.push_screen(ExtractDialog(self.service, (), again, failure), self.extract)

    def extract(self, request: ExtractRequest | None) -> None:
        if request is None:
            return
        self._remember(request.archive)
        operation = self.app.run_request(request)
        if operation is not None:
            operation.ask_again = partial(self.action_extract, request)
        self._show_progress(operation, f"Extracting {request.archive.name}")

    def _remember(self, archive: Path) -> None:
        """The archive picked, offered first by the next Load or Extract (in any run)."""
        try:
            self.service.archives.remember(archive)
        except HbtuiError as exc:
            self.app.notify(exc.message, title="cannot remember the archive", severity="warning")

    def _show_progress(self, operation: Operation | None, title: str) -> None:
        from hbtui.tui.archives.progress import ProgressScreen

        if operation is not None:
            screen = ProgressScreen(operation, title)
            operation.progress = screen
            self.app.push_screen(screen)
