"""The installed `hbtui` dashboard in a real terminal (tmux 160x45) against the simulator."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time

import pytest

from support import HBTUI_BIN, SIM_RECIPE
from support.tmux import SOCKET, slow_recipe, tmux, tmux_env, wait_screen

pytestmark = [
    pytest.mark.terminal,
    pytest.mark.sim,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def test_create_a_box_with_the_keys_and_watch_it_become_ready(sim_env, tmp_path):
    session = f"hbtui-{tmp_path.name}"[:40]
    env = dict(sim_env, TERM="xterm-256color", HBTUI_RECIPE=str(SIM_RECIPE))
    env_args = tmux_env(env)
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "45", *env_args, HBTUI_BIN)
    try:
        wait_screen(session, lambda s: "Provisioning" in s and "Help" in s, 30, "the dashboard")
        tmux("send-keys", "-t", session, "n")
        wait_screen(session, lambda s: "New box" in s, 10, "the new-box dialog")
        tmux("send-keys", "-t", session, "-l", "tmuxbox")
        tmux("send-keys", "-t", session, "Enter")
        wait_screen(session, lambda s: "step " in s, 60, "live provisioning steps")
        # The log pane says "ready" a refresh before the table's row does: wait for the row.
        wait_screen(
            session,
            lambda s: any(
                row.startswith("│ tmuxbox ") and " running " in row for row in s.splitlines()
            ),
            240,
            "tmuxbox's row to say running",
        )
        tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if (
                subprocess.run(
                    ["tmux", "-L", SOCKET, "has-session", "-t", session], capture_output=True
                ).returncode
                != 0
            ):
                break
            time.sleep(0.2)
        else:
            raise AssertionError("q did not quit the dashboard")
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)


@pytest.mark.parametrize("signum, status", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_while_a_box_is_made_rolls_it_back_then_exits(sim_env, tmp_path, signum, status):
    """SIGTERM (a service manager) or SIGHUP (the terminal went away) reaches the
    dashboard while it provisions a box: like `q`, the operation is cancelled and its
    rollback waited for; the exit status is 128 + the signal."""
    session = f"hbtui-sig-{tmp_path.name}"[:40]
    env = dict(sim_env, TERM="xterm-256color", HBTUI_RECIPE=str(slow_recipe(tmp_path)))
    env_args = tmux_env(env)
    # A shell in the pane runs hbtui and writes down its exit status (tmux's own record
    # of a pane's status is not reliable: it may not reap the process for a long while).
    status_file = tmp_path / "status"
    wrapper = f"{HBTUI_BIN}; echo $? > {status_file}; sleep 60"
    tmux(
        "new-session", "-d", "-s", session, "-x", "160", "-y", "45", *env_args, "sh", "-c", wrapper
    )
    try:
        wait_screen(session, lambda s: "Provisioning" in s and "Help" in s, 30, "the dashboard")
        tmux("send-keys", "-t", session, "n")
        wait_screen(session, lambda s: "New box" in s, 10, "the new-box dialog")
        tmux("send-keys", "-t", session, "-l", "sigbox")
        tmux("send-keys", "-t", session, "Enter")
        wait_screen(session, lambda s: "slow-step" in s, 60, "provisioning under way")
        shell = tmux("display-message", "-p", "-t", session, "#{pane_pid}").strip()
        pid = int(subprocess.run(["pgrep", "-P", shell], capture_output=True, text=True).stdout)
        os.kill(pid, signum)
        deadline = time.monotonic() + 60
        while not status_file.exists() or not status_file.read_text().strip():
            assert time.monotonic() < deadline, "the dashboard did not exit"
            time.sleep(0.2)
        assert status_file.read_text().strip() == str(status)
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
    listed = subprocess.run(
        [HBTUI_BIN, "ls", "--json"], env=sim_env, capture_output=True, text=True, check=True
    )
    assert json.loads(listed.stdout) == [], listed.stdout
