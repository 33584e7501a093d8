"""The port allocator: the configured host-port range drawn as a grid.

Each port is one glyph: used by a box, busy (another process on the host
listens there) or free. The cursor (keys or mouse) names what a port is;
enter or a click on a free port posts `Picked`, which the new-box dialog
uses to choose the box's port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from hbtui.core.foundation import BUSY, FREE, USED, PortSlot
from hbtui.tui.actions import PORTS
from hbtui.tui.keys import bindings

GLYPH = {USED: ("■", "cyan"), BUSY: ("■", "yellow"), FREE: ("·", "green")}
CELL = 2  # columns per port


class PortGrid(Widget, can_focus=True):
    """A compact map of `Service.boxes.ports()`."""

    DEFAULT_CSS = """
    PortGrid { height: auto; padding: 0 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = bindings(PORTS)  # see hbtui/tui/actions.py

    cursor: reactive[int] = reactive(0)
    highlight_box: reactive[str] = reactive("")

    @dataclass
    class Picked(Message):
        port: int

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.slots: list[PortSlot] = []
        self.picked: int | None = None
        self.hovered: int | None = None

    def set_slots(self, slots: list[PortSlot]) -> None:
        self.slots = slots
        self.cursor = min(self.cursor, max(len(slots) - 1, 0))
        self.refresh(layout=True)

    @property
    def next_free(self) -> int | None:
        return next((s.port for s in self.slots if s.state == FREE), None)

    def _per_row(self, width: int | None = None) -> int:
        width = self.content_region.width if width is None else width
        return max(width // CELL, 1)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        rows = -(-len(self.slots) // self._per_row(width)) if self.slots else 1
        return rows + 2

    def render(self) -> Text:
        if not self.slots:
            return Text("no port information yet", style="dim")
        per_row = self._per_row()
        text = Text()
        # One span per run of cells drawn alike, not one per port: a span costs more to
        # draw than its glyph (a 200-port map was most of what the New dialog's frame cost).
        run, run_style = "", ""
        gap = " " * (CELL - 1)
        for i, slot in enumerate(self.slots):
            glyph, style = GLYPH[slot.state]
            if slot.state == USED and slot.box == self.highlight_box:
                style = "bold magenta"
            if slot.port == self.picked:
                glyph, style = "◆", "bold green"
            if i and i % per_row == 0:
                run += "\n"
            cursor = i == self.cursor and self.has_focus
            if cursor or style != run_style:
                text.append(run, style=run_style)
                run, run_style = "", style
            if cursor:
                text.append(glyph, style=f"{style} reverse")
                run = gap  # a space takes the run's colour unseen; only a reverse shows
            else:
                run += glyph + gap
        text.append(run, style=run_style)
        text.append("\n")
        if self.hovered is not None and self.hovered < len(self.slots):
            about: PortSlot | None = self.slots[self.hovered]
        else:
            about = self.slots[self.cursor] if self.has_focus else None
        text.append_text(self.describe(about))
        text.append("\n")
        text.append("■", style="cyan")
        text.append(" used  ")
        text.append("■", style="yellow")
        text.append(" busy  ")
        text.append("·", style="green")
        text.append(" free  ")
        free = sum(s.state == FREE for s in self.slots)
        text.append(f"{self.slots[0].port}-{self.slots[-1].port}: {free} free", style="dim")
        return text

    def describe(self, slot: PortSlot | None) -> Text:
        if slot is None:
            nxt = self.next_free
            box = next(
                (s for s in self.slots if self.highlight_box and s.box == self.highlight_box), None
            )
            line = Text()
            if box is not None:
                line.append(f"{box.port} ", style="bold")
                line.append(f"used by {box.box}   ")
            # Not "next": a box on "auto" takes any free port, at random.
            line.append(f"first free: {nxt}" if nxt else "no free port", style="green")
            return line
        if slot.state == USED:
            return Text.assemble((f"{slot.port} ", "bold"), f"used by box {slot.box}")
        if slot.state == BUSY:
            return Text.assemble((f"{slot.port} ", "bold"), "busy: another process listens")
        return Text.assemble((f"{slot.port} ", "bold"), ("free — enter to use it", "green"))

    def _slot_at(self, x: int, y: int) -> int | None:
        col, row = x // CELL, y
        per_row = self._per_row()
        if col >= per_row:
            return None
        index = row * per_row + col
        return index if 0 <= index < len(self.slots) else None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        offset = event.get_content_offset(self)
        index = self._slot_at(offset.x, offset.y) if offset else None
        if index != self.hovered:
            self.hovered = index
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        self.hovered = None
        self.refresh()

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        index = self._slot_at(offset.x, offset.y) if offset else None
        if index is not None:
            self.cursor = index
            self.action_pick()

    def action_move(self, delta: int) -> None:
        if self.slots:
            self.cursor = (self.cursor + delta) % len(self.slots)

    def action_move_row(self, delta: int) -> None:
        if self.slots:
            self.cursor = min(max(self.cursor + delta * self._per_row(), 0), len(self.slots) - 1)

    def action_pick(self) -> None:
        if not self.slots:
            return
        slot = self.slots[self.cursor]
        if slot.state != FREE:
            self.notify(self.describe(slot).plain, severity="warning")
            return
        self.picked = slot.port
        self.refresh()
        self.post_message(self.Picked(slot.port))

    def move_to(self, port: int) -> None:
        index = next((i for i, s in enumerate(self.slots) if s.port == port), None)
        if index is not None:
            self.cursor = index

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
