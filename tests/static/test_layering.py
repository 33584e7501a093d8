"""Textual stays inside hbtui.tui, at run time too: importing the core, engine, archive,
remote or CLI modules loads no Textual (import-linter checks the static imports)."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import hbtui

PACKAGES = ("hbtui.core", "hbtui.engine", "hbtui.archive", "hbtui.remote", "hbtui.cli")
TREE = str(Path(hbtui.__file__).parents[1])
TEXTUAL = "any(m == 'textual' or m.startswith('textual.') for m in sys.modules)"


def modules() -> list[str]:
    found = ["hbtui", "hbtui.wiring", "hbtui.config", "hbtui.events", "hbtui.present"]
    for package in PACKAGES:
        found.append(package)
        path = [str(p) for p in __import__(package, fromlist=["x"]).__path__]
        found += [m.name for m in pkgutil.walk_packages(path, f"{package}.")]
    return found


@pytest.fixture(scope="module")
def clean() -> set[str]:
    """The modules one child imported one after another with no Textual loaded after each.
    Importing never unloads, so no Textual after a module means its imports hold none: one
    child answers for all of them instead of one child each (a third of a second apiece).
    From the first that loads Textual on, or one that fails, each child is its own."""
    code = (
        "import importlib, json, sys\n"
        "clean = []\n"
        f"for name in {modules()!r}:\n"
        "    try:\n"
        "        importlib.import_module(name)\n"
        "    except Exception:\n"
        "        continue\n"
        f"    if {TEXTUAL}:\n"
        "        break\n"
        "    clean.append(name)\n"
        "print(json.dumps(clean))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=TREE, check=True
    )
    return set(json.loads(done.stdout))


def alone(module: str) -> str:
    """What a child that imports only `module` says of Textual: "" for none."""
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')); "
        "print(bad[:3]); sys.exit(1 if bad else 0)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=TREE)
    return "" if done.returncode == 0 else done.stdout + done.stderr


@pytest.mark.parametrize("module", modules())
def test_module_does_not_import_textual(module: str, clean: set[str]) -> None:
    said = "" if module in clean else alone(module)
    assert said == "", f"{module} imports textual: {said}"
