"""`q` while a box is provisioning, in a real terminal (tmux 160x45) against the simulator:
the dashboard asks, cancels, shows the rollback, and exits only when the box is gone."""

from __future__ import annotations

import json
import shutil
import subprocess
import time

import pytest

from support import HBTUI_BIN
from support.tmux import SOCKET, slow_recipe, tmux, wait_screen

pytestmark = [
    pytest.mark.terminal,
    pytest.mark.sim,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def test_q_while_provisioning_asks_then_rolls_back_before_exiting(sim_env, sim_smolvm, tmp_path):
    session = f"hbtui-quit-{tmp_path.name}"[:40]
    # The rollback's machine stop takes 3 s, as a real guest's shutdown would, so the
    # screen can be caught saying what the dashboard waits for.
    env = dict(
        sim_env,
        TERM="xterm-256color",
        HBTUI_RECIPE=str(slow_recipe(tmp_path)),
        SMOLSIM_SHUTDOWN_SECONDS="3",
    )
    env_args = [
        arg
        for key, value in env.items()
        if key.startswith(("HBTUI", "PATH", "TERM", "SMOLSIM"))
        for arg in ("-e", f"{key}={value}")
    ]
    # A shell writes down hbtui's exit status and keeps the pane, with whatever hbtui
    # printed once it had left the full screen (Textual draws on stderr: not redirected).
    status_file = tmp_path / "status"
    wrapper = f"{HBTUI_BIN}; echo $? > {status_file}; sleep 60"
    tmux(
        "new-session", "-d", "-s", session, "-x", "160", "-y", "45", *env_args, "sh", "-c", wrapper
    )
    try:
        wait_screen(session, lambda s: "Provisioning" in s and "Help" in s, 30, "the dashboard")
        tmux("send-keys", "-t", session, "n")
        wait_screen(session, lambda s: "New box" in s, 10, "the new-box dialog")
        tmux("send-keys", "-t", session, "-l", "quitbox")
        tmux("send-keys", "-t", session, "Enter")
        wait_screen(session, lambda s: "slow-step" in s, 60, "provisioning under way")
        tmux("send-keys", "-t", session, "q")
        wait_screen(session, lambda s: "Quit?" in s and "new quitbox" in s, 10, "the question")
        tmux("send-keys", "-t", session, "n")  # keep working
        wait_screen(session, lambda s: "Quit?" not in s and "slow-step" in s, 10, "no question")
        assert not status_file.exists()
        tmux("send-keys", "-t", session, "q")
        wait_screen(session, lambda s: "Quit?" in s, 10, "the question again")
        tmux("send-keys", "-t", session, "y")
        wait_screen(
            session,
            lambda s: "waiting for the rollback of" in s and "new quitbox" in s,
            10,
            "the rollback",
        )
        deadline = time.monotonic() + 60
        while not status_file.exists() or not status_file.read_text().strip():
            assert time.monotonic() < deadline, "the dashboard did not exit"
            time.sleep(0.2)
        assert status_file.read_text().strip() == "0"
        after = tmux("capture-pane", "-p", "-S", "-", "-t", session)
        assert "never awaited" not in after and "Traceback" not in after, after
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
    listed = subprocess.run(
        [HBTUI_BIN, "ls", "--json"], env=sim_env, capture_output=True, text=True, check=True
    )
    assert json.loads(listed.stdout) == [], listed.stdout
    machines = subprocess.run(
        [sim_smolvm, "--state-dir", sim_env["HBTUI_SMOLVM_STATE_DIR"], "machine", "ls", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(machines.stdout) == [], machines.stdout
