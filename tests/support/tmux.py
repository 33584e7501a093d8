"""The installed `hbtui` in a real terminal: a private tmux server per test process."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from support import recipe_with

# A private tmux server, one per test process: no one else's options, sessions or kill-server.
SOCKET = f"hbtui-test-{os.getpid()}"


# pytest's own COLUMNS/LINES would otherwise reach the server and override the pane size.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "TMUX")}


def tmux_env(env: dict[str, str]) -> list[str]:
    """`-e NAME=VALUE` for each of hbtui's, PATH's and TERM's variables in `env`: what a
    new tmux session needs to run the installed hbtui as the test's environment says."""
    return [
        arg
        for key, value in env.items()
        if key.startswith(("HBTUI", "PATH", "TERM"))
        for arg in ("-e", f"{key}={value}")
    ]


def tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True, env=CLEAN_ENV
    ).stdout


def wait_screen(session: str, predicate, timeout: float, what: str) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = tmux("capture-pane", "-p", "-t", session)
        if predicate(screen):
            return screen
        time.sleep(0.05)  # a capture is a few milliseconds
    raise AssertionError(f"timed out waiting for {what}; screen:\n{screen}")


def slow_recipe(tmp_path: Path) -> Path:
    """The sim recipe with a step that takes a minute, so a signal surely lands mid-way."""
    return recipe_with(tmp_path, "echo slow-step; sleep 60", "slow-recipe")
