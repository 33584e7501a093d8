"""Child processes of the archive layer: finding tools, reading their errors."""

from __future__ import annotations

import shutil

from hbtui.archive.errors import ToolMissing


def need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissing(f"{tool} is not installed on this host ({why})")
    return path


def last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"
