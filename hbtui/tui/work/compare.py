"""The compare view (`T`): the boxes of a try side by side, as `hbtui try ls NAME` shows
them — each box's agent status, its diffstat and its check — and `k` to keep one.

The work feature asks `Service.tries.rows` (which may run a settled box's check, so the answer can
take a while) and hands the answer over with `show()`. Keep asks first, then the App runs
`Service.tries.keep` as an operation (see work/controller.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from hbtui import boxtext
from hbtui.tui.actions import TRY
from hbtui.tui.failure import Failure
from hbtui.tui.keys import bindings
from hbtui.tui.work.diff import fill_table

if TYPE_CHECKING:
    from hbtui.core.tries import CheckResult, TryRecord, TryRow

HEADERS = ("box", "agent", "commits", "files", "+/-", "check")


def check_text(row: TryRow, command: str) -> Text:
    """pass, fail (status), could not run, or - (not checked yet)."""
    check = row.check
    if check is None:
        return Text("-" if command else "", style="dim")
    if check.status is None:
        return Text("could not run", style="red")
    if check.passed:
        return Text("pass", style="green")
    return Text(f"fail ({check.status})", style="red")


class TryScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = bindings(TRY)  # see hbtui/tui/actions.py

    DEFAULT_CSS = """
    TryScreen #try-summary { height: auto; padding: 0 1; }
    TryScreen #try-rows { height: auto; max-height: 20; }
    TryScreen #try-output { height: 1fr; padding: 0 1; border-top: solid $primary; }
    """

    @dataclass
    class Wanted(Message):
        """Ask the boxes of the try (again)."""

        screen: TryScreen

    @dataclass
    class Keep(Message):
        """Keep `box` (confirmed): pull its work, remove the try's other boxes."""

        screen: TryScreen
        box: str

    @dataclass
    class DiffOf(Message):
        """Open the diff view of one of the try's boxes."""

        box: str
        host: str

    def __init__(self, name: str, host: str, box: str = "") -> None:
        super().__init__()
        self.try_name = name
        self.host = host
        self.start_box = box  # the box it was opened from: the cursor starts there
        self.record: TryRecord | None = None
        self.rows: list[TryRow] = []
        self.loading = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(Text(f"asking the boxes of {self.try_name}…"), id="try-summary", markup=False)
        yield DataTable(id="try-rows", cursor_type="row", zebra_stripes=True)
        yield Static("", id="try-output", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"try {self.try_name} on {self.host}"
        self.query_one(DataTable).focus()
        self.action_reload()

    def action_reload(self) -> None:
        if not self.loading:
            self.loading = True
            self.post_message(self.Wanted(self))

    def show(
        self, record: TryRecord | None, rows: list[TryRow], failure: Failure | None = None
    ) -> None:
        """The try's boxes, or why they could not be asked."""
        self.loading = False
        summary = self.query_one("#try-summary", Static)
        if record is None:
            why = failure.text if failure is not None else ""
            summary.update(Text(f"try {self.try_name}: {why}", style="bold red"))
            return
        selected = self.selected() or self.start_box  # (before the rows change)
        self.record, self.rows = record, rows
        text = Text.assemble(
            (f"try {record.name}", "bold"),
            f": {len(rows)} box(es) from {record.repo} at {record.seed[:12]} · check: ",
            (record.check or "none", "italic"),
            ("\nk keeps the box under the cursor (its work pulled, the others removed)", "dim"),
        )
        summary.update(text)
        table: DataTable[Text] = self.query_one(DataTable)
        cells = []
        for r in rows:
            if r.error:
                work = [Text(boxtext.line(r.error), style="red"), Text(""), Text("")]
            else:
                work = [Text(str(r.commits)), Text(str(r.files)), Text(f"+{r.added} -{r.deleted}")]
            cells.append([Text(r.box), Text(r.agent), *work, check_text(r, record.check)])
        fill_table(table, HEADERS, cells)
        names = [r.box for r in rows]
        if selected in names:
            table.move_cursor(row=names.index(selected))
        self._show_output()

    def selected(self) -> str:
        table: DataTable[Text] = self.query_one(DataTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return ""
        return self.rows[table.cursor_row].box

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_output()

    def _show_output(self) -> None:
        """The end of the check's output of the box under the cursor, under how its agent
        ended at its start if it did (text from the box: plain, never markup)."""
        box = self.selected()
        row = next((r for r in self.rows if r.box == box), None)
        check: CheckResult | None = row.check if row is not None else None
        output = self.query_one("#try-output", Static)
        if check is None:
            shown = Text(f"{box}: no check result yet" if box else "", style="dim")
        else:
            shown = Text(f"{box}: the check's output (its end)\n", style="bold")
            shown.append_text(Text(boxtext.lines(check.output)))
        if row is not None and row.note:  # how its agent ended at its start (the box's words)
            shown = Text.assemble((f"{box}: {boxtext.line(row.note)}\n", "yellow"), shown)
        output.update(shown)

    def action_keep(self) -> None:
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        box = self.selected()
        if self.record is None or not box:
            self.notify("no box to keep yet", severity="warning")
            return
        others = [b for b in self.record.boxes if b != box]
        question = Text.assemble(
            "Pull ",
            (box, "bold"),
            f"'s work into {self.record.repo} and remove ",
            (", ".join(others) or "no other box", "bold"),
            "?",
        )
        self.app.push_screen(
            ConfirmDialog(f"Keep {box}", question, yes="Keep it", no="Not now"),
            partial(self._keep, box),
        )

    def _keep(self, box: str, yes: bool | None) -> None:
        if yes:
            self.post_message(self.Keep(self, box))

    def action_diff(self) -> None:
        if box := self.selected():
            self.post_message(self.DiffOf(box, self.host))
