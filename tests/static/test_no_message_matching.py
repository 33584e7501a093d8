"""No front end decodes the core's words: what the dashboard and the CLI act on travels
as data (`Reserved`, `Phase.stage`, `BoxView.busy`, `MachineState`), so rewording a core
message changes nothing but the text people read.

The check reads the front ends' source: any `.startswith`/`.endswith`, `in`, `==` or
`!=` between a string and the text of an event or a view (`message`, `text`, `busy`,
`phase`, `error`, `why`, `hint`) fails, naming the file and line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import hbtui

FRONT_ENDS = ("tui", "cli")
# The attributes that carry the core's words: Phase/Notice.message, LogLine.text,
# BoxView.busy/error, Activity.phase, NewPlan.why/hint, HbtuiError.message/hint.
TEXT = {"message", "text", "busy", "phase", "error", "why", "hint"}


def _carries_text(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr in TEXT


def _is_words(node: ast.expr) -> bool:
    """A string literal, or a tuple of them (as startswith takes)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Tuple):
        return bool(node.elts) and all(_is_words(e) for e in node.elts)
    return isinstance(node, ast.Name) and node.id.isupper()  # a table of phrases


def matches_of_core_text(source: str) -> list[int]:
    """Line numbers where `source` matches words against the text of an event or view."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("startswith", "endswith")
            and _carries_text(node.func.value)
        ):
            found.append(node.lineno)
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            ops = (ast.In, ast.NotIn, ast.Eq, ast.NotEq)
            if (
                any(isinstance(op, ops) for op in node.ops)
                and any(_carries_text(s) for s in sides)
                and any(_is_words(s) for s in sides)
            ):
                found.append(node.lineno)
    return sorted(found)


def front_end_files() -> list[Path]:
    root = Path(hbtui.__file__).parent
    return sorted(p for part in FRONT_ENDS for p in (root / part).rglob("*.py"))


@pytest.mark.parametrize("path", front_end_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_front_end_does_not_match_core_message_text(path: Path) -> None:
    lines = matches_of_core_text(path.read_text())
    assert not lines, f"{path} matches the core's words at line(s) {lines}: key on data"


@pytest.mark.parametrize(
    "code",
    [
        'ok = event.message.startswith(("creating machine ", "branching "))',
        'ok = view.busy.startswith("quiesced")',
        'ok = "loaded " in phase.message',
        'ok = event.message == "done"',
        "ok = event.message.startswith(MADE_PHASES)",
        'ok = activity.phase != "provisioning"',
    ],
)
def test_the_check_catches_what_the_dashboard_used_to_do(code: str) -> None:
    assert matches_of_core_text(code) == [1]


def test_the_check_lets_data_through() -> None:
    code = (
        "a = isinstance(event, Reserved)\n"
        "b = event.stage == Stage.CREATE\n"
        "c = view.busy is not None and view.busy.held\n"
        'd = word.startswith("-")\n'
    )
    assert matches_of_core_text(code) == []
