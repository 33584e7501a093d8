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
