"""Save several marked boxes at once: one passphrase for all, each archive in the
backups folder under its box's own name (a single destination file cannot hold
several archives, so there is no destination field)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.widgets import Checkbox, Static

from hbtui.core.foundation import BoxView, SaveSpec
from hbtui.tui.dialogs.archive import SaveDialog, SaveRequest
from hbtui.tui.dialogs.base import passphrase_inputs

if TYPE_CHECKING:
    from hbtui.core.service import Service


class BulkSaveDialog(SaveDialog):
    TITLE_TEXT = "Save boxes"

    def __init__(self, service: Service, views: list[BoxView]) -> None:
        super().__init__(service, views[0])
        self.views = views

    def compose_form(self) -> ComposeResult:
        names = ", ".join(v.name for v in self.views)
        yield Static(
            f"Save {len(self.views)} boxes ({names}) to encrypted archives in the backups "
            "folder, one each, all with this passphrase (each box is paused while it is saved).",
            markup=False,
        )
        yield from passphrase_inputs(twice=True)
        yield Checkbox("Verify each archive after writing it", value=True, id="verify")

    def request(self) -> SaveRequest:
        return SaveRequest(
            SaveSpec(
                self.view.name, self.view.host, verify=self.query_one("#verify", Checkbox).value
            ),
            passphrase=self.take_passphrase(),
        )
