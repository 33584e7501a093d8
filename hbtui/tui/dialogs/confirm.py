"""A yes/no question, and the screen that watches operations roll back before quitting.

`ConfirmDialog` dismisses with True or False: enter or `y` on its first
button, escape or `n` keeps things as they are. `QuitScreen` is what the
dashboard shows once it has cancelled its operations on the way out: each
one and the last thing it reported, until the App exits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from hbtui.tui.dialogs.base import DIALOG_CSS
from hbtui.tui.widgets.key_footer import KeyFooter


class ConfirmDialog(ModalScreen[bool]):
    CSS_PATH = DIALOG_CSS
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "answer(False)", "No"),
        Binding("y", "answer(True)", "Yes"),
    ]

    def __init__(self, title: str, question: Text | str, yes: str, no: str) -> None:
        super().__init__()
        self.title_text = title
        self.question = question
        self.yes = yes
        self.no = no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title", markup=False)
            yield Static(self.question, id="question", markup=False)
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", variant="error", id="yes")
                yield Button(f"{self.no} (n)", id="no")
        yield KeyFooter(compact=True)  # this screen's keys, over the main screen's

    def on_mount(self) -> None:
        self.query_one("#yes", Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class QuitScreen(ModalScreen[None]):
    """Operations rolling back on the way out; it has no keys: the App exits when they end."""

    CSS_PATH = DIALOG_CSS
    EVERY = 0.2  # seconds between looks at the operations

    def __init__(self, progress: Callable[[], list[Text]]) -> None:
        super().__init__()
        self.progress = progress  # one line per operation cancelled on the way out

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Quitting", classes="dialog-title")
            yield Static("Cancelled; waiting for the rollback of:")
            yield Static(id="operations", markup=False)
        yield KeyFooter(compact=True)  # this screen's keys, over the main screen's

    def on_mount(self) -> None:
        self.show_progress()
        self.set_interval(self.EVERY, self.show_progress)

    def show_progress(self) -> None:
        self.query_one("#operations", Static).update(Text("\n").join(self.progress()))
