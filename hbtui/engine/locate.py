"""Finding the smolvm binary and checking its version.

Order: an explicit setting (`HBTUI_SMOLVM`, or `engine.path` in the config),
`smolvm` on PATH, then `smol/smol-vmm` inside the installed smolmachines
package, which is the plain smolvm CLI.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from hbtui.engine.errors import EngineMissing

MIN_VERSION = (1, 32, 0)  # the oldest engine our contract tests run against
_VERSION_RE = re.compile(r"smolvm\s+(\d+)\.(\d+)\.(\d+)")


@dataclass(frozen=True)
class Located:
    path: str
    source: str  # "setting", "PATH" or "smolmachines"


def bundled_engine() -> str | None:
    spec = importlib.util.find_spec("smol")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = Path(folder) / "smol-vmm"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def locate_engine(setting: str = "") -> Located:
    if setting:
        path = shutil.which(setting) if os.sep not in setting else setting
        if not path or not os.access(path, os.X_OK) or not os.path.isfile(path):
            raise EngineMissing(
                f"engine not found: {setting!r} (from HBTUI_SMOLVM or engine.path) "
                "is not an executable file",
                code="ENGINE_MISSING",
            )
        return Located(os.path.abspath(path), "setting")
    on_path = shutil.which("smolvm")
    if on_path:
        return Located(on_path, "PATH")
    bundled = bundled_engine()
    if bundled:
        return Located(bundled, "smolmachines")
    raise EngineMissing(
        "no smolvm engine found: install the smolmachines package "
        "(pip install smolmachines), put smolvm on PATH, or set HBTUI_SMOLVM",
        code="ENGINE_MISSING",
    )


def parse_version(text: str) -> tuple[int, int, int] | None:
    m = _VERSION_RE.search(text)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def format_version(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))
