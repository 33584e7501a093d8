"""What the dashboard asks of the machine it runs on: a shell on this terminal, a browser.

Nothing here knows Textual; the App passes these in (tests pass their own).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import webbrowser

from hbtui.environment import child_env


async def launch_interactive(argv: list[str]) -> int:
    """Run `argv` on this terminal and wait for it, keeping the event loop alive.

    The loop keeps running so other operations (a box provisioning in the
    background) go on draining their pipes while the user is in a shell.
    Ctrl-C in the shell must reach the child only, so SIGINT is swallowed
    here for the duration; a Python-level handler, unlike SIG_IGN, is not
    inherited by the child.
    """
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGINT)
    try:
        loop.add_signal_handler(signal.SIGINT, lambda: None)
        installed = True
    except (NotImplementedError, RuntimeError, ValueError):
        installed = False
    try:
        proc = await asyncio.create_subprocess_exec(*argv, env=child_env())
        return await proc.wait()
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
            signal.signal(signal.SIGINT, previous)


def open_in_browser(url: str) -> bool:
    """Hand `url` to a browser; False when there is none to hand it to.

    Without a display (an SSH session, a console) Python's webbrowser falls
    back to a text browser, which would take over the dashboard's terminal,
    so nothing is tried there.
    """
    graphical = sys.platform in ("darwin", "win32") or any(
        os.environ.get(var) for var in ("DISPLAY", "WAYLAND_DISPLAY")
    )
    if not graphical:
        return False
    try:
        return webbrowser.open(url)
    except (webbrowser.Error, OSError):  # a browser that cannot be started
        return False


def no_browser_reason() -> str:
    if sys.platform not in ("darwin", "win32") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    ):
        return "no display: DISPLAY and WAYLAND_DISPLAY are unset"
    return "no browser answered"
