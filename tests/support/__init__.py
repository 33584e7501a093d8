"""What tests share, in one place: where things are, how to run `hbtui` and look at a
simulator box (`support.cli`), how to drive the dashboard with Pilot (`support.pilot`)
and in a real terminal through tmux (`support.tmux`). Fixtures live in conftest.py;
test modules import helpers from here, never from each other."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "hbtui"
TESTS = ROOT / "tests"
SIM_RECIPE = TESTS / "recipes" / "sim"
SIM_SOURCE = TESTS / "sim" / "smolvm"  # the simulator
SIM_SMOLVM = TESTS / "sim" / "bin" / "smolvm"  # how tests run it: with its bytecode cached
REMOTE_SSHD = TESTS / "support" / "remote_sshd.py"
REMOTE_PORTS = "5700-5799"  # remote boxes in the asyncssh-server tests
OPENSSH_PORTS = "5800-5899"  # remote boxes in the OpenSSH test
HBTUI_BIN = str(Path(sys.executable).with_name("hbtui"))


def sim_usable() -> str | None:
    """Why the simulator cannot run here, or None."""
    if os.geteuid() != 0:
        return "the smolvm simulator needs root"
    if not os.access("/usr/bin/python3", os.X_OK):
        return "the smolvm simulator runs as /usr/bin/python3, which is missing"
    for tool in ("bwrap", "nsenter", "ip", "setpriv"):
        if shutil.which(tool) is None:
            return f"the smolvm simulator needs {tool}"
    return None


def recipe_with(tmp_path: Path, line: str, name: str = "recipe") -> Path:
    """A copy of the sim recipe with `line` run at the start of its executor step."""
    copy = tmp_path / name
    shutil.copytree(SIM_RECIPE, copy, symlinks=False)
    script = copy / "provision" / "provision.sh"
    lines = script.read_text().splitlines()
    at = next(i for i, text in enumerate(lines) if text.startswith("step_executor_standin() {"))
    lines.insert(at + 1, line)
    script.write_text("\n".join(lines) + "\n")
    return copy


@contextlib.contextmanager
def tiny_fs(folder: Path) -> Iterator[Path]:
    """`folder` (made here) on a 64 KiB tmpfs of its own, to be filled: a full disk.
    Skips the test where no tmpfs can be mounted (root is needed)."""
    import pytest

    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("a tmpfs cannot be mounted here (root needed)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)
