"""Shared fixtures. Each area keeps its fixtures in its own marked block."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# ---- core: isolated state and the real engine -------------------------------------------


@pytest.fixture
def hbtui_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HBTUI_HOME for one test, so no test sees the developer's boxes."""
    home = tmp_path / "hbtui-home"
    home.mkdir()
    monkeypatch.setenv("HBTUI_HOME", str(home))
    for var in ("HBTUI_SMOLVM", "HBTUI_SMOLVM_STATE_DIR", "HBTUI_PASSPHRASE", "BOX_PASSPHRASE"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(scope="session")
def real_smolvm() -> str:
    """The smolvm CLI bundled in the smolmachines wheel (no boot needed for these tests)."""
    from hbtui.engine.locate import bundled_engine

    path = bundled_engine()
    if path is None:
        pytest.skip("smolmachines is not installed, so the real engine is missing")
    return path


@pytest.fixture
def real_state_dir(tmp_path: Path) -> Path:
    d = tmp_path / "smolvm-state"
    d.mkdir()
    return d

# ---- end core ---------------------------------------------------------------------------

# ---- sim: the smolvm simulator (tests/sim/smolvm) ----------------------------------------

SIM_SMOLVM = ROOT / "tests" / "sim" / "smolvm"


def _sim_usable() -> str | None:
    """Why the simulator cannot run here, or None."""
    import shutil

    if os.geteuid() != 0:
        return "the smolvm simulator needs root"
    for tool in ("bwrap", "nsenter", "ip", "setpriv"):
        if shutil.which(tool) is None:
            return f"the smolvm simulator needs {tool}"
    return None


@pytest.fixture(scope="session")
def sim_smolvm() -> str:
    """Path of the simulator; skips the test where it cannot run (not root, no bwrap)."""
    why = _sim_usable()
    if why:
        pytest.skip(why)
    return str(SIM_SMOLVM)


@pytest.fixture
def sim_state_dir(tmp_path: Path) -> Path:
    """A fresh, empty --state-dir for one test."""
    d = tmp_path / "smolsim-state"
    d.mkdir()
    return d


def pick_free_ports(count: int = 1) -> list[int]:
    """Host TCP ports free on 127.0.0.1 right now (all distinct)."""
    import socket

    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


@pytest.fixture
def free_port():
    """Call it to get N free host ports: `h1, h2 = free_port(2)`."""
    return pick_free_ports

# ---- end sim ------------------------------------------------------------------------------
