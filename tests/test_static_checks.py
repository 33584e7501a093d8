"""The tree's static checks, run by the suite so CI runs them with the README's command:
ruff (lint and format), mypy (strict on core, engine, archive and the CLI; see
pyproject.toml) and import-linter (the layering and no cycles)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    found = BIN / name if (BIN / name).exists() else shutil.which(name)
    if not found:
        pytest.fail(
            f"{name} is not installed; it comes with the test extra: pip install -e '.[test]'"
        )
    return str(found)


def check(*argv: str) -> None:
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}\n{done.stderr}"


def test_ruff_lint() -> None:
    check(tool("ruff"), "check", "hbtui", "tests")


def test_ruff_format() -> None:
    check(tool("ruff"), "format", "--check", "hbtui", "tests")


def test_mypy() -> None:
    check(tool("mypy"))


def test_import_contracts() -> None:
    check(tool("lint-imports"))
