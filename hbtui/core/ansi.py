"""Terminal text from a box, made safe to draw on the host's terminal.

A box's tmux pane is whatever its agent (or anything in the box) printed, and may carry
sequences that act on the terminal that shows them: set its title, move the cursor over
hbtui's own screen, write the clipboard (OSC 52), open links, query and make the terminal
answer. `keep_colours` lets only text and SGR colour/style sequences (`ESC [ ... m`)
through; every other escape or control sequence is dropped whole.
"""

from __future__ import annotations

import re

# ESC [ params intermediates final: a CSI sequence (SGR when it ends in "m" with digits and
# ";"/":" only). The 8-bit CSI (0x9b) is C1 and is dropped with the other C1 codes.
_CSI = re.compile(r"\x1b\[([0-?]*)([ -/]*)([@-~])")
# OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \), or to the end of the text.
_STRING = re.compile(r"\x1b[\]PX^_].*?(?:\x07|\x1b\\|\Z)", re.DOTALL)
# Any other escape: ESC and one character (plus intermediates), e.g. ESC 7, ESC ( B.
_ESC = re.compile(r"\x1b[ -/]*[0-~]?")
# C0 controls except tab and newline, DEL, and the C1 range.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SGR_PARAMS = re.compile(r"[0-9;:]*")
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def _csi(match: re.Match[str]) -> str:
    params, intermediates, final = match.groups()
    if final == "m" and not intermediates and _SGR_PARAMS.fullmatch(params):
        return match.group(0)
    return ""


def keep_colours(text: str) -> str:
    """`text` with only its printable characters, tabs, newlines and SGR sequences."""
    text = _STRING.sub("", text.replace("\x00", ""))
    text = _CSI.sub(_csi, text)
    kept: list[str] = []

    def hold(match: re.Match[str]) -> str:
        kept.append(match.group(0))
        return "\x00"

    # The SGRs stand aside as NULs while every other escape and control goes.
    text = _SGR.sub(hold, text)
    text = _ESC.sub("", text)
    text = _CONTROL.sub(lambda m: m.group(0) if m.group(0) == "\x00" else "", text)
    pieces = iter(kept)
    return re.sub("\x00", lambda _m: next(pieces, ""), text)


def plain(text: str) -> str:
    """One line of text with no escape or control sequence at all (names, commands)."""
    text = _STRING.sub("", text)
    text = _CSI.sub("", text)
    text = _ESC.sub("", text)
    text = _CONTROL.sub(" ", text).replace("\t", " ").replace("\n", " ")
    return " ".join(text.split())


def without_escapes(text: str) -> str:
    """Many lines of text (a patch) with no escape or control sequence, tabs and newlines
    kept."""
    return _SGR.sub("", keep_colours(text))
