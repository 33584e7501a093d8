"""The details view (`i`): one box in full, as `hbtui inspect` shows it, and its live CPU
and memory as sparklines (k9s describe, lazydocker's stats tab).

The boxes feature fetches `Service.boxes.details` and hands it over with `show()`; the live
figures come from its stats poll (every refresh), kept per box in the
history this screen reads.
"""

from __future__ import annotations

import json
from collections import deque
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Sparkline, Static

from hbtui import boxtext
from hbtui.core.foundation import BoxDetails, BoxStats, DetailSection
from hbtui.tui.activity import BoxKey
from hbtui.tui.failure import Failure

History = deque[BoxStats]
HISTORY = 60  # figures kept per box: two minutes at the default refresh


def section_text(section: DetailSection) -> Text:
    """A section as aligned label/value lines; long values wrap under their value. A value
    may be what a box said (its work's branch, its last error): one plain line."""
    text = Text()
    text.append(section.title + "\n", style="bold cyan")
    width = max((len(label) for label, _ in section.fields), default=0)
    for label, value in section.fields:
        text.append(f"  {label:<{width}}  ", style="dim")
        text.append(boxtext.line(value) + "\n")
    return text


class DetailsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,i", "app.pop_screen", "Back"),
        Binding("y", "raw", "Engine record"),
    ]

    def __init__(self, key: BoxKey, history: dict[BoxKey, History]) -> None:
        super().__init__()
        self.key = key
        self.history = history  # the App's, which its stats poll feeds
        self.details: BoxDetails | None = None
        self._ready = False
        # An answer before on_mount.
        self._early: tuple[BoxDetails | None, Failure | None] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="live"):
            with Vertical(classes="gauge"):
                yield Static("CPU", id="cpu-label", markup=False)
                yield Sparkline([], id="cpu-spark")
            with Vertical(classes="gauge"):
                yield Static("Memory", id="memory-label", markup=False)
                yield Sparkline([], id="memory-spark")
        with VerticalScroll(id="details-body"):
            yield Static(f"asking for the details of {self.key[1]}…", id="sections", markup=False)
            yield Static("", id="raw", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"{self.key[1]} on {self.key[0]}"
        self.query_one("#raw").display = False
        self.query_one("#details-body").focus()
        self.show_live()
        self.set_interval(1.0, self.show_live, name="live")
        self._ready = True
        if self._early is not None:
            self.show(*self._early)

    def show(self, details: BoxDetails | None, failure: Failure | None = None) -> None:
        """The box's details, or why they could not be had."""
        if not self._ready:
            self._early = (details, failure)
            return
        body = self.query_one("#sections", Static)
        if details is None:
            why = failure.text if failure is not None else ""
            body.update(Text(f"no details for {self.key[1]}: {why}", style="bold red"))
            return
        self.details = details
        text = Text()
        for section in details.sections:
            text.append_text(section_text(section))
            text.append("\n")
        text.append("y shows the engine's own record of the machine", style="dim italic")
        body.update(text)
        raw = json.dumps(details.engine_record, indent=2, sort_keys=True) or "{}"
        self.query_one("#raw", Static).update(Text(raw))
        if details.stats is not None:
            history = self.history.setdefault(self.key, deque(maxlen=HISTORY))
            if not history:
                history.append(details.stats)
        self.show_live()

    def action_raw(self) -> None:
        raw = self.query_one("#raw")
        raw.display = not raw.display
        if raw.display:
            self.query_one("#details-body").scroll_end(animate=False)

    def show_live(self) -> None:
        history = list(self.history.get(self.key, ()))
        cpu = [s.cpu_percent or 0.0 for s in history]
        memory = [s.memory_mib or 0.0 for s in history]
        self.query_one("#cpu-spark", Sparkline).data = cpu or [0.0]
        self.query_one("#memory-spark", Sparkline).data = memory or [0.0]
        last = history[-1] if history else None
        if last is None:
            cpu_line = memory_line = " not running, or the engine reports no figures"
        else:
            cpu_line = "?" if last.cpu_percent is None else f"{last.cpu_percent:.1f}%"
            top = max(cpu, default=0.0)
            cpu_line = f" {cpu_line}  peak {top:.1f}%"
            limit = f" of {last.memory_limit_mib:.0f} MiB" if last.memory_limit_mib else ""
            used = "?" if last.memory_mib is None else f"{last.memory_mib:.0f} MiB"
            memory_line = f" {used}{limit}"
        self.query_one("#cpu-label", Static).update(Text.assemble(("CPU ", "bold"), cpu_line))
        self.query_one("#memory-label", Static).update(
            Text.assemble(("Memory ", "bold"), memory_line)
        )
