"""The tree's static checks, run by the suite so CI runs them with the README's command:
ruff (lint and format), mypy (strict, the whole package) and import-linter (the layering
and no cycles); and the tests' own shape (tests/README.md)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
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


def test_no_test_module_imports_another() -> None:
    """Shared helpers live in tests/support; a test module importing a sibling drags its
    fixtures and module-level state along, and hides where a helper lives."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "sim" in path.relative_to(ROOT / "tests").parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0].startswith(
                ("test_", "conftest")
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} from {node.module}")
    assert not offenders, "import from tests/support instead:\n" + "\n".join(offenders)


def test_the_top_level_is_the_one_the_design_names() -> None:
    tracked = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    if not tracked:
        pytest.skip("not a git checkout")
    top = {name.split("/")[0] for name in tracked}
    assert top <= {
        "pyproject.toml",
        "hbtui",
        "provision",
        "guest",
        "tests",
        "docs",
        "README.md",
        "CONTRIBUTING.md",
        "CHANGELOG.md",
        ".ci",
        ".gitignore",
    }, sorted(top)
