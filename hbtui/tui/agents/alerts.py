"""Telling the user a box's agent waits for them, outside the dashboard's own screen:
the terminal's bell, an OSC 9 desktop notification (iTerm2, kitty, WezTerm, foot,
Windows Terminal...), and `notify-send` where it is installed. Inside tmux the OSC 9 goes
in tmux's DCS passthrough, which reaches the outer terminal only where tmux's
`allow-passthrough` option is on (tmux drops it otherwise).

What a box says is untrusted: the text is made plain (no escape or control character,
`hbtui.boxtext.line`) and capped before it goes anywhere, and `notify-send` gets it
as one argv element, never through a shell, with `&`, `<` and `>` escaped: a
notification server reads the body as markup (`<a href>`, `<img>`), so a box's words
would otherwise show a link whose text says one place and leads to another.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
import shutil
import subprocess

from hbtui import boxtext
from hbtui.core.agents import AgentSession
from hbtui.environment import child_env
from hbtui.names import LOCAL

ALERT_MAX = 200  # characters of an alert's text
NOTIFY_SEND = "notify-send"
NOTIFY_TIMEOUT = 5.0  # seconds notify-send may take before it is killed


def alert_text(session: AgentSession) -> str:
    """`alpha needs you: Bash rm -rf build` (what it waits for, when the box said)."""
    where = session.box if session.host == LOCAL else f"{session.box}@{session.host}"
    what = f"{where} needs you" + (f": {session.waiting_for}" if session.waiting_for else "")
    return safe(what)


def safe(text: str, limit: int = ALERT_MAX) -> str:
    """One plain line of at most `limit` characters."""
    flat = boxtext.line(text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def osc9(text: str, *, tmux: bool | None = None) -> str:
    """The OSC 9 sequence that asks the terminal for a desktop notification; wrapped for
    tmux's passthrough when hbtui runs inside tmux (`tmux` None: where $TMUX says so)."""
    sequence = f"\x1b]9;{safe(text)}\x07"
    if tmux is None:
        tmux = bool(os.environ.get("TMUX"))
    if not tmux:
        return sequence
    # DCS tmux; ... ST, every ESC of the wrapped sequence doubled.
    return "\x1bPtmux;" + sequence.replace("\x1b", "\x1b\x1b") + "\x1b\\"


def notify_send_argv(text: str) -> list[str] | None:
    """`notify-send` with the text as its own argument (its markup escaped), or None where
    it is missing."""
    program = shutil.which(NOTIFY_SEND)
    if program is None:
        return None
    body = html.escape(safe(text), quote=False)
    return [program, "--app-name=hbtui", "--", "hbtui: an agent needs you", body]


async def run_notify_send(argv: list[str]) -> None:
    """Run it detached from the terminal; one that hangs is killed, a failure is ignored
    (a notification is a courtesy, never an error)."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=child_env(),
            start_new_session=True,
        )
    except OSError:
        return
    try:
        async with asyncio.timeout(NOTIFY_TIMEOUT):
            await process.wait()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
