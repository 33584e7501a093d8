"""Help: every key of the dashboard, as currently mapped, and where to remap it."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Label, Static

from hbtui.tui.dialogs.base import DIALOG_CSS
from hbtui.tui.screens.main import KEYS

# Keys that belong to widgets rather than to the dashboard's actions.
OTHER_KEYS = (
    ("↑ ↓ PgUp PgDn", "move in the table or the focused log"),
    ("tab / shift+tab", "move focus: table, log, port grid"),
    ("end", "in a log: jump to the end and follow again"),
    ("/  n N", "in a log: search it, next/previous match (esc clears)"),
    ("W  E  f", "in a log: wrap long lines, jump to the last error, full screen"),
    ("← → ↑ ↓ enter", "in the port grid: move, use the port (new-box dialog)"),
    ("ctrl+p", "command palette: every action by name"),
    ("esc", "close a dialog, clear the filter"),
)


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
                    ". Ids are the first column.",
                ),
                classes="hint",
            )

    def on_mount(self) -> None:
        table: DataTable[str | Text] = self.query_one(DataTable)
        # The descriptions wrap in whatever width is left, down to an 80-column terminal.
        # (the dialog is 110 wide at most; its border, padding, the other columns and
        # the scroll bar take about 40)
        does = max(min(110, self.app.size.width) - 40, 20)
        table.add_column("Id")
        table.add_column("Key")
        table.add_column("Does", width=does)
        for ident, key, _action, _label, title, help_text in KEYS:
            keys = self.keymap.get(ident, key)
            shown = ", ".join(
                self.app.get_key_display(Binding(k.strip(), "")) for k in keys.split(",")
            )
            table.add_row(ident, Text(shown, style="bold"), f"{title}: {help_text}", height=None)
        for key, what in OTHER_KEYS:
            table.add_row("", Text(key, style="bold"), what, height=None)
