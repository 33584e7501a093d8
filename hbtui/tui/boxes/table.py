"""The box table: one row per box, updated in place on every refresh.

Rows are keyed by "host/name". A refresh compares what each row is drawn
from with what it was drawn from last time, rebuilds and repaints only the
rows that differ, and re-sorts only when a row came, went or changed its
sort key, so the cursor and the scroll position survive every tick and a
tick costs in proportion to what changed, not to the number of boxes.

What each cell says is box_cells.py's; this is where it goes and when a row
is drawn again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from hbtui.core.agents import BoxAgents
from hbtui.core.foundation import BoxStats, BoxView
from hbtui.present import age
from hbtui.tui.actions import TABLE
from hbtui.tui.activity import Activity, BoxKey, row_key
from hbtui.tui.boxes.cells import COLUMNS, USAGE_WIDTH, agent_text, cells, matches
from hbtui.tui.keys import bindings

# The widest a column grows; longer text ends in "…". Box names are at most 40 characters and
# states short, so those two (and the port) always fit an 80-column terminal.
CAPS = {"host": 16, "url": 32, "image": 24, "keys": 16, "agent": 30, "branch": 28}
# Provisioning (an error can be long) takes up to PROV_CAP while the columns are placed,
# then whatever room is left over, up to its whole text.
PROV_CAP = 40

# When the table is too narrow, columns go in this order (name and state always stay);
# Provisioning first narrows to what is left, down to PROV_MIN, before it goes. The Agent
# column shows once some box has said something of its agents, the Branch column once
# some box has a repository.
_GO_FIRST = ("url", "image", "age", "cpus", "mem", "keys", "host", "live", "branch")
COLLAPSE_ORDER = (*_GO_FIRST, "prov", "agent", "port")
PROV_MIN = 12

# Sort orders the `sort` key cycles through: (column id, key on a BoxView).
SORTS: tuple[tuple[str, Callable[[BoxView], tuple[Any, ...]]], ...] = (
    ("name", lambda v: (v.name, v.host)),
    ("host", lambda v: (v.host, v.name)),
    ("state", lambda v: (v.state, v.name)),
    ("port", lambda v: (v.port or 0, v.name)),
    ("image", lambda v: (v.image or "", v.name)),
    ("age", lambda v: (v.created or "", v.name)),
)

_IDS = [ident for ident, _ in COLUMNS]
_CAPS = [CAPS.get(ident, 1 << 16) for ident in _IDS]
_PROV = _IDS.index("prov")
_AGENT = _IDS.index("agent")
_BRANCH = _IDS.index("branch")
_LIVE = _IDS.index("live")

# What a row is drawn from: the box, its age, what of its activity shows, its CPU and
# memory, what its agents do.
RowSource = tuple[BoxView, str, tuple[object, ...] | None, BoxStats | None, Text | None]


class BoxTable(ScrollView, can_focus=True):
    """The list of boxes; `show()` and `update_rows()` are the only ways rows change.

    A Line API widget rather than a DataTable: DataTable keys its render caches
    on a table-wide update counter, so changing one cell re-renders every
    visible row. Here each row's strip is cached with the cells it was drawn
    from, so a refresh repaints only the rows whose cells changed.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "box-table--header",
        "box-table--cursor",
        "box-table--even-row",
        "box-table--odd-row",
    }

    DEFAULT_CSS = """
    BoxTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .box-table--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .box-table--header { background-tint: $foreground 5%; }
        }
        &:dark > .box-table--even-row { background: $surface-darken-1 40%; }
        & > .box-table--header { text-style: bold; background: $panel; color: $foreground; }
        & > .box-table--even-row { background: $surface-lighten-1 50%; }
        & > .box-table--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings(TABLE)  # see hbtui/tui/actions.py

    class Sorted(Message):
        """The sort changed by a click on the header."""

    class RowHighlighted(Message):
        """The cursor moved; the handler asks `selected_key()`, which is current then."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.views: dict[str, BoxView] = {}
        self._shown: dict[str, tuple[Text, ...]] = {}
        self._cell_widths: dict[str, tuple[int, ...]] = {}  # each shown row's, measured once
        self._sources: dict[str, RowSource] = {}  # what each row was drawn from
        self._order: list[str] = []  # row keys, top to bottom
        self._index: dict[str, int] = {}
        self._order_stale = False
        self.sort_index = 0
        self.sort_reverse = False
        # Sortable columns keep room for their ▲/▼ so sorting never shifts the table, and
        # the live figures room for a box's figures, so a box that starts or stops never
        # does either (with the figures of one box, the whole table moved, and was drawn
        # again, each time it stopped or started).
        sortable = {ident for ident, _ in SORTS}
        self._least = [cell_len(label) + 2 * (i in sortable) for i, label in COLUMNS]
        self._least[_LIVE] = max(self._least[_LIVE], USAGE_WIDTH)
        self._widths = list(self._least)  # what the rows shown need, up to each column's cap
        self._drawn = list(self._widths)  # as drawn: Provisioning narrowed to the table's width
        self._refit = False  # a row got narrower, or went: columns may give room back
        self._header = self._header_cells()
        self._hidden: frozenset[int] = frozenset()  # columns collapsed for a narrow table
        # row key -> (what the strip was drawn from, the strip)
        self._strips: dict[str, tuple[tuple[object, ...], Strip]] = {}
        self._look = 0  # bumped when styles or column widths change: every strip is stale
        self.cursor_row = 0
        self.filter_text = ""
        self._empty_said = ""  # what the empty table said when last drawn
        self.usage: dict[BoxKey, BoxStats] = {}  # running boxes' CPU and memory
        self.agents: dict[BoxKey, BoxAgents] = {}  # running boxes' agents, by the last ask
        self._branched = False  # some box listed has a repository: the Branch column shows
        self.marked: set[str] = set()  # row keys picked for a bulk action (space)

    # -- what is shown -------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def sort_label(self) -> str:
        return SORTS[self.sort_index][0] + (" ▼" if self.sort_reverse else " ▲")

    def cycle_sort(self) -> str:
        """The next sort column, ascending."""
        return self.sort_by((self.sort_index + 1) % len(SORTS), reverse=False)

    def reverse_sort(self) -> str:
        return self.sort_by(self.sort_index, reverse=not self.sort_reverse)

    def sort_by(self, index: int, *, reverse: bool) -> str:
        self.sort_index, self.sort_reverse = index, reverse
        self._header = self._header_cells()
        self._look += 1
        self._order_stale = True
        self._reorder()
        self.refresh()
        return self.sort_label

    def _header_cells(self) -> tuple[Text, ...]:
        """Column labels; the sort column's says which way it sorts."""
        sorted_by = SORTS[self.sort_index][0]
        arrow = " ▼" if self.sort_reverse else " ▲"
        return tuple(
            Text(label + arrow, style="underline") if ident == sorted_by else Text(label)
            for ident, label in COLUMNS
        )

    # -- marks for bulk actions --------------------------------------------------------

    def toggle_mark(self) -> None:
        """Mark or unmark the selected row, then move down (as in a file manager)."""
        if not self._order:
            return
        key = self._order[self.cursor_row]
        self.marked.symmetric_difference_update({key})
        self._refresh_rows(self.cursor_row)
        self.action_cursor(1)

    def marked_views(self) -> list[BoxView]:
        """The marked boxes still listed, in table order."""
        self.marked &= set(self.views)
        return [self.views[k] for k in self._order if k in self.marked]

    def set_usage(
        self, usage: dict[BoxKey, BoxStats], activities: dict[BoxKey, Activity], now: datetime
    ) -> None:
        """New CPU and memory figures: repaint the rows whose figures changed."""
        self.usage = usage
        for key in self._shown:
            self._put(key, self.views[key], activities, now)

    def set_agents(
        self, agents: dict[BoxKey, BoxAgents], activities: dict[BoxKey, Activity], now: datetime
    ) -> None:
        """What the agents of the running boxes do now: repaint the rows whose agents
        changed (the column comes with the first box that says anything of its agents;
        each listing repaints every row, and with it how long each status has lasted)."""
        before = self.agents
        self.agents = {k: row for k, row in agents.items() if row.sessions or row.error}
        for key in self._shown:
            view = self.views[key]
            box = (view.host, view.name)
            if before.get(box) != self.agents.get(box):
                self._put(key, view, activities, now)
        if bool(before) != bool(self.agents):
            self._resize()

    def keys_in_order(self) -> list[BoxKey]:
        """The boxes shown, top to bottom."""
        return [(self.views[k].host, self.views[k].name) for k in self._order]

    def keys_on_screen(self) -> list[BoxKey]:
        """The boxes whose rows show now (below the header, within the scroll)."""
        top = self.scroll_offset.y
        shown = self._order[top : top + max(0, self.size.height - 1)]
        return [(self.views[k].host, self.views[k].name) for k in shown]

    def selected_key(self) -> BoxKey | None:
        if not self._order:
            return None
        view = self.views.get(self._order[self.cursor_row])
        return (view.host, view.name) if view else None

    def select(self, key: BoxKey) -> bool:
        index = self._index.get(row_key(key))
        if index is None:
            return False
        self._move_cursor(index)
        return True

    def show(
        self, views: Iterable[BoxView], activities: dict[BoxKey, Activity], now: datetime
    ) -> None:
        """Make the table show `views` (filtered), touching only what changed."""
        self.views = {row_key((v.host, v.name)): v for v in views}
        needle = self.filter_text
        wanted = (
            {k: v for k, v in self.views.items() if matches(v, needle)} if needle else self.views
        )
        for key in [k for k in self._shown if k not in wanted]:
            del self._shown[key]
            del self._cell_widths[key]
            self._sources.pop(key, None)
            self._strips.pop(key, None)
            self._order_stale = True
            self._refit = True
        for key, view in wanted.items():
            self._put(key, view, activities, now)
        branched = any(v.branch for v in self.views.values())
        if branched != self._branched:
            self._branched = branched
            self._look += 1
            self._resize()
            self.refresh()
        self._fit()
        self._reorder()
        if not self._order and self._empty_said != self._empty_text():
            self.refresh()  # what the empty table says changed ('zz', then 'zzz')

    def update_rows(
        self, views: Iterable[BoxView], activities: dict[BoxKey, Activity], now: datetime
    ) -> None:
        """Repaint just these boxes' rows (those an operation is reporting on)."""
        for view in views:
            key = row_key((view.host, view.name))
            self.views[key] = view
            if key in self._shown:
                self._put(key, view, activities, now)
        self._fit()
        self._reorder()

    def _put(
        self, key: str, view: BoxView, activities: dict[BoxKey, Activity], now: datetime
    ) -> None:
        box = (view.host, view.name)
        activity = activities.get(box)
        usage = self.usage.get(box)
        row = self.agents.get(box)
        agent = agent_text(row, now) if row is not None else None  # most rows: no agent
        source: RowSource = (
            view,
            age(view.created, now),
            None
            if activity is None
            else (
                activity.running,
                activity.failure,
                activity.operation,
                activity.phase,
                activity.step,
                activity.failed_as,
            ),
            usage,
            agent,
        )
        old = self._sources.get(key)
        if old == source:
            return  # most rows on most ticks: nothing to build or compare
        self._sources[key] = source
        if old is None or SORTS[self.sort_index][1](old[0]) != SORTS[self.sort_index][1](view):
            self._order_stale = True
        new = cells(view, activity, now, usage, agent)
        measured = tuple(c.cell_len for c in new)
        before = self._cell_widths.get(key)
        self._shown[key] = new
        self._cell_widths[key] = measured
        if before is not None and any(
            min(o, cap) >= w > n
            for o, n, w, cap in zip(before, measured, self._widths, _CAPS, strict=True)
        ):
            self._refit = True  # this row held a column open and no longer does
        widths = [
            max(w, min(n, cap)) for w, n, cap in zip(self._widths, measured, _CAPS, strict=True)
        ]
        if widths != self._widths:
            self._set_widths(widths)
        elif (index := self._index.get(key)) is not None:
            self._refresh_rows(index)

    def _fit(self) -> None:
        """Give room back once the row that held a column open got narrower or went."""
        if not self._refit:
            return
        self._refit = False
        columns = zip(self._least, *self._cell_widths.values(), strict=True)
        widths = [min(max(column), cap) for column, cap in zip(columns, _CAPS, strict=True)]
        if widths != self._widths:
            self._set_widths(widths)

    def _set_widths(self, widths: list[int]) -> None:
        self._widths = widths
        self._look += 1
        self._resize()
        self.refresh()

    def _reorder(self) -> None:
        """Sort only when a row came, went or changed its sort key; the cursor stays on its box."""
        if not self._order_stale:
            return
        self._order_stale = False
        selected = self._order[self.cursor_row] if self._order else None
        order_key = SORTS[self.sort_index][1]
        views = self.views
        order = sorted(self._shown, key=lambda k: order_key(views[k]), reverse=self.sort_reverse)
        if order == self._order:
            return
        self._order = order
        self._index = {k: i for i, k in enumerate(order)}
        self._resize()
        self.refresh()
        index = self._index.get(selected, self.cursor_row) if selected else 0
        self._move_cursor(min(index, max(len(order) - 1, 0)))

    def _resize(self) -> None:
        """The scrollable size: the rows, and the columns' width, but never narrower than
        the table (beside a vertical scrollbar). A column that grows or narrows within the
        table then changes no size: any change of it lays out the whole screen (35 ms and
        more with 500 boxes), where repainting the table's rows is all it needs."""
        self._collapse()
        shown = [w for i, w in enumerate(self._drawn) if i not in self._hidden]
        within = self.container_size.width - self.styles.scrollbar_size_vertical
        self.virtual_size = Size(max(sum(shown) + 2 * len(shown), within), len(self._order) + 1)

    def _collapse(self) -> None:
        """Hide columns, least useful first, until the rest fit the table's width."""
        room = self.scrollable_content_region.width
        hidden: set[int] = set() if self.agents else {_AGENT}
        if not self._branched:
            hidden.add(_BRANCH)
        drawn = list(self._widths)
        drawn[_PROV] = min(drawn[_PROV], max(PROV_CAP, self._least[_PROV]))

        def needed() -> int:
            return sum(w + 2 for i, w in enumerate(drawn) if i not in hidden)

        for ident in COLLAPSE_ORDER:
            if room <= 0 or needed() <= room:
                break
            index = _IDS.index(ident)
            over = needed() - room
            if index == _PROV and drawn[index] - over >= max(PROV_MIN, self._least[index]):
                drawn[index] -= over  # narrowed, its text ends in "…"
                break
            hidden.add(index)
        if _PROV not in hidden and room > needed():
            drawn[_PROV] = min(self._widths[_PROV], drawn[_PROV] + room - needed())
        if frozenset(hidden) != self._hidden or drawn != self._drawn:
            self._hidden, self._drawn = frozenset(hidden), drawn
            self._look += 1
            self.refresh()

    def on_resize(self, _event: events.Resize) -> None:
        """Columns collapse or come back; the selected row stays in sight."""
        self._resize()
        if self._order:
            self._move_cursor(self.cursor_row)

    # -- cursor ---------------------------------------------------------------------

    def _move_cursor(self, index: int) -> None:
        old, self.cursor_row = self.cursor_row, index
        self._refresh_rows(old, index)
        height = self.scrollable_content_region.height - 1  # the header stays
        top = self.scroll_offset.y
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif height > 0 and index >= top + height:
            self.scroll_to(y=index - height + 1, animate=False)
        self.post_message(self.RowHighlighted())

    def action_cursor(self, step: int) -> None:
        if self._order:
            self._move_cursor(min(max(self.cursor_row + step, 0), len(self._order) - 1))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(self.scrollable_content_region.height - 2, 1))

    def action_cursor_to(self, index: int) -> None:
        if self._order:
            self._move_cursor(index % len(self._order))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None and offset.y == 0:
            self._click_header(offset.x + self.scroll_offset.x)
        elif offset is not None and offset.y > 0:
            index = offset.y - 1 + self.scroll_offset.y
            if index < len(self._order):
                self._move_cursor(index)

    def _click_header(self, x: int) -> None:
        """A click on a sortable column's label sorts by it; a second click reverses."""
        sorts = [ident for ident, _ in SORTS]
        left = 1
        for i, ((ident, _label), width) in enumerate(zip(COLUMNS, self._drawn, strict=True)):
            if i in self._hidden:
                continue
            if left <= x < left + width and ident in sorts:
                index = sorts.index(ident)
                self.sort_by(index, reverse=index == self.sort_index and not self.sort_reverse)
                self.post_message(self.Sorted())
                return
            left += width + 2

    # -- drawing --------------------------------------------------------------------

    def _refresh_rows(self, *indexes: int) -> None:
        top, width = self.scroll_offset.y, self.size.width
        regions = [
            Region(0, i + 1 - top, width, 1) for i in indexes if 0 <= i - top < self.size.height - 1
        ]
        if regions:  # refresh() with no region would repaint the whole table
            self.refresh(*regions)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._look += 1

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            strip = self._row_strip("", self._header, "box-table--header", False)
        else:
            index = y - 1 + scroll_y
            if index >= len(self._order):
                if y == 1 and not self._order:
                    return self._empty_strip(width)
                return Strip.blank(width, self.rich_style)
            key = self._order[index]
            parity = "box-table--odd-row" if index % 2 else "box-table--even-row"
            strip = self._row_strip(key, self._shown[key], parity, index == self.cursor_row)
        return strip.crop(scroll_x, scroll_x + width)

    def _empty_text(self) -> str:
        """What an empty table says: why it is empty, and the way on."""
        if self.views and self.filter_text:
            return f" no box matches {self.filter_text!r} (esc clears the filter)"
        if self.views:
            return " no box to show"
        return " no boxes yet: n makes one, l loads one from an archive"

    def _empty_strip(self, width: int) -> Strip:
        self._empty_said = self._empty_text()
        line = Text(self._empty_said, style="italic")
        segments = Segment.apply_style(line.render(self.app.console), self.rich_style)
        return Strip(segments, line.cell_len).extend_cell_length(width, self.rich_style)

    def _row_strip(self, key: str, row: tuple[Text, ...], component: str, cursor: bool) -> Strip:
        """The whole row as one strip, reused until its cells or its look change."""
        mark = key in self.marked
        signature = (row, component, cursor, mark, self.has_focus, self._look, self.size.width)
        cached = self._strips.get(key)
        if cached is not None and cached[0] == signature:
            return cached[1]
        style = self.get_component_rich_style(component)
        post = None
        if cursor:
            style += self.get_component_rich_style("box-table--cursor")
            post = Style.from_color(color=style.color)
        line = Text("●", style="bold magenta", end="") if mark else Text(" ", end="")
        for i, (cell, width) in enumerate(zip(row, self._drawn, strict=False)):
            if i in self._hidden:
                continue
            if cell.cell_len > width:
                cell = cell.copy()
                cell.truncate(width, overflow="ellipsis")
            gap = " " * (width - cell.cell_len)
            if cell.justify == "right":
                line.append(gap)
                line.append_text(cell)
            else:
                line.append_text(cell)
                line.append(gap)
            line.append("  ")
        line.right_crop(1)
        segments = Segment.apply_style(line.render(self.app.console), style, post)
        strip = Strip(segments, line.cell_len).extend_cell_length(self.size.width, style)
        self._strips[key] = (signature, strip)
        return strip
