"""Child processes of the archive layer: a secret-free environment, tool lookup."""

from __future__ import annotations

import os
import shutil

from hbtui.archive.errors import ToolMissing

# The same names hbtui.engine.runner strips; the archive layer does not import the engine.
SECRET_ENV = ("HBTUI_PASSPHRASE", "BOX_PASSPHRASE")


def child_env() -> dict[str, str]:
    """Our environment minus any secret, for every child we spawn."""
    return {k: v for k, v in os.environ.items() if k not in SECRET_ENV}


def need(tool: str, why: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissing(f"{tool} is not installed on this host ({why})")
    return path


def last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"
