"""The diff view (`u`): a box's work since its seed — its commits, the changed files with
their status and line counts, and the patch coloured as a diff, scrollable and searchable.

The patch is text from the box. The core has removed every escape sequence from it; here
it stays plain text, coloured by rich's diff lexer (`Syntax`), never read as markup.
The lexer colours a diff line by line, so only the rows drawn are coloured (a patch of
32 MiB, the core's cap, would take over a minute as a whole); the rest of the preparing
(`prepare`) runs in a thread before the screen gets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from rich.cells import cell_len
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import DataTable, Footer, Header, Input, Static

from hbtui import boxtext
from hbtui.tui.actions import DIFF
from hbtui.tui.activity import BoxKey
from hbtui.tui.keys import bindings

if TYPE_CHECKING:
    from hbtui.core.work import WorkDiff

MATCH_STYLE = Style(color="black", bgcolor="yellow")
CURRENT_STYLE = Style(color="black", bgcolor="bright_magenta", bold=True)


@dataclass(frozen=True)
class FileEntry:
    """One changed file as the view lists it: A(dded), D(eleted), R(enamed) or M."""

    status: str
    path: str
    added: int | None  # None: binary
    deleted: int | None
    line: int  # where its part of the patch starts (-1: not in the patch)


@dataclass(frozen=True)
class ShownDiff:
    """What the view draws: the core's answer, its patch's lines, its files."""

    diff: WorkDiff
    lines: list[str]  # as they read: no escape or control, tabs expanded
    lower: list[str]  # the same in lower case, for the search
    width: int  # cells of the widest
    files: list[FileEntry]


def _header_path(line: str) -> str:
    """The path of a `diff --git a/P b/P` line when both sides name the same file."""
    rest = line[len("diff --git ") :]
    size = (len(rest) - 5) // 2
    same = rest[2 : 2 + size] == rest[5 + size :]
    return (
        rest[2 : 2 + size]
        if rest.startswith("a/") and rest[2 + size : 5 + size] == " b/" and same
        else ""
    )


def file_entries(diff: WorkDiff) -> list[FileEntry]:
    """The core's per-file counts, with each file's status and place read from the patch
    (git's own headers: `new file mode`, `deleted file mode`, `rename to`)."""
    status: dict[str, str] = {}
    start: dict[str, int] = {}
    path, kind, at = "", "M", -1

    def close() -> None:
        if path:
            status[path], start[path] = kind, at

    for number, line in enumerate(_lines(diff)):
        if line.startswith("diff --git "):
            close()
            path, kind, at = _header_path(line), "M", number
        elif at >= 0 and line.startswith("new file mode"):
            kind = "A"
        elif at >= 0 and line.startswith("deleted file mode"):
            kind = "D"
        elif at >= 0 and line.startswith("rename to "):
            path, kind = line[len("rename to ") :], "R"
        elif at >= 0 and not path and line.startswith(("+++ b/", "--- a/")):
            path = line[6:]
    close()
    return [
        FileEntry(status.get(f.path, "M"), f.path, f.added, f.deleted, start.get(f.path, -1))
        for f in diff.files
    ]


def _lines(diff: WorkDiff) -> list[str]:
    # The core removed every escape sequence already; once more here, where the text
    # meets the terminal, costs little. Unicode's own line breaks would break a row.
    patch = boxtext.lines(diff.patch or "").removesuffix("\n")
    patch = patch.replace("\u2028", " ").replace("\u2029", " ")
    return [line.expandtabs(8) for line in patch.split("\n")] if patch else []


def prepare(diff: WorkDiff) -> ShownDiff:
    """The patch's lines, its widest line and its files (run in a thread)."""
    lines = _lines(diff)
    width = max((len(line) if line.isascii() else cell_len(line) for line in lines), default=0)
    return ShownDiff(diff, lines, [line.lower() for line in lines], width, file_entries(diff))


def fill_table(table: DataTable[Text], headers: tuple[str, ...], rows: list[list[Text]]) -> None:
    """Columns as wide as their widest cell and the height of header and rows, set with the
    rows: a table measures itself when idle, and a screen laid out before that drew the
    header at the old width or the table with no height at all (CSS max-height still caps)."""
    table.clear(columns=True)
    for index, header in enumerate(headers):
        width = max([cell_len(header), *(row[index].cell_len for row in rows)])
        table.add_column(header, width=width)
    for row in rows:
        table.add_row(*row)
    table.styles.height = len(rows) + 1


class PatchView(ScrollView, can_focus=True):
    """The patch, drawn row by row (only the rows on screen), with search matches marked."""

    DEFAULT_CSS = """
    PatchView { background: $surface; height: 1fr; }
    PatchView:focus { background-tint: $foreground 5%; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows: list[str] = []
        self.plain: list[str] = []  # each row in lower case, for the search
        self._lexer = Syntax("", "diff", theme="ansi_dark")
        self._coloured: LRUCache[int, Text] = LRUCache(4096)
        self.needle = ""
        self.matches: list[int] = []  # rows holding the needle, top to bottom
        self.current: int | None = None  # the index in matches jumped to

    def set_lines(self, shown: ShownDiff) -> None:
        self.rows, self.plain = shown.lines, shown.lower
        self._coloured.clear()
        self.virtual_size = Size(shown.width, len(self.rows))
        self.search("")
        self.refresh()

    def search(self, needle: str) -> None:
        """Mark every row holding `needle` (any case) and go to the first one from the top
        of the view down."""
        self.needle = needle.lower()
        self.matches = (
            [i for i, row in enumerate(self.plain) if self.needle in row] if needle else []
        )
        top = int(self.scroll_offset.y)
        below = [k for k, row in enumerate(self.matches) if row >= top]
        self.current = (below[0] if below else 0) if self.matches else None
        self._show_current()
        self.refresh()

    def next_match(self, step: int) -> None:
        if self.current is None:
            return
        self.current = (self.current + step) % len(self.matches)
        self._show_current()
        self.refresh()

    def coloured(self, number: int) -> Text:
        """One row through the diff lexer (a diff's colours depend on its line alone)."""
        text = self._coloured.get(number)
        if text is None:
            text = self._lexer.highlight(self.rows[number])
            text.rstrip_end(len(self.rows[number]))  # the lexer adds a newline
            self._coloured[number] = text
        return text

    def go_to(self, row: int) -> None:
        self.scroll_to(y=row, animate=False, immediate=True, force=True)

    def _show_current(self) -> None:
        if self.current is not None:
            row = self.matches[self.current]
            self.scroll_to(
                y=max(row - self.size.height // 3, 0), animate=False, immediate=True, force=True
            )

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        style = self.rich_style
        number = scroll_y + y
        if number >= len(self.rows):
            return Strip.blank(width, style)
        row = self.coloured(number)
        if self.needle and self.needle in self.plain[number]:
            row = row.copy()
            now = self.current is not None and self.matches[self.current] == number
            found = self.plain[number].find(self.needle)
            while found >= 0:
                end = found + len(self.needle)
                row.stylize(CURRENT_STYLE if now else MATCH_STYLE, found, end)
                found = self.plain[number].find(self.needle, end)
        strip = Strip(list(row.render(self.app.console)))
        return strip.crop_extend(scroll_x, scroll_x + width, style)


class DiffScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = bindings(DIFF)  # see hbtui/tui/actions.py

    DEFAULT_CSS = """
    DiffScreen #diff-summary { height: auto; max-height: 8; padding: 0 1; }
    DiffScreen #diff-files { height: auto; max-height: 10; }
    DiffScreen #diff-search { dock: bottom; display: none; }
    DiffScreen #diff-search.shown { display: block; }
    """

    def __init__(self, key: BoxKey) -> None:
        super().__init__()
        self.key = key
        self.shown: ShownDiff | None = None
        self._ready = False
        self._early: ShownDiff | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(
            Text(f"colouring the patch of {self.key[1]}…"), id="diff-summary", markup=False
        )
        yield DataTable(id="diff-files", cursor_type="row", zebra_stripes=True)
        yield PatchView(id="diff-patch")
        yield Input(placeholder="search the patch (enter)", id="diff-search")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"diff of {self.key[1]} on {self.key[0]}"
        self.query_one(PatchView).focus()
        self._ready = True
        if self._early is not None:
            self.show(self._early)

    @property
    def patch(self) -> PatchView:
        return self.query_one(PatchView)

    def show(self, shown: ShownDiff) -> None:
        if not self._ready:
            self._early = shown
            return
        self.shown = shown
        d = shown.diff
        summary = Text()
        summary.append(f"{d.box}", style="bold")
        summary.append(f" on {d.branch or '(detached)'}: {len(d.commits)} commit(s) since ")
        summary.append(d.seed[:12], style="bold")
        summary.append(f", {d.uncommitted} file(s) uncommitted · {d.repo}\n", style="")
        for commit in d.commits:
            summary.append(f"  {commit.id[:12]} ", style="yellow")
            summary.append(commit.subject + "\n")
        summary.rstrip()
        self.query_one("#diff-summary", Static).update(summary)
        colours = {"A": "green", "D": "red", "R": "cyan", "M": "yellow"}
        rows = [
            [
                Text(f.status, style=colours.get(f.status, "")),
                Text(f.path),
                Text("bin" if f.added is None else f"+{f.added}", style="green"),
                Text("" if f.added is None else f"-{f.deleted}", style="red"),
            ]
            for f in shown.files
        ]
        table: DataTable[Text] = self.query_one("#diff-files", DataTable)
        fill_table(table, ("", "file", "+", "-"), rows)
        table.display = bool(rows)
        self.patch.set_lines(shown)
        if not shown.lines:
            self.query_one("#diff-summary", Static).update(
                summary.append("\nno changes since the seed", style="dim italic")
            )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """enter on a file: its part of the patch."""
        if self.shown is not None and 0 <= event.cursor_row < len(self.shown.files):
            line = self.shown.files[event.cursor_row].line
            if line >= 0:
                self.patch.go_to(line)
                self.patch.focus()

    def action_start_search(self) -> None:
        field = self.query_one("#diff-search", Input)
        field.add_class("shown")
        field.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.patch.search(event.value)
        event.input.remove_class("shown")
        self.patch.focus()
        self._say_matches()

    def action_next_match(self, step: int) -> None:
        self.patch.next_match(step)
        self._say_matches()

    def _say_matches(self) -> None:
        patch = self.patch
        if not patch.needle:
            self.sub_title = f"diff of {self.key[1]} on {self.key[0]}"
        elif patch.current is None:
            self.sub_title = f"/{patch.needle}: no match"
        else:
            self.sub_title = f"/{patch.needle}: {patch.current + 1}/{len(patch.matches)} (n/N)"

    def action_back(self) -> None:
        """esc: closes the search field first, then the view."""
        field = self.query_one("#diff-search", Input)
        if field.has_class("shown"):
            field.remove_class("shown")
            self.patch.focus()
        else:
            self.app.pop_screen()
