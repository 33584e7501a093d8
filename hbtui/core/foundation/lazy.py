"""A package's names that load their module only when first used.

A feature package re-exports the value types the front ends take from it. Where one lives
in a module that loads the box operations, importing the package (or any light module of
it: the dashboard's first frame imports agents.sessions) must not load them too."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def later(package: str, names: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` for `package`: each of `names` (name -> its module) is
    imported from that module the first time it is asked for."""

    def attribute(name: str) -> object:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return attribute
