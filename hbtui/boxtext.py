"""Text from a box, made plain before it reaches anything on the host.

Everything a box says (an agent's status and screen, logs, git output, file names, an
archive's entry names) is written by whoever has root in it, and hbtui is what carries it
to the host's terminal, notifications and dashboard. This module is the one door that
text passes: nothing in it may act on what shows it.

- No C0 or C1 control (tab and newline kept where lines are kept; a carriage return, which
  would draw over what came before it, becomes a new line).
- No escape sequence at all: OSC (title, clipboard, hyperlinks), DCS, SOS, PM, APC, cursor
  movement, erasure, mode changes; `colours` keeps SGR colour and style sequences only, and
  only with a few short parameters (a 5,000-digit one is more than a renderer can parse).
- No bidirectional override, isolate or mark, which would show text in another order than
  it is (U+202A-U+202E, U+2066-U+2069), no line or paragraph separator, and nothing that
  shows nothing (a zero-width space, a word joiner, a tag character).

What this module does not do is markup: a front end shows the result as plain text (a
rich `Text`, a Textual `Content`, `notify(markup=False)`), never as markup.
"""

from __future__ import annotations

import re

# OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \), or to the end of the text.
_STRING = re.compile(r"\x1b[\]PX^_].*?(?:\x07|\x1b\\|\Z)", re.DOTALL)
# ESC [ params intermediates final: a CSI sequence. The 8-bit CSI (0x9b) is C1, dropped below.
_CSI = re.compile(r"\x1b\[([0-?]*)([ -/]*)([@-~]?)")
# Any other escape: ESC, its intermediates and one final character (ESC 7, ESC ( B).
_ESC = re.compile(r"\x1b[ -/]*[0-~]?")
# C0 controls but tab and newline, DEL, the C1 range, bidi overrides, isolates and marks,
# the line and paragraph separators, and characters that show nothing but can hide or split
# a word (zero-width space, word joiner and invisible operators, the byte order mark, tags).
# Zero-width (non-)joiners stay: emoji and Persian need them. NUL is the placeholder for a
# kept SGR, so it goes first.
_CONTROL = re.compile(
    "[\x01-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b\u200e\u200f\u202a-\u202e"
    "\u2028\u2029\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)
# An SGR worth keeping: at most 16 parameters of at most 3 digits each (38;2;255;255;255).
_SGR_PARAMS = re.compile(r"(?:\d{0,3}[;:]){0,15}\d{0,3}")


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _strip(text: str, keep_sgr: bool, control: str = "") -> str:
    """`text` with no escape, and each control but tab and newline replaced by `control`;
    SGRs kept when asked, as NULs that stand aside while the rest is removed."""
    kept: list[str] = []

    def csi(match: re.Match[str]) -> str:
        params, intermediates, final = match.groups()
        if keep_sgr and final == "m" and not intermediates and _SGR_PARAMS.fullmatch(params):
            kept.append(match.group(0))
            return "\x00"
        return ""

    text = _newlines(text.replace("\x00", ""))
    text = _STRING.sub("", text)
    text = _CSI.sub(csi, text)
    text = _ESC.sub("", text)
    text = _CONTROL.sub(control, text)
    if not kept:
        return text
    pieces = iter(kept)
    return re.sub("\x00", lambda _m: next(pieces, ""), text)


def line(text: str, limit: int | None = None) -> str:
    """One line of plain text (a name, a command, an error): no escape or control, every
    run of white space one space; cut at `limit` characters with an ellipsis."""
    flat = " ".join(_strip(text, keep_sgr=False, control=" ").split())
    if limit is not None and len(flat) > limit:
        return flat[: max(limit - 1, 0)] + "…"
    return flat


def lines(text: str) -> str:
    """Many lines of plain text (a log, a patch): no escape or control, tabs and newlines
    kept."""
    return _strip(text, keep_sgr=False)


def colours(text: str) -> str:
    """Many lines with their colours (a screen, a log shown in colour): `lines`, keeping SGR
    sequences whose parameters are few and short."""
    return _strip(text, keep_sgr=True)
