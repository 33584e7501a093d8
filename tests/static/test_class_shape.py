"""Compose, don't stack: no class of hbtui's has more than two of hbtui's classes among its
ancestors, or more than one of them as a base. Exceptions, Protocols, Enums, NamedTuples
and TypedDicts are left aside (their bases say what they are, not what they do). Read from
the source (AST), so a class is found wherever it is defined and however it is imported."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from support import ROOT

MOST_ANCESTORS = 2
MOST_BASES = 1
# Bases that make a class one of the kinds left aside (by the name the class is built on).
KINDS = {"Protocol", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "NamedTuple", "TypedDict"}
EXCEPTIONS = ("BaseException", "Exception", "Error")  # how an exception class's name ends


@dataclass
class Module:
    name: str
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    imported: dict[str, str] = field(default_factory=dict)  # local name -> dotted origin


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def read_modules(root: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted((root / "hbtui").rglob("*.py")):
        name = module_name(path, root)
        module = modules[name] = Module(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                module.classes.setdefault(node.name, node)
            elif isinstance(node, ast.ImportFrom):
                origin = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    origin = ".".join([*up, *([origin] if origin else [])])
                for alias in node.names:
                    module.imported[alias.asname or alias.name] = f"{origin}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    module.imported[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0]
                    )
    return modules


def dotted(node: ast.expr) -> str:
    """`Screen[None]` -> "Screen", `widgets.Static` -> "widgets.Static"; "" for others."""
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    if isinstance(node, ast.Attribute):
        left = dotted(node.value)
        return f"{left}.{node.attr}" if left else ""
    return node.id if isinstance(node, ast.Name) else ""


class Classes:
    """Every class of hbtui by its full name, and its bases resolved to full names."""

    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules
        self.bases: dict[str, list[str]] = {}
        for module in modules.values():
            for name, node in module.classes.items():
                full = f"{module.name}.{name}"
                self.bases[full] = [self.resolve(module, dotted(b)) for b in node.bases]

    def resolve(self, module: Module, name: str, seen: int = 0) -> str:
        """A name as written in `module`, followed through imports and re-exports."""
        head, _, rest = name.partition(".")
        if head in module.classes and not rest:
            return f"{module.name}.{head}"
        origin = module.imported.get(head)
        if origin is None:
            return name  # a builtin, or a name this check does not follow
        full = f"{origin}.{rest}" if rest else origin
        owner, _, last = full.rpartition(".")
        if seen < 10 and owner in self.modules and full not in self.bases:
            return self.resolve(self.modules[owner], last, seen + 1)
        return full

    def ancestors(self, name: str) -> set[str]:
        found: set[str] = set()
        todo = list(self.bases.get(name, []))
        while todo:
            base = todo.pop()
            if base not in found:
                found.add(base)
                todo += self.bases.get(base, [])
        return found

    def set_aside(self, name: str) -> bool:
        """An exception, Protocol, Enum, NamedTuple or TypedDict (by what it is built on)."""
        last_words = {b.rpartition(".")[2] for b in self.ancestors(name)}
        return bool(last_words & KINDS) or any(w.endswith(EXCEPTIONS) for w in last_words)

    def project(self, names: set[str] | list[str]) -> list[str]:
        return sorted(n for n in names if n in self.bases)


def stacked(root: Path = ROOT) -> dict[str, str]:
    """Every class over the limits, with what it stands on."""
    classes = Classes(read_modules(root))
    found = {}
    for name in classes.bases:
        if classes.set_aside(name):
            continue
        ancestors = classes.project(classes.ancestors(name))
        bases = classes.project(classes.bases[name])
        if len(ancestors) > MOST_ANCESTORS or len(bases) > MOST_BASES:
            found[name] = f"bases {bases}, ancestors {ancestors}"
    return found


def test_no_class_is_stacked():
    over = stacked()
    assert not over, "compose these instead of stacking them:\n" + "\n".join(
        f"  {name}: {why}" for name, why in sorted(over.items())
    )


def test_the_check_sees_a_tower_and_the_kinds_it_leaves_aside(tmp_path):
    """The check itself: a three-storey tower and a class on two bases are found; an
    exception tower, a Protocol's implementation, and classes over outside ones are not."""
    package = tmp_path / "hbtui"
    package.mkdir()
    (package / "__init__.py").write_text("from hbtui.a import First as First\n")
    (package / "a.py").write_text(
        "class Ground: ...\nclass First(Ground): ...\nclass Side: ...\n"
        "class Oops(Exception): ...\nclass Worse(Oops): ...\nclass Worst(Worse): ...\n"
    )
    (package / "b.py").write_text(
        "from typing import Protocol\nfrom textual.screen import Screen\n"
        "from hbtui import First\nfrom hbtui.a import Side, Worst\nfrom . import a\n"
        "class Second(First): ...\nclass Third(Second): ...\nclass Both(a.First, Side): ...\n"
        "class Worst2(Worst): ...\nclass Door(Protocol): ...\nclass Shaped(Door): ...\n"
        "class Page(Screen[None]): ...\nclass Subpage(Page): ...\nclass Leaf(Subpage): ...\n"
    )
    assert set(stacked(tmp_path)) == {"hbtui.b.Third", "hbtui.b.Both"}
