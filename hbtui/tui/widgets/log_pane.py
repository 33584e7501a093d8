"""The log pane: the selected box's operation output and its workload logs.

The pane keeps no copy of the output: its view draws straight from the box's
own bounded buffer (`Activity.lines`, the last MAX_LINES lines of every box),
and renders only the rows on screen. A flood therefore costs the pane nothing
per line; `catch_up()` only says there is more, and the view grows (and
follows) at most once every FLUSH_SECONDS. Nothing is skipped: the pane shows
exactly the buffer, and the whole log stays in the kept file.

Inside the log: `/` searches (n/N next/previous, matches highlighted), `W`
wraps long lines, `E` jumps to the last error, `f` gives the log the whole
screen, `end` follows again.

What a box wrote is drawn through `hbtui.tui.plain.row`: its short colours are parsed,
nothing else (no link, no title, no cursor movement reaches the terminal).

Over ~500 lines on purpose: the view (rows, wrap, search, follow) is one Line
API widget whose parts share its row map; the pane around it is small. The
search is the part that could move out first.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, ClassVar, Protocol

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Input, ProgressBar, Static

from hbtui import boxtext
from hbtui.events import Step
from hbtui.names import LOCAL
from hbtui.tui.actions import LOG
from hbtui.tui.activity import MAX_LINES, Activity, BoxKey
from hbtui.tui.keys import bindings
from hbtui.tui.plain import row
from hbtui.tui.widgets.text_input import TextInput

# The view grows at most once every FLUSH_SECONDS while output pours in.
FLUSH_SECONDS = 0.05

# What "the last error" is: a failure line of an operation, or an error word.
_ERROR = re.compile(r"✗|\b(?:error|errors|failed|fatal|traceback|panic)\b", re.IGNORECASE)

MATCH_STYLE = Style(color="black", bgcolor="yellow")
CURRENT_STYLE = Style(color="black", bgcolor="bright_magenta", bold=True)
ERROR_STYLE = Style(reverse=True, bold=True)


def plain(line: str) -> str:
    """A log line as it reads on screen (as `row` draws it, without its colours), for
    widths and search."""
    return line if line.isprintable() else boxtext.lines(line.expandtabs()).replace("\n", " ")


def cells(line: str) -> int:
    text = plain(line)
    return len(text) if text.isascii() else cell_len(text)


class Source(Protocol):
    """A bounded buffer of lines and how many were ever appended to it."""

    @property
    def lines(self) -> deque[str]: ...

    @property
    def written(self) -> int: ...


@dataclass
class Buffer:
    """A Source the pane fills itself (the workload log)."""

    lines: deque[str] = field(default_factory=lambda: deque(maxlen=MAX_LINES))
    written: int = 0

    def replace(self, text: str) -> None:
        self.lines.clear()
        self.lines.extend(text.splitlines())
        self.written += len(self.lines)


class LogView(ScrollView, can_focus=True):
    """A scrolling view of a Source that renders only the visible rows.

    Rows map to lines by absolute number (`written` counts every line ever
    appended), so lines arriving between two syncs never shift what is drawn.
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings(LOG)  # see hbtui/tui/actions.py

    DEFAULT_CSS = """
    LogView { background: $surface; color: $foreground; overflow-y: scroll; }
    LogView:focus { background-tint: $foreground 5%; }
    """

    @dataclass
    class FollowChanged(Message):
        following: bool

    class SearchChanged(Message):
        """The search or its current match changed: the header says where we are."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source: Source = Buffer()
        self.auto_scroll = True
        self.wrap = False
        self._synced = 0  # source.written when the view last grew
        self._count = 0  # lines in view at that moment
        self._width = 0
        self._heights: deque[int] = deque()  # cells per line, kept while wrapping
        self._offsets: list[int] | None = None  # first row after each line, when wrapping
        self._strips: LRUCache[int, Strip] = LRUCache(1024)
        self._rich_style: Style | None = None
        self.search_text = ""
        self.pattern: re.Pattern[str] | None = None
        self.matches: list[int] = []  # absolute numbers of matching lines, oldest first
        self.current: int | None = None  # the match jumped to
        self.marked: int | None = None  # the error line jumped to

    # -- the source ----------------------------------------------------------------------

    @property
    def first(self) -> int:
        """Absolute number of the first line in view."""
        return self._synced - self._count

    @property
    def lines(self) -> list[str]:
        """The lines in view, as they read (for tests and search)."""
        return [plain(line) for line in self._view_lines()]

    @property
    def line_count(self) -> int:
        return self._count

    def _view_lines(self) -> list[str]:
        lines = self.source.lines
        start = self.first - (self.source.written - len(lines))
        return list(lines)[max(0, start) : max(0, start) + self._count]

    def show(self, source: Source) -> None:
        """Draw another buffer from scratch, following its end."""
        self.source = source
        self._synced = self._count = self._width = 0
        self._heights.clear()
        self._strips.clear()
        self.pattern, self.matches, self.current, self.marked = None, [], None, None
        self.auto_scroll = True
        self.sync()
        self.post_message(self.FollowChanged(True))
        self.post_message(self.SearchChanged())

    def sync(self) -> None:
        """Take in what the source has appended since the last sync."""
        source = self.source
        new = source.written - self._synced
        if new <= 0 and self._count == len(source.lines):
            return
        fresh = list(source.lines)[-min(new, len(source.lines)) :] if new > 0 else []
        self._synced = source.written
        self._count = len(source.lines)
        if fresh:
            self._width = max(self._width, max(map(len, fresh)))
        if self.wrap:
            self._heights.extend(cells(line) for line in fresh)
            while len(self._heights) > self._count:
                self._heights.popleft()
            self._offsets = None
        if self.pattern is not None:
            start = self._synced - len(fresh)
            found = [start + i for i, line in enumerate(fresh) if self.pattern.search(plain(line))]
            self.matches = [m for m in self.matches if m >= self.first] + found
        self._resize()
        self.post_message(self.SearchChanged())

    def _resize(self) -> None:
        if self.wrap:
            self.virtual_size = Size(self.scrollable_content_region.width, self._rows())
        else:
            self.virtual_size = Size(self._width, self._count)
        if self.auto_scroll:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
        self.refresh()

    # -- rows and lines ------------------------------------------------------------------

    def _row_width(self) -> int:
        return max(1, self.scrollable_content_region.width)

    def _offsets_now(self) -> list[int]:
        if self._offsets is None:
            width = self._row_width()
            self._offsets = list(accumulate(max(1, -(-c // width)) for c in self._heights))
        return self._offsets

    def _rows(self) -> int:
        offsets = self._offsets_now()
        return offsets[-1] if offsets else 0

    def row_of(self, number: int) -> int:
        """The first row of absolute line `number`."""
        index = number - self.first
        if not self.wrap:
            return index
        offsets = self._offsets_now()
        return offsets[index - 1] if index > 0 else 0

    def _line_at(self, row: int) -> tuple[int, int]:
        """(index in view, row within the line) of a row."""
        if not self.wrap:
            return row, 0
        offsets = self._offsets_now()
        index = bisect_right(offsets, row)
        return index, row - (offsets[index - 1] if index else 0)

    def on_resize(self, event: events.Resize) -> None:
        if self.wrap:
            self._offsets = None
            self._strips.clear()
            self._resize()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()
        self._rich_style = None

    def _style(self) -> Style:
        """The widget's style, kept until its styles change: computing it walks the
        DOM, and every row of every frame needs it."""
        if self._rich_style is None:
            self._rich_style = self.rich_style
        return self._rich_style

    def _strip(self, number: int, line: str) -> Strip:
        strip = self._strips.get(number)
        if strip is None:
            text = row(line.expandtabs())  # what a box wrote: only its colours are parsed
            text.stylize_before(self._style())
            if number == self.marked:
                text.stylize(ERROR_STYLE)
            if self.pattern is not None:
                style = CURRENT_STYLE if number == self.current else MATCH_STYLE
                for match in self.pattern.finditer(text.plain):
                    text.stylize(style, match.start(), match.end())
            segments = list(text.render(self.app.console))
            strip = Strip(segments, Segment.get_line_length(segments))
            self._strips[number] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        index, part = self._line_at(scroll_y + y)
        lines = self.source.lines
        position = self.first + index - (self.source.written - len(lines))
        if index >= self._count or not 0 <= position < len(lines):
            return Strip.blank(width, self._style())
        strip = self._strip(self.first + index, lines[position])
        start = part * width if self.wrap else scroll_x
        return strip.crop_extend(start, start + width, self._style())

    # -- following -----------------------------------------------------------------------

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # Only a move up pauses: growing content changes max_scroll_y, not scroll_y.
        if new_value < old_value and new_value < self.max_scroll_y and self.auto_scroll:
            self.auto_scroll = False
            self.post_message(self.FollowChanged(False))
        elif new_value >= self.max_scroll_y and not self.auto_scroll:
            self.auto_scroll = True
            self.post_message(self.FollowChanged(True))

    def action_follow(self) -> None:
        self.auto_scroll = True
        self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)
        self.post_message(self.FollowChanged(True))

    def _jump(self, number: int) -> None:
        """Put line `number` in the middle of the view; following pauses there."""
        row = self.row_of(number)
        target = max(0, row - self.scrollable_content_region.height // 2)
        if target < self.max_scroll_y:
            self.auto_scroll = False
            self.post_message(self.FollowChanged(False))
        self.scroll_to(y=target, animate=False, immediate=True, force=True)

    # -- wrap, search, errors ------------------------------------------------------------

    def action_toggle_wrap(self) -> None:
        top = self.first + self._line_at(round(self.scroll_y))[0]
        self.wrap = not self.wrap
        self._heights = deque(cells(line) for line in self._view_lines()) if self.wrap else deque()
        self._offsets = None
        self._strips.clear()
        self._resize()
        if not self.auto_scroll:
            self.scroll_to(y=self.row_of(top), animate=False, immediate=True, force=True)
        self.post_message(self.SearchChanged())

    def search(self, query: str) -> None:
        """Highlight every match of `query` (any case) and jump to the newest."""
        self._strips.clear()
        self.current, self.search_text = None, query
        if not query:
            self.pattern, self.matches = None, []
        else:
            self.pattern = re.compile(re.escape(query), re.IGNORECASE)
            self.matches = [
                self.first + i
                for i, line in enumerate(self._view_lines())
                if self.pattern.search(plain(line))
            ]
            if self.matches:
                self.current = self.matches[-1]
                self._jump(self.current)
        self.refresh()
        self.post_message(self.SearchChanged())

    def action_next_match(self, step: int) -> None:
        if self.pattern is None:
            self.action_start_search()
            return
        matches = [m for m in self.matches if m >= self.first]
        if not matches:
            self.app.bell()
            return
        if self.current is None or self.current not in matches:
            here = self.first + self._line_at(round(self.scroll_y))[0]
            after = bisect_right(matches, here)
            chosen = matches[after % len(matches)] if step > 0 else matches[after - 1]
        else:
            chosen = matches[(matches.index(self.current) + step) % len(matches)]
        for number in (self.current, chosen):
            if number is not None:
                self._strips.discard(number)
        self.current = chosen
        self._jump(chosen)
        self.refresh()
        self.post_message(self.SearchChanged())

    def action_start_search(self) -> None:
        pane = next((a for a in self.ancestors if isinstance(a, LogPane)), None)
        if pane is not None:
            pane.open_search()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # With no search to clear, esc is the screen's (it clears the table's filter).
        return self.pattern is not None if action == "clear_search" else True

    def action_clear_search(self) -> None:
        self.search("")

    def action_last_error(self) -> None:
        lines = self._view_lines()
        for index in range(len(lines) - 1, -1, -1):
            if _ERROR.search(plain(lines[index])):
                self._mark(self.first + index)
                self._jump(self.first + index)
                return
        self.notify("no error in this log", timeout=3)

    def _mark(self, number: int | None) -> None:
        """Show line `number` in reverse (the error jumped to)."""
        for old_or_new in (self.marked, number):
            if old_or_new is not None:
                self._strips.discard(old_or_new)
        self.marked = number
        self.refresh()


class LogSearch(TextInput):
    """The search field of the log: escape closes it (not the screen's filter)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close search")]

    class Closed(Message):
        pass

    def action_close(self) -> None:
        self.post_message(self.Closed())


class LogPane(Vertical):
    """Header, step progress and two logs (switched with `t`) for one box."""

    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane #log-header { height: 1; padding: 0 1; }
    LogPane ProgressBar { height: 1; padding: 0 1; }
    LogPane #log-tabs { height: 1; padding: 0 1; background: $panel; }
    LogPane ContentSwitcher { height: 1fr; }
    LogPane #log-search { height: 1; border: none; padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.activity: Activity | None = None
        self.key: BoxKey | None = None
        self._workload = Buffer()
        self._workload_text: str | None = None  # what the workload log was drawn from
        self._tab = "provision-log"
        self._flush_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        # The step bar and the search field are mounted when first needed, and
        # no log shows until a box is selected: the first frame, which comes
        # before the first listing, costs less.
        yield Static("", id="log-header", markup=False)
        yield Static("", id="log-tabs", markup=False)
        with ContentSwitcher(initial=None):
            yield LogView(id="provision-log")
            yield LogView(id="workload-log")

    def on_mount(self) -> None:
        self._draw_tabs()

    def _draw_tabs(self) -> None:
        workload = self.workload_visible
        tabs = Text()
        tabs.append(" Operation log ", style="dim" if workload else "bold reverse")
        tabs.append(" ")
        tabs.append(" Workload log ", style="bold reverse" if workload else "dim")
        tabs.append("   t switches", style="dim")
        self.query_one("#log-tabs", Static).update(tabs)

    @property
    def log_view(self) -> LogView:
        return self.query_one("#provision-log", LogView)

    @property
    def workload_view(self) -> LogView:
        return self.query_one("#workload-log", LogView)

    @property
    def visible_view(self) -> LogView:
        return self.workload_view if self.workload_visible else self.log_view

    @property
    def workload_visible(self) -> bool:
        return self._tab == "workload-log"

    def toggle_tab(self) -> None:
        had_focus = self.log_view.has_focus or self.workload_view.has_focus
        self._tab = "provision-log" if self.workload_visible else "workload-log"
        self._switch()
        self._draw_tabs()
        if had_focus:
            self.visible_view.focus()
        self._update_header()

    def _switch(self) -> None:
        self.query_one(ContentSwitcher).current = self._tab if self.key is not None else None

    def show(self, key: BoxKey | None, activity: Activity | None) -> None:
        """Switch to another box: its buffer, from its end."""
        self.key, self.activity = key, activity
        self._switch()
        self.log_view.show(activity if activity is not None else Buffer())
        self._workload, self._workload_text = Buffer(), None
        self.workload_view.show(self._workload)
        self._update_header()

    def catch_up(self) -> None:
        """The activity has more: show it now, or with the next sync of this burst."""
        if self._flush_timer is None:
            self._flush_timer = self.set_timer(FLUSH_SECONDS, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        self.log_view.sync()
        self._update_header()

    def show_workload(self, text: str) -> None:
        """The workload log as just read; unchanged, it stays as it is (scroll, search)."""
        if text == self._workload_text:
            return
        self._workload_text = text
        self._workload.replace(text.rstrip("\n") if text else "\x1b[2m(no output)\x1b[0m")
        self.workload_view.sync()

    # -- search --------------------------------------------------------------------------

    def open_search(self) -> None:
        found = self.query("#log-search")
        if found:
            box = found.first(LogSearch)
            box.display = True
        else:
            box = LogSearch(placeholder="search the log (enter: find, esc: close)", id="log-search")
            self.mount(box)
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "log-search":
            return
        event.stop()
        self._close_search()
        self.visible_view.search(event.value)

    def on_log_search_closed(self, _message: LogSearch.Closed) -> None:
        self._close_search()

    def _close_search(self) -> None:
        self.query_one("#log-search", LogSearch).display = False
        self.visible_view.focus()

    # -- header --------------------------------------------------------------------------

    def _draw_step(self, step: Step | None, activity: Activity | None) -> None:
        """The step bar under the header, for an operation that reports steps."""
        bars = self.query("#steps")
        if step is None or activity is None:
            if bars:
                bars.first().display = False
            return
        progress = step.index - (1 if activity.running else 0)
        if bars:
            bar = bars.first(ProgressBar)
            bar.update(total=step.total, progress=progress)
            bar.display = True
        else:
            bar = ProgressBar(total=step.total, show_eta=False, id="steps")
            bar.progress = progress
            self.mount(bar, after="#log-header")

    def on_log_view_follow_changed(self, _message: LogView.FollowChanged) -> None:
        self._update_header()

    def on_log_view_search_changed(self, _message: LogView.SearchChanged) -> None:
        self._update_header()

    def _update_header(self) -> None:
        header = Text()
        if self.key is None:
            header.append("no box selected", style="dim")
        else:
            header.append(self.key[1], style="bold")
            if self.key[0] != LOCAL:
                header.append(f" @{self.key[0]}", style="dim")
        activity = self.activity
        if activity is not None:
            if activity.failure is not None:
                header.append(
                    f"  ✗ {activity.operation} failed: {activity.failure.text}", style="bold red"
                )
            elif activity.running:
                header.append(f"  {activity.phase}", style="cyan")
        self._draw_step(activity.step if activity is not None else None, activity)
        view = self.visible_view
        if view.pattern is not None:
            matches = [m for m in view.matches if m >= view.first]
            where = matches.index(view.current) + 1 if view.current in matches else 0
            found = f"{where}/{len(matches)}" if matches else "no match"
            header.append(f"  /{view.search_text}: {found} (n/N)", style="magenta")
        if view.wrap:
            header.append("  [wrap]", style="dim")
        if not view.auto_scroll:
            header.append("  [paused — End to follow]", style="yellow")
        line = self.query_one("#log-header", Static)
        if line.content != header:  # one line whatever it says: no layout
            line.update(header, layout=False)
