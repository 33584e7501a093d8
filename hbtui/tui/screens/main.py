"""The dashboard's main screen: box table, log pane, port allocator.

The screen only lays out and routes: key bindings name App actions (so the
command palette and the keymap see one set of ids), selection changes are
passed to the log pane and the port grid, and `/` filters the table.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from hbtui.tui.widgets.box_table import BoxTable
from hbtui.tui.widgets.log_pane import LogPane
from hbtui.tui.widgets.port_grid import PortGrid

# (id, key, action, footer label, palette title, palette help)
KEYS: tuple[tuple[str, str, str, str, str, str], ...] = (
    (
        "enter",
        "enter",
        "enter_box",
        "Enter",
        "Enter box",
        "Open a shell as agent in the box's tmux session (the dashboard steps aside)",
    ),
    ("open", "o", "open_web", "Web", "Open web UI", "Open the box's executor URL in a browser"),
    ("new", "n", "new_box", "New", "New box", "Create and provision a new box"),
    ("start", "s", "start_box", "Start", "Start box", "Start the selected box"),
    ("stop", "x", "stop_box", "Stop", "Stop box", "Quiesce and stop the selected box"),
    (
        "delete",
        "d",
        "delete_box",
        "Delete",
        "Delete box",
        "Delete the selected box after typing its name",
    ),
    ("save", "w", "save_box", "Save", "Save box", "Save the selected box to an encrypted archive"),
    ("load", "l", "load_box", "Load", "Load archive", "Make a new box from an archive"),
    (
        "extract",
        "e",
        "extract_archive",
        "Extract",
        "Extract archive",
        "Unpack an archive's files into a folder",
    ),
    ("refresh", "r", "refresh_now", "Refresh", "Refresh", "List the boxes again now"),
    ("filter", "slash", "filter", "Filter", "Filter boxes", "Show only boxes matching words"),
    ("sort", "S", "cycle_sort", "Sort", "Cycle sort column", "Sort by the next column"),
    (
        "logs",
        "t",
        "toggle_logs",
        "Logs",
        "Toggle log tab",
        "Switch between the operation log and the workload log",
    ),
    (
        "ports",
        "p",
        "toggle_ports",
        "Ports",
        "Port allocator",
        "Show or hide the map of the port range",
    ),
    ("help", "question_mark", "help", "Help", "Help", "Every key and what it does"),
    ("quit", "q", "quit", "Quit", "Quit", "Leave the dashboard (operations are cancelled)"),
)


class MainScreen(Screen):
    BINDINGS = [
        Binding(
            key,
            f"app.{action}",
            label,
            id=ident,
            priority=(ident == "enter"),
            show=ident not in ("sort", "logs", "extract"),
        )
        for ident, key, action, label, _title, _help in KEYS
    ] + [Binding("escape", "clear_filter", "Clear filter", show=False)]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder="filter: words that must all appear (esc clears)", id="filter")
        yield BoxTable(id="boxes")
        with Horizontal(id="lower"):
            yield LogPane(id="log-pane")
            with Vertical(id="ports-panel"):
                yield Static("Port allocator", classes="panel-title")
                yield PortGrid(id="port-grid")
        yield Static("", id="host-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(BoxTable).focus()
        # The first listing (and the log it selects) waits for the first frame.
        self.call_after_refresh(self.app.start_refreshing)

    @property
    def table(self) -> BoxTable:
        return self.query_one(BoxTable)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    @property
    def port_grid(self) -> PortGrid:
        return self.query_one(PortGrid)

    def show_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display or box.value:
            box.value = ""
            box.display = False
            self.table.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.table.filter_text = event.value
            self.app.redraw_table()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                event.input.display = False
            self.table.focus()

    def on_box_table_row_highlighted(self, event: BoxTable.RowHighlighted) -> None:
        self.app.selection_changed(self.table.selected_key())
