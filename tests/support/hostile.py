"""One corpus of hostile box text, and what "plain" means for output that carried it.

Every surface that shows box text is walked with these strings (tests/toplevel/test_boxtext.py for
the door itself, the CLI and dashboard walks for every verb and view)."""

from __future__ import annotations

import re

OSC52 = "\x1b]52;c;aGJ0dWktd2FzLWhlcmU=\x07"  # writes the host clipboard
OSC0 = "\x1b]0;owned title\x07"  # sets the window title
OSC8 = "\x1b]8;;https://evil.example/login\x1b\\https://github.com/org/repo\x1b]8;;\x1b\\"
DCS = "\x1bP+q544e\x1b\\"  # asks the terminal to answer
CLEAR = "\x1b[2J\x1b[H"  # erases the screen
UP_ERASE = "\x1b[1A\x1b[2K"  # erases the line above
HUGE_SGR = "\x1b[" + "0" * 5000 + "1mbig"
BIDI = "\u202eevil\u202c \u2066iso\u2069"
C1 = "\x9b2J\x9d0;c1 title\x07"
MARKUP_CLICK = "[@click=app.screenshot('.bashrc','/tmp')]click me[/]"
MARKUP_CLOSE = "test -d build || echo [/] missing"
RICH_LINK = "[link=https://evil.example]github.com[/link]"
CR = "safe text\rEVIL"

CORPUS = {
    "osc52": OSC52,
    "osc0": OSC0,
    "osc8": OSC8,
    "dcs": DCS,
    "clear": CLEAR,
    "up_erase": UP_ERASE,
    "huge_sgr": HUGE_SGR,
    "bidi": BIDI,
    "c1": C1,
    "markup_click": MARKUP_CLICK,
    "markup_close": MARKUP_CLOSE,
    "rich_link": RICH_LINK,
    "cr": CR,
}
# All of it in one string, as one hostile line would carry it.
EVERYTHING = " ".join(CORPUS.values())

# What may never reach the host's terminal from box text: ESC other than SGR with short
# parameters, any other C0 control but tab and newline, C1, bidi overrides and isolates.
_ALLOWED_ESC = re.compile(r"\x1b\[(?:\d{0,3}[;:]){0,15}\d{0,3}m")
_FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def unsafe(output: str, colours: bool = False) -> list[str]:
    """The sequences in `output` that would act on a terminal (empty when it is plain).
    With `colours`, short SGR sequences are allowed (a view that shows colours on purpose)."""
    text = _ALLOWED_ESC.sub("", output) if colours else output
    text = text.replace("\r\n", "\n")
    return [repr(m.group(0)) for m in _FORBIDDEN.finditer(text)]
