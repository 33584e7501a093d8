"""The dashboard dies with its terminal: tmux's server is killed (the pane's terminal hangs
up) at several moments of start-up and use, and no `hbtui` process is left; a box being
made then is rolled back as `q` would."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from support import HBTUI_BIN, SIM_RECIPE
from support.tmux import SOCKET, slow_recipe, tmux, tmux_env, wait_screen

pytestmark = [
    pytest.mark.terminal,
    pytest.mark.sim,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux"),
]


def running(program: str, home: str | None = None) -> list[int]:
    """The live processes whose command line names `program` (and, if given, run with this
    HBTUI_HOME); a zombie has ended."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if program.encode() not in (entry / "cmdline").read_bytes().split(b"\0"):
                continue
            environ = (entry / "environ").read_bytes().split(b"\0")
            if home is not None and f"HBTUI_HOME={home}".encode() not in environ:
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # it ended while being read
            continue
        if state != "Z":
            found.append(int(entry.name))
    return found


def dashboards(home: str) -> list[int]:
    return running(HBTUI_BIN, home)


def held_engine(tmp_path: Path, real: str) -> tuple[Path, Path]:
    """The simulator behind a gate: `machine ls` waits until the gate file exists, so the
    dashboard is up with its first listing still out."""
    gate = tmp_path / "gate"
    engine = tmp_path / "held-smolvm"
    engine.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" machine ls "*)\n'
        f"  while [ ! -e {gate} ]; do sleep 0.05; done;;\n"
        "esac\n"
        f'exec {real} "$@"\n'
    )
    engine.chmod(0o755)
    return engine, gate


def row(name: str):
    return lambda screen: any(line.startswith(f"│ {name} ") for line in screen.splitlines())


def until_started(home: str, session: str, engine: Path) -> None:
    """The process is there, its screen not yet."""
    deadline = time.monotonic() + 30
    while not dashboards(home):
        assert time.monotonic() < deadline, "hbtui did not start"
        time.sleep(0.02)


def first_frame(home: str, session: str, engine: Path) -> None:
    """Up, with the first listing out (held at the engine's gate)."""
    wait_screen(session, lambda s: "Box " in s and "Help" in s, 30, "the first frame")
    deadline = time.monotonic() + 30
    while not running(str(engine)):
        assert time.monotonic() < deadline, "the first listing did not go out"
        time.sleep(0.05)
    assert not row("keep")(tmux("capture-pane", "-p", "-t", session))


def first_row(home: str, session: str, engine: Path) -> None:
    """The instant the box's row is drawn, when the dashboard draws most."""
    deadline = time.monotonic() + 30
    while not row("keep")(tmux("capture-pane", "-p", "-t", session)):
        assert time.monotonic() < deadline, "no row for the box"


def box_figures(home: str, session: str, engine: Path) -> None:
    """A moment later: the stats poll after the listing has filled the CPU · Mem cell."""
    wait_screen(
        session,
        lambda s: any(line.startswith("│ keep ") and "%" in line for line in s.splitlines()),
        30,
        "the box's CPU figure",
    )


def new_box_dialog(home: str, session: str, engine: Path) -> None:
    wait_screen(session, row("keep"), 30, "the box's row")
    tmux("send-keys", "-t", session, "n")
    wait_screen(session, lambda s: "New box" in s, 10, "the new-box dialog")


def making_a_box(home: str, session: str, engine: Path) -> None:
    new_box_dialog(home, session, engine)
    tmux("send-keys", "-t", session, "-l", "gonebox")
    tmux("send-keys", "-t", session, "Enter")
    wait_screen(session, lambda s: "slow-step" in s, 60, "provisioning under way")


def in_a_shell(home: str, session: str, engine: Path) -> None:
    """`enter`: the dashboard suspended, the box's shell on the terminal."""
    wait_screen(session, row("keep"), 30, "the box's row")
    tmux("send-keys", "-t", session, "Enter")
    wait_screen(session, lambda s: "agent@keep" in s, 60, "the box's shell")


MOMENTS = {
    "exec": until_started,
    "first-frame-listing-out": first_frame,
    "first-row": first_row,
    "box-figures": box_figures,
    "new-box-dialog": new_box_dialog,
    "making-a-box": making_a_box,
    "in-a-shell": in_a_shell,
}


@pytest.fixture
def kept_box(sim_env: dict[str, str]) -> dict[str, str]:
    subprocess.run(
        [HBTUI_BIN, "new", "keep"],
        env=dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE)),
        capture_output=True,
        check=True,
    )
    return sim_env


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_killing_the_terminal_ends_the_dashboard(kept_box, sim_smolvm, tmp_path, moment):
    session = f"hbtui-hup-{tmp_path.name}"[:40]
    home = kept_box["HBTUI_HOME"]
    engine, gate = held_engine(tmp_path, sim_smolvm)
    if moment != "first-frame-listing-out":
        gate.touch()
    env = dict(
        kept_box,
        TERM="xterm-256color",
        HBTUI_SMOLVM=str(engine),
        HBTUI_RECIPE=str(slow_recipe(tmp_path)),
    )
    env_args = tmux_env(env)
    # hbtui is the pane's own process, as `tmux new-session hbtui` or `ssh -t host hbtui`
    # make it: the session leader, which the hang-up sends SIGHUP and SIGCONT.
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "45", *env_args, HBTUI_BIN)
    try:
        MOMENTS[moment](home, session, engine)
        assert dashboards(home), "no dashboard to end"
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
    killed = time.monotonic()
    # Rolling back a box being made stops its machine first; anything else is at once.
    deadline = killed + (60 if moment == "making-a-box" else 10)
    while dashboards(home):
        assert time.monotonic() < deadline, f"hbtui outlived its terminal: {dashboards(home)}"
        time.sleep(0.05)
    print(f"{moment}: gone {time.monotonic() - killed:.2f} s after the terminal")
    # Nor is an engine call it had out (its own session: the hang-up never reached it).
    assert running(str(engine)) == []
    listed = subprocess.run(
        [HBTUI_BIN, "ls", "--json"], env=kept_box, capture_output=True, text=True, check=True
    )
    assert [box["name"] for box in json.loads(listed.stdout)] == ["keep"], listed.stdout
    machines = subprocess.run(
        [sim_smolvm, "--state-dir", kept_box["HBTUI_SMOLVM_STATE_DIR"], "machine", "ls", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert [m["name"] for m in json.loads(machines.stdout)] == ["keep"], machines.stdout
