"""The secrets file's passphrase, asked in a dialog: the dashboard never prompts on the
terminal (a read there would stop its event loop). The dialog opens the file through
the Service and dismisses with True once it is open; a wrong passphrase is said in it."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.widgets import Button, Input, Label, Static

from hbtui.environment import SECRETS_PASSPHRASE_ENV
from hbtui.errors import HbtuiError
from hbtui.tui.dialogs.base import Dialog, Passphrase, ok_cancel

if TYPE_CHECKING:
    from hbtui.core.service import Service


class SecretsPassphraseDialog(Dialog[bool]):
    TITLE_TEXT = "Secrets passphrase"

    def __init__(self, service: Service, why: str) -> None:
        super().__init__()
        self.service = service
        self.why = why  # what needs the secrets ("start web")
        self.passphrase = Passphrase(twice=False)

    def compose_body(self) -> ComposeResult:
        yield Static(
            f"{self.why} needs the keys in the encrypted secrets file. Its passphrase "
            f"opens it for this session (set {SECRETS_PASSPHRASE_ENV} before starting "
            "hbtui to skip this question).",
            markup=False,
        )
        yield from self.passphrase.compose()
        yield Label("", id="error", classes="problem", markup=False)
        yield from ok_cancel("Unlock")

    def on_mount(self) -> None:
        self.focus_field(self.passphrase.field)

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def submit(self, event: Input.Submitted | Button.Pressed) -> None:
        self.as_submitted(event)
        typed = self.passphrase.take()
        if not typed:
            self.query_one("#error", Label).update("type the passphrase")
            return
        self.query_one("#ok", Button).disabled = True
        self.unlock(typed)

    @work(exclusive=True, group="unlock", exit_on_error=False)
    async def unlock(self, passphrase: bytes) -> None:
        """Decrypting is a thread's work: the loop goes on meanwhile."""
        try:
            await asyncio.to_thread(self.service.secrets.unlock, passphrase)
        except HbtuiError as exc:
            self.query_one("#error", Label).update(exc.message)
            self.query_one("#ok", Button).disabled = False
            self.passphrase.field.focus()
            return
        self.dismiss(True)
