"""Box text as the dashboard draws it: plain, and coloured only through `hbtui.boxtext`.

Neither Rich nor Textual makes text safe: a `Text` or `Content` writes an escape sequence
in it to the host's terminal as it is, a string given to `Static`, `Label` or `notify` is
read as markup (`[@click=app.…]` runs an action when clicked, `[/]` ends the dashboard),
and Rich's ANSI parser turns an OSC 8 into a link and raises on a 5,000-digit colour. So
colours are parsed here only (`row`), after `boxtext.colours` has left nothing but text and
short SGR. (An operation's events come plain: `hbtui.events` makes their words one line.)
"""

from __future__ import annotations

from rich.text import Text

from hbtui import boxtext


def row(text: str) -> Text:
    """One row of box text with its colours: `boxtext.colours` first, so Rich's parser sees
    only short SGR; a new line (a carriage return was one) becomes a space."""
    return Text.from_ansi(boxtext.colours(text).replace("\n", " "), no_wrap=True, end="")
