"""Save several marked boxes at once: one passphrase for all, each archive in the
backups folder under its box's own name (a single destination file cannot hold
several archives, so there is no destination field)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.widgets import Static

from hbtui.core.foundation import BoxView
from hbtui.tui.archives.dialogs import SaveFields, SaveRequest
from hbtui.tui.dialogs.base import Dialog, Form

if TYPE_CHECKING:
    from hbtui.core.service import Service


class BulkSaveDialog(Dialog[SaveRequest]):
    """Dismissed with the request for the first box (`service`: as Save is given it; the
    folder needs no check); the App makes one of it for each."""

    TITLE_TEXT = "Save boxes"

    def __init__(self, service: Service, views: list[BoxView]) -> None:
        super().__init__()
        self.views = views
        self.fields = SaveFields("Verify each archive after writing it")

    def compose_body(self) -> ComposeResult:
        names = ", ".join(v.name for v in self.views)
        with Form("Save", self.fields.problem, self.save):
            yield Static(
                f"Save {len(self.views)} boxes ({names}) to encrypted archives in the backups "
                "folder, one each, all with this passphrase (each box is paused while it is "
                "saved).",
                markup=False,
            )
            yield from self.fields.compose()

    def on_mount(self) -> None:
        self.focus_field(self.fields.passphrase.field)

    def save(self) -> None:
        self.dismiss(self.fields.request(self.views[0]))
