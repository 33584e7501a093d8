"""What the benchmarks share: progress on stderr, and the installed `hbtui` they time."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def hbtui_bin() -> str:
    beside = Path(sys.executable).parent / "hbtui"
    found = str(beside) if beside.exists() else shutil.which("hbtui")
    if not found:
        raise SystemExit("hbtui is not installed: pip install -e .")
    return found
