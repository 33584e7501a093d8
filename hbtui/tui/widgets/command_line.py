"""`:` — a command line as in k9s and vim: an action, then maybe a box (`:stop web1`).

Tab completes the action, then the box name (the longest common prefix of what
fits, shown ahead of the cursor as you type); when nothing more is certain, it lists
what fits on the line's border. An unknown command or box is
said on the line's border, in one line, and the line stays open to fix it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from textual.binding import Binding, BindingType
from textual.content import Content
from textual.message import Message
from textual.suggester import Suggester
from textual.widgets import Input

from hbtui.core.foundation import BoxView
from hbtui.tui.widgets.text_input import TextInput


def fitting(value: str, commands: Iterable[str], names: Iterable[str]) -> list[str]:
    """The commands (or, after one, the boxes) that the last word typed could be."""
    words = value.split(" ")
    if len(words) > 2:
        return []
    pool, typed = (commands, words[0]) if len(words) == 1 else (names, words[1])
    return sorted({p for p in pool if p.startswith(typed)})


def complete(value: str, commands: Iterable[str], names: Iterable[str]) -> str:
    """`value` completed as far as it is unambiguous (the command, then the box)."""
    fits = fitting(value, commands, names)
    if not fits:
        return value
    words = value.split(" ")
    head = "" if len(words) == 1 else words[0] + " "
    common = os.path.commonprefix(fits)  # noqa: RUF071 -- a prefix of the typed text, by character
    done = len(fits) == 1 and len(words) == 1  # a whole command: ready for the box
    return head + common + (" " if done else "")


def listing(fits: list[str], width: int) -> str:
    """What fits, for the line's border: as many as `width` holds, then how many more."""
    if not fits:
        return "nothing fits"

    def shown(count: int) -> str:
        rest = len(fits) - count
        return " ".join(fits[:count]) + (f" +{rest} more" if rest else "")

    count = len(fits)
    while count > 1 and len(shown(count)) > width:
        count -= 1
    return shown(count)


class _Ahead(Suggester):
    """Shows the completion tab would make, greyed after the cursor."""

    def __init__(self, line: CommandLine) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.line = line

    async def get_suggestion(self, value: str) -> str | None:
        done = self.line.completed(value)
        return done if done != value else None


class CommandLine(TextInput):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("tab", "complete", "Complete"),
        Binding("escape", "close", "Close"),
    ]

    DEFAULT_CSS = """
    CommandLine {
        display: none;
        dock: bottom;
        margin-bottom: 1;
        border: tall $accent;
        &.-error { border: tall $error; }
    }
    """

    @dataclass
    class Run(Message):
        """A command to run: its id (an id of the actions table) and the box it names, if any."""

        ident: str
        box: str | None

    class Closed(Message):
        """The line was closed; focus goes back to the table."""

    def __init__(self, commands: dict[str, str], **kwargs: Any) -> None:
        """`commands`: every word the line accepts -> the action id it runs."""
        super().__init__(placeholder=":action [box]   tab completes, esc closes", **kwargs)
        self.commands = commands
        self.names: list[str] = []
        self.suggester = _Ahead(self)

    def completed(self, value: str) -> str:
        return complete(value, self.commands, self.names)

    def open(self, views: Iterable[BoxView]) -> None:
        self.names = sorted({v.name for v in views} | {f"{v.host}/{v.name}" for v in views})
        self.value = ""
        self.say("")
        self.display = True
        self.focus()

    def say(self, text: str, *, error: bool = True) -> None:
        """One line on the border: an error (red), or what fits (tab). Plain text: it
        quotes what was typed, and a border title read as markup ends the dashboard on a
        `[/]`."""
        self.border_subtitle = Content(text)
        self.set_class(bool(text) and error, "-error")

    def action_complete(self) -> None:
        """Complete what is unambiguous; when nothing more is, list what fits."""
        done = self.completed(self.value)
        if done == self.value:
            fits = fitting(self.value, self.commands, self.names)
            # The line is docked across the screen; a tab typed ahead of its first
            # layout (`:` then tab at once) finds its own width still 0.
            width = self.size.width or self.screen.size.width
            self.say(listing(fits, max(width - 6, 20)), error=not fits)
            return
        self.value = done
        self.cursor_position = len(self.value)

    def action_close(self) -> None:
        self.display = False
        self.value = ""
        self.screen.set_focus(None)
        self.post_message(self.Closed())

    def on_input_changed(self, _event: Input.Changed) -> None:
        if self.border_subtitle:
            self.say("")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        words = event.value.split()
        if not words:
            self.action_close()
            return
        ident = self.commands.get(words[0])
        if ident is None:
            self.say(f"unknown command {words[0]!r}; tab lists what fits")
            return
        if len(words) > 2:
            self.say(f"{words[0]} takes at most one box, not {' '.join(words[1:])!r}")
            return
        box = words[1] if len(words) == 2 else None
        if box is not None and box not in self.names:
            self.say(f"no box named {box!r} in the table")
            return
        self.post_message(self.Run(ident, box))
        self.action_close()
