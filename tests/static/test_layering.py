"""Textual stays inside hbtui.tui, at run time too: importing the core, engine, archive,
remote or CLI modules loads no Textual (import-linter checks the static imports)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import pytest

import hbtui

PACKAGES = ("hbtui.core", "hbtui.engine", "hbtui.archive", "hbtui.remote", "hbtui.cli")


def modules() -> list[str]:
    found = ["hbtui", "hbtui.wiring", "hbtui.config", "hbtui.events", "hbtui.present"]
    for package in PACKAGES:
        found.append(package)
        path = [str(p) for p in __import__(package, fromlist=["x"]).__path__]
        found += [m.name for m in pkgutil.walk_packages(path, f"{package}.")]
    return found


@pytest.mark.parametrize("module", modules())
def test_module_does_not_import_textual(module: str) -> None:
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')); "
        "print(bad[:3]); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=str(__import__("pathlib").Path(hbtui.__file__).parents[1]),
    )
    assert done.returncode == 0, f"{module} imports textual: {done.stdout}{done.stderr}"
