"""The box table: one row per box, updated in place on every refresh.

Rows are keyed by "host/name". A refresh compares each new cell with what
the table already shows and calls `update_cell` only for differences, adds
and removes only the rows that came or went, and re-sorts only when the
order changed, so the cursor and the scroll position survive every tick.
"""

from __future__ import annotations

from datetime import datetime, timezone
from functools import lru_cache
from typing import Callable, Iterable

from rich.text import Text
from textual.widgets import DataTable

from hbtui.core.boxes import BoxView
from hbtui.tui.activity import Activity, BoxKey, row_key

COLUMNS = (
    ("name", "Box"), ("host", "Host"), ("state", "State"), ("port", "Port"), ("url", "URL"),
    ("image", "Image"), ("cpus", "CPUs"), ("mem", "Memory"), ("prov", "Provisioning"),
    ("age", "Age"),
)

STATE_STYLE = {"running": "green", "stopped": "yellow", "created": "cyan", "starting": "cyan",
               "failed": "bold red", "missing": "red", "orphan": "magenta"}
PROVISION_STYLE = {"ready": "green", "provisioning": "cyan", "failed": "bold red"}

# Sort orders the `sort` key cycles through: (label, key on a BoxView).
SORTS: tuple[tuple[str, Callable[[BoxView], tuple]], ...] = (
    ("name", lambda v: (v.name, v.host)),
    ("host", lambda v: (v.host, v.name)),
    ("state", lambda v: (v.state, v.name)),
    ("port", lambda v: (v.port or 0, v.name)),
    ("image", lambda v: (v.image or "", v.name)),
    ("age", lambda v: (v.created or "", v.name)),
)

BAR_WIDTH = 8


@lru_cache(maxsize=4096)
def _parse_created(created: str) -> datetime | None:
    try:
        return datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def age(created: str | None, now: datetime) -> str:
    then = _parse_created(created) if created else None
    if then is None:
        return ""
    secs = int((now - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{max(secs, 0)}s"


def progress_text(activity: Activity) -> Text:
    """A text progress bar for the row of a box whose recipe is running."""
    step = activity.step
    if step is None or step.total <= 0:
        return Text(activity.phase, style="cyan")
    filled = round(BAR_WIDTH * (step.index - 1) / step.total)
    text = Text("━" * filled, style="cyan")
    text.append("━" * (BAR_WIDTH - filled), style="grey35")
    text.append(f" {step.index}/{step.total} {step.name}", style="cyan")
    return text


def cells(view: BoxView, activity: Activity | None, now: datetime) -> tuple[Text, ...]:
    state = view.state if view.kind in ("box", "missing") else f"{view.state} ({view.kind})"
    if activity is not None and activity.running:
        prov = progress_text(activity)
    elif activity is not None and activity.error:
        prov = Text(f"✗ {activity.operation}: {activity.error}", style="bold red")
    else:
        label = view.provisioning + (f": {view.error}" if view.error else "")
        prov = Text(label, style=PROVISION_STYLE.get(view.provisioning, ""))
    return (
        Text(view.name, style="bold"),
        Text(view.host),
        Text(state, style=STATE_STYLE.get(view.state, STATE_STYLE.get(view.kind, ""))),
        Text(str(view.port or ""), justify="right"),
        Text(view.url or "", style="underline" if view.url else ""),
        Text(view.image or ""),
        Text(str(view.cpus or ""), justify="right"),
        Text(f"{view.memory_mib} MiB" if view.memory_mib else "", justify="right"),
        prov,
        Text(age(view.created, now), justify="right"),
    )


def matches(view: BoxView, needle: str) -> bool:
    if not needle:
        return True
    hay = " ".join((view.name, view.host, view.state, view.kind, view.image or "",
                    view.provisioning, str(view.port or ""))).lower()
    return all(word in hay for word in needle.lower().split())


class BoxTable(DataTable):
    """The list of boxes; `show()` is the only way rows change."""

    DEFAULT_CSS = """
    BoxTable { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)
        self.views: dict[str, BoxView] = {}
        self._shown: dict[str, tuple[Text, ...]] = {}
        self._sources: dict[str, tuple] = {}  # what each row was drawn from
        self.sort_index = 0
        self.filter_text = ""

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    @property
    def sort_label(self) -> str:
        return SORTS[self.sort_index][0]

    def cycle_sort(self) -> str:
        self.sort_index = (self.sort_index + 1) % len(SORTS)
        self._reorder()
        return self.sort_label

    def selected_key(self) -> BoxKey | None:
        if not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None
        view = self.views.get(key or "")
        return (view.host, view.name) if view else None

    def select(self, key: BoxKey) -> bool:
        rk = row_key(key)
        if rk not in self._shown:
            return False
        self.move_cursor(row=self.get_row_index(rk))
        return True

    def show(self, views: Iterable[BoxView], activities: dict[BoxKey, Activity],
             now: datetime) -> None:
        """Make the table show `views` (filtered), touching only what changed."""
        self.views = {row_key((v.host, v.name)): v for v in views}
        wanted = {k: v for k, v in self.views.items() if matches(v, self.filter_text)}
        for key in [k for k in self._shown if k not in wanted]:
            self.remove_row(key)
            del self._shown[key]
            self._sources.pop(key, None)
        for key, view in wanted.items():
            self._put(key, view, activities, now)
        self._reorder()

    def update_rows(self, views: Iterable[BoxView], activities: dict[BoxKey, Activity],
                    now: datetime) -> None:
        """Repaint just these boxes' rows (those an operation is reporting on)."""
        for view in views:
            key = row_key((view.host, view.name))
            self.views[key] = view
            if key in self._shown:
                self._put(key, view, activities, now)
        self._reorder()

    def _put(self, key: str, view: BoxView, activities: dict[BoxKey, Activity],
             now: datetime) -> None:
        activity = activities.get((view.host, view.name))
        source = (view, age(view.created, now), activity and (
            activity.running, activity.error, activity.operation, activity.phase, activity.step))
        if self._sources.get(key) == source:
            return  # most rows on most ticks: nothing to build or compare
        self._sources[key] = source
        new = cells(view, activity, now)
        old = self._shown.get(key)
        if old is None:
            self.add_row(*new, key=key)
        else:
            for (col, _), before, after in zip(COLUMNS, old, new):
                if before != after:
                    # Widening a column re-measures the whole table: only when needed.
                    wider = after.cell_len > self.columns[col].content_width
                    self.update_cell(key, col, after, update_width=wider)
        self._shown[key] = new

    def _reorder(self) -> None:
        """Sort only when the order is wrong; keep the cursor on the same box."""
        order_key = SORTS[self.sort_index][1]
        views = self.views

        def sort_key(host_name: tuple[Text, Text]) -> tuple:
            name, host = host_name
            view = views.get(f"{host.plain}/{name.plain}")
            return order_key(view) if view else ()

        current = [row.key.value for row in self.ordered_rows]
        desired = sorted(current, key=lambda k: order_key(views[k]))
        if current == desired:
            return
        selected = self.selected_key()
        self.sort("name", "host", key=sort_key)
        if selected is not None:
            self.select(selected)
