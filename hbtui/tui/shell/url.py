"""No browser could be opened: the URL, to copy or to open elsewhere."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Static

from hbtui.tui.dialogs.base import Dialog, Field


class UrlDialog(Dialog[None]):
    """No browser could be opened: say so, and offer the URL to copy (OSC 52, through the
    terminal, so it works over SSH too) or to open elsewhere."""

    TITLE_TEXT = "No browser here"

    def __init__(self, name: str, url: str, why: str) -> None:
        super().__init__()
        self.box = name
        self.url = url
        self.why = why

    def compose_body(self) -> ComposeResult:
        yield Static(
            f"Could not open a browser ({self.why}). The web UI of {self.box} is at:", markup=False
        )
        yield Field(value=self.url, id="url")
        yield Static(
            "Copy puts it on your clipboard through the terminal (OSC 52; some terminals "
            "ask you to allow that).",
            classes="hint",
        )
        with Horizontal(classes="buttons"):
            yield Button("Copy URL", variant="primary", id="copy")
            yield Button("Close", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#copy", Button).focus()

    @on(Button.Pressed, "#copy")
    def copy(self) -> None:
        self.app.copy_to_clipboard(self.url)
        self.app.notify(self.url, title="URL copied to the clipboard")
        self.dismiss(None)
