"""Box text as the dashboard draws it: plain, and coloured only through `hbtui.boxtext`.

Neither Rich nor Textual makes text safe: a `Text` or `Content` writes an escape sequence
in it to the host's terminal as it is, a string given to `Static`, `Label` or `notify` is
read as markup (`[@click=app.…]` runs an action when clicked, `[/]` ends the dashboard),
and Rich's ANSI parser turns an OSC 8 into a link and raises on a 5,000-digit colour. So an
operation's events are made plain as they come in (`event`), and colours are parsed here
only (`row`), after `boxtext.colours` has left nothing but text and short SGR.
"""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text

from hbtui import boxtext
from hbtui.events import Event, Notice, Phase, Step


def event(happened: Event) -> Event:
    """The event with the words a box may have written in it made one plain line. A log
    line stays as it came (the log keeps what was said): `row` draws it."""
    if isinstance(happened, Phase | Notice):
        return replace(happened, message=boxtext.line(happened.message))
    if isinstance(happened, Step):
        return replace(happened, name=boxtext.line(happened.name))
    return happened


def row(text: str) -> Text:
    """One row of box text with its colours: `boxtext.colours` first, so Rich's parser sees
    only short SGR; a new line (a carriage return was one) becomes a space."""
    return Text.from_ansi(boxtext.colours(text).replace("\n", " "), no_wrap=True, end="")
