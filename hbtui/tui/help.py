"""Help: every key of the dashboard, as currently mapped, and where to remap it."""

from __future__ import annotations

from typing import ClassVar

from rich.cells import cell_len
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
    # The table's own End and Home move sideways (to its last column): here they, and
    # G and g as in a pager, go to the end and the top of the keys.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,question_mark", "dismiss", "Close"),
        Binding("end,G", "to_end", "End", show=False, priority=True),
        Binding("home,g", "to_top", "Top", show=False, priority=True),
    ]

    def __init__(self, keymap: dict[str, str]) -> None:
        super().__init__()
        self.keymap = keymap
        self._does = 0  # the descriptions' width the table was filled for

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
                markup=False,
            )
        yield KeyFooter(compact=True)  # this screen's keys, over the main screen's

    def on_mount(self) -> None:
        self._fill(self.app.size.width)

    def action_to_end(self) -> None:
        self.query_one(DataTable).scroll_end(animate=False)

    def action_to_top(self) -> None:
        self.query_one(DataTable).scroll_home(animate=False)

    def on_resize(self) -> None:
        self._fill(self.app.size.width)

    def _fill(self, width: int) -> None:
        """The keys, the descriptions wrapping in whatever width the other columns leave:
        the window (110 wide at most) less its border and padding (6), the table's scroll
        bar (2), and each column's widest text with its cell padding (2 each). Wider, the
        ends of the descriptions were cut off at 80 columns."""
        rows = []
        for action in ACTIONS:
            keys = self.keymap.get(action.id, action.keys)
            shown = ", ".join(
                self.app.get_key_display(Binding(k.strip(), "")) for k in keys.split(",")
            )
            where = SCOPE_NAMES[action.scope] or action.title
            rows.append((action.id, shown, f"{where}: {action.help}" if where else action.help))
        id_width = max(cell_len(r[0]) for r in rows)
        key_width = max(cell_len(r[1]) for r in rows)
        does = max(min(110, width) - 6 - 2 - (id_width + 2) - (key_width + 2) - 2, 20)
        if does == self._does:
            return
        self._does = does
        table: DataTable[str | Text] = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_column("Id", width=id_width)
        table.add_column("Key", width=key_width)
        table.add_column("Does", width=does)
        for ident, shown, what in rows:
            table.add_row(ident, Text(shown, style="bold"), what, height=None)
