"""tests/ mirrors the package and tests/README.md says where everything is: every folder and
loose file is named there with its job, every test module sits in a folder it maps, run modes
are markers (no `_sim` or `_boot` in a name), no module name is used twice, and no test's
docstring cites an issue number."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
README = (TESTS / "README.md").read_text()
NAMED = set(re.findall(r"`([^`\s]+)`", README))
NOT_TESTS = {"sim", "recipes", "bench"}  # what they hold is theirs, not test modules
SKIP = {"__pycache__", "__snapshots__"}


def shown(path: Path) -> str:
    relative = path.relative_to(TESTS).as_posix()
    return relative + "/" if path.is_dir() else relative


def modules() -> list[Path]:
    return [
        path
        for path in sorted(TESTS.rglob("test_*.py"))
        if path.relative_to(TESTS).parts[0] not in NOT_TESTS
    ]


def test_every_loose_file_and_folder_is_named_in_the_readme() -> None:
    loose = [p for p in TESTS.iterdir() if p.name not in SKIP and not p.name.startswith(".")]
    assert [shown(p) for p in loose if shown(p) not in NAMED] == []


def test_every_test_folder_is_named_in_the_readme() -> None:
    folders = {
        path
        for top in TESTS.iterdir()
        if top.is_dir() and top.name not in NOT_TESTS | SKIP | {"support"}
        for path in [top, *top.rglob("*")]
        if path.is_dir() and not SKIP & set(path.relative_to(TESTS).parts)
    }
    assert sorted(shown(p) for p in folders if shown(p) not in NAMED) == []


def test_every_test_module_is_in_a_folder_the_readme_maps() -> None:
    assert [shown(p) for p in modules() if shown(p.parent) not in NAMED] == []


def test_every_helper_is_named_in_the_readme() -> None:
    helpers = sorted((TESTS / "support").glob("*.py"))
    assert [shown(p) for p in helpers if shown(p) not in NAMED] == []


def test_few_files_are_loose() -> None:
    assert len([p for p in TESTS.iterdir() if p.is_file()]) <= 6


def test_run_modes_are_markers_not_names() -> None:
    suffixed = [shown(p) for p in modules() if re.search(r"_(sim|boot)$", p.stem)]
    assert suffixed == []


def test_no_two_test_modules_share_a_name() -> None:
    names = [p.name for p in modules()]
    assert sorted({name for name in names if names.count(name) > 1}) == []


def test_no_test_docstring_cites_an_issue() -> None:
    citing = []
    for path in modules() + sorted((TESTS / "support").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node) or ""
                if re.search(r"\bissues? #?\d", doc, re.IGNORECASE):
                    citing.append(f"{shown(path)}:{getattr(node, 'lineno', 1)}")
    assert citing == []
