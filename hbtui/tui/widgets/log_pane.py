"""The log pane: the selected box's operation output and its workload logs.

Output arrives in bursts (a recipe can print thousands of lines at once),
so the pane never writes per event: `catch_up()` says there is more, and
the pane writes what it has not shown yet at most once every FLUSH_SECONDS,
in one batch, skipping to the newest lines when it is far behind. Follow
mode is RichLog's auto-scroll, switched off when the user scrolls up and on
again when they reach the end.
"""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import ContentSwitcher, ProgressBar, RichLog, Static

from hbtui.names import LOCAL
from hbtui.tui.activity import MAX_LINES, Activity, BoxKey

# At most this many lines per write, and one write per FLUSH_SECONDS; a flood
# beyond that is summarised.
BATCH = 150
FLUSH_SECONDS = 0.05


class FollowLog(RichLog):
    """A RichLog whose auto-scroll follows the user's scrolling."""

    class FollowChanged(Message):
        def __init__(self, following: bool) -> None:
            super().__init__()
            self.following = following

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            max_lines=MAX_LINES,
            wrap=False,
            markup=False,
            highlight=False,
            auto_scroll=True,
            **kwargs,
        )

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        # Only a move up pauses: growing content changes max_scroll_y, not scroll_y.
        if new_value < old_value and new_value < self.max_scroll_y and self.auto_scroll:
            self.auto_scroll = False
            self.post_message(self.FollowChanged(False))
        elif new_value >= self.max_scroll_y and not self.auto_scroll:
            self.auto_scroll = True
            self.post_message(self.FollowChanged(True))

    def follow(self) -> None:
        self.auto_scroll = True
        self.scroll_end(animate=False)
        self.post_message(self.FollowChanged(True))


class LogPane(Vertical):
    """Header, step progress and two logs (switched with `t`) for one box."""

    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane #log-header { height: 1; padding: 0 1; }
    LogPane ProgressBar { height: 1; padding: 0 1; }
    LogPane ProgressBar.-idle { display: none; }
    LogPane #log-tabs { height: 1; padding: 0 1; background: $panel; }
    LogPane ContentSwitcher { height: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.activity: Activity | None = None
        self.key: BoxKey | None = None
        self._shown = 0
        self._following = True
        self._tab = "provision-log"
        self._written_at = 0.0  # time.monotonic() of the last write
        self._flush_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="log-header")
        yield ProgressBar(show_eta=False, id="steps", classes="-idle")
        yield Static("", id="log-tabs")
        # No log shows until a box is selected: even an empty log costs a full
        # render, and the first frame comes before the first listing.
        with ContentSwitcher(initial=None):
            yield FollowLog(id="provision-log")
            yield RichLog(
                max_lines=MAX_LINES, wrap=False, markup=False, highlight=False, id="workload-log"
            )

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
    def log_view(self) -> FollowLog:
        return self.query_one("#provision-log", FollowLog)

    @property
    def workload_visible(self) -> bool:
        return self._tab == "workload-log"

    def toggle_tab(self) -> None:
        self._tab = "provision-log" if self.workload_visible else "workload-log"
        self._switch()
        self._draw_tabs()

    def _switch(self) -> None:
        self.query_one(ContentSwitcher).current = self._tab if self.key is not None else None

    def show(self, key: BoxKey | None, activity: Activity | None) -> None:
        """Switch to another box: redraw its buffered output from scratch."""
        self.key, self.activity = key, activity
        self._switch()
        self.log_view.clear()
        self.query_one("#workload-log", RichLog).clear()
        self._shown = 0
        self.log_view.follow()
        self._write_new()

    def catch_up(self) -> None:
        """The activity has more: write it now, or with the next write of this burst."""
        if self._flush_timer is not None:
            return  # a write is already due
        wait = self._written_at + FLUSH_SECONDS - time.monotonic()
        if wait <= 0:
            self._write_new()
        else:
            self._flush_timer = self.set_timer(wait, self._flush)

    def _flush(self) -> None:
        self._flush_timer = None
        self._write_new()

    def _write_new(self) -> None:
        """Write what arrived since the last write, and refresh header and bar."""
        self._written_at = time.monotonic()
        activity = self.activity
        if activity is not None:
            missed = activity.written - self._shown
            if missed > 0:
                lines = list(activity.lines)[-min(missed, len(activity.lines)) :]
                if len(lines) > BATCH:
                    skipped = len(lines) - BATCH
                    lines = lines[-BATCH:]
                    self.log_view.write(
                        Text(
                            f"… {skipped} lines skipped to keep up "
                            "(hbtui logs --provision NAME has them all)",
                            style="dim italic",
                        )
                    )
                self.log_view.write(Text.from_ansi("\n".join(lines)))
                self._shown = activity.written
        self._update_header()

    def show_workload(self, text: str) -> None:
        log = self.query_one("#workload-log", RichLog)
        log.clear()
        log.write(Text.from_ansi(text.rstrip("\n")) if text else Text("(no output)", style="dim"))

    def on_follow_log_follow_changed(self, message: FollowLog.FollowChanged) -> None:
        self._following = message.following
        self._update_header()

    def _update_header(self) -> None:
        header = Text()
        if self.key is None:
            header.append("no box selected", style="dim")
        else:
            header.append(self.key[1], style="bold")
            if self.key[0] != LOCAL:
                header.append(f" @{self.key[0]}", style="dim")
        bar = self.query_one("#steps", ProgressBar)
        activity = self.activity
        if activity is not None:
            if activity.error:
                header.append(
                    f"  ✗ {activity.operation} failed: {activity.error}", style="bold red"
                )
            elif activity.running:
                header.append(f"  {activity.phase}", style="cyan")
            if activity.step is not None:
                bar.update(
                    total=activity.step.total,
                    progress=activity.step.index - (1 if activity.running else 0),
                )
                bar.set_class(False, "-idle")
            else:
                bar.set_class(True, "-idle")
        else:
            bar.set_class(True, "-idle")
        if not self._following:
            header.append("  [paused — End to follow]", style="yellow")
        self.query_one("#log-header", Static).update(header)
