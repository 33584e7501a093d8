"""Help: every key of the dashboard, as currently mapped, and where to remap it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from hbtui.tui.actions import ACTIONS, SCOPE_NAMES
from hbtui.tui.dialogs.base import DIALOG_CSS
from hbtui.tui.widgets.key_footer import KeyFooter


class HelpScreen(ModalScreen[None]):
    CSS_PATH = DIALOG_CSS
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, keymap: dict[str, str]) -> None:
        super().__init__()
        self.keymap = keymap

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog help"):
            yield Label("hbtui dashboard keys", classes="dialog-title")
            yield DataTable(id="keys", cursor_type="none", zebra_stripes=True)
            yield Static(
                Text.assemble(
                    "Remap any key in the ",
                    ("[keymap]", "bold"),
                    " section of config.toml (",
                    ("hbtui config path", "italic"),
                    "), by id: ",
                    ('new = "ctrl+n"', "bold"),
                    ". Ids are the first column. Textual's own: tab moves the focus, ctrl+p "
                    "opens the command palette, esc closes a dialog.",
                ),
                classes="hint",
            )
        yield KeyFooter(compact=True)  # this screen's keys, over the main screen's

    def on_mount(self) -> None:
        table: DataTable[str | Text] = self.query_one(DataTable)
        # The descriptions wrap in whatever width is left, down to an 80-column terminal.
        # (the dialog is 110 wide at most; its border, padding, the other columns and
        # the scroll bar take about 40)
        does = max(min(110, self.app.size.width) - 40, 20)
        table.add_column("Id")
        table.add_column("Key")
        table.add_column("Does", width=does)
        for action in ACTIONS:
            keys = self.keymap.get(action.id, action.keys)
            shown = ", ".join(
                self.app.get_key_display(Binding(k.strip(), "")) for k in keys.split(",")
            )
            where = SCOPE_NAMES[action.scope] or action.title
            what = f"{where}: {action.help}" if where else action.help
            table.add_row(action.id, Text(shown, style="bold"), what, height=None)
