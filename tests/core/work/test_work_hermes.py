"""Hermes's first prompt: `new --agent hermes --task` pastes the task into Hermes's input
line as one bracketed paste, so a task of many lines is one prompt (typed keys submitted
at the first newline, and Hermes 0.19's start-up flushed keys typed before it read them).

The launcher runs in a real tmux pane here, in front of a stand-in that reads its terminal
the way Hermes's prompt_toolkit does (raw, nothing pending dropped). By hand, the same
launcher in front of the real `hermes` of the recipe's pin (0.19.0) against
tests/sim/fake_anthropic.py: the three lines arrived as one prompt."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hbtui.core.work import agent as work_agent

TASK = "line one\nline two; $(touch pwned) `x`\nline three"
# Reads its terminal as prompt_toolkit does (raw, set with TCSANOW: nothing pending is
# dropped) once it has started, and keeps what it read up to the Enter after the paste.
STAND_IN = """#!{python}
import os, sys, termios
fd = sys.stdin.fileno()
mode = termios.tcgetattr(fd)
mode[3] &= ~(termios.ICANON | termios.ECHO | termios.ISIG)
termios.tcsetattr(fd, termios.TCSANOW, mode)
got = b""
while not got.endswith(b"\\x1b[201~\\r"):
    got += os.read(fd, 65536)
open({out!r}, "wb").write(got)
"""


def _wait_for(path: Path, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.stat().st_size:
        if time.monotonic() > deadline:
            sock = str(path.parent / "tmux.sock")
            screen = subprocess.run(
                ["tmux", "-S", sock, "capture-pane", "-p", "-t", "main"],
                capture_output=True, text=True,
            ).stdout  # fmt: skip
            raise AssertionError(f"timed out waiting for {what}; the pane:\n{screen}")
        time.sleep(0.2)


def _run_in_tmux(tmp_path: Path, env: dict[str, str]) -> None:
    """The launcher as the box starts it: `bash -l LAUNCHER` in a tmux pane of its own."""
    (tmp_path / "task").write_text(TASK)
    launcher = tmp_path / "start"
    launcher.write_text(work_agent.launcher("hermes", str(tmp_path / "task")))
    sock = str(tmp_path / "tmux.sock")
    env = {k: v for k, v in env.items() if k not in ("TMUX", "TMUX_PANE")}
    subprocess.run(
        ["tmux", "-S", sock, "new-session", "-d", "-s", "main", "-x", "200", "-y", "50",
         f"bash {launcher}"],
        env=env, check=True,
    )  # fmt: skip


@pytest.fixture
def tmux_server(tmp_path: Path):
    yield
    subprocess.run(["tmux", "-S", str(tmp_path / "tmux.sock"), "kill-server"], check=False)


def test_a_task_of_three_lines_reaches_hermes_as_one_paste_and_one_enter(tmp_path, tmux_server):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    got = tmp_path / "got"
    stand_in = bin_dir / "hermes"
    stand_in.write_text(STAND_IN.format(python=sys.executable, out=str(got)))
    stand_in.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    _run_in_tmux(tmp_path, env)
    _wait_for(got, "the stand-in to read the task")
    assert got.read_bytes() == b"\x1b[200~" + TASK.encode() + b"\x1b[201~\r"
    assert not (tmp_path / "task.paste").exists()  # the paste's file is gone with it
    assert not (tmp_path / "pwned").exists()


def test_a_task_file_cannot_end_the_paste_early():
    """An escape in the task would let `ESC[201~` end the paste and type the rest as keys:
    the launcher drops escapes from the task it pastes."""
    launcher = work_agent.launcher("hermes", "/data/home/agent/work/p/.git/hbtui-task")
    assert "tr -d '\\033'" in launcher
    assert launcher.startswith("set -- '/data/home/agent/work/p/.git/hbtui-task'\n")
