"""The local engine's version, asked once per binary.

Every hbtui run checks that smolvm is new enough before trusting its output; asking
(`smolvm --version`) is one more process before the first listing, which a user waits
for at every start. The answer is kept beside the state with the binary's identity
(resolved path, size, mtime, inode): a new or replaced binary differs, and is asked again.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

from hbtui.engine import Engine
from hbtui.errors import HbtuiError
from hbtui.paths import read_state
from hbtui.statefile import write_atomic

MEMO_MAX = 4096


def _identity(binary: str) -> list[object] | None:
    try:
        st = os.stat(binary)
    except OSError:
        return None  # the check below says what is wrong with it
    return [os.path.realpath(binary), st.st_size, st.st_mtime_ns, st.st_ino]


def _remembered(memo: Path, identity: list[object]) -> tuple[int, int, int] | None:
    try:
        raw = read_state(memo, MEMO_MAX)
        known = json.loads(raw) if raw else None
    except (HbtuiError, ValueError):
        return None  # unreadable or damaged: ask the engine, then write it anew
    if not isinstance(known, dict) or known.get("binary") != identity:
        return None
    version = known.get("version")
    if not (isinstance(version, list) and len(version) == 3):
        return None
    if not all(isinstance(part, int) and 0 <= part < 100_000 for part in version):
        return None
    return (version[0], version[1], version[2])


async def check_local_version(engine: Engine, memo: Path) -> None:
    """`engine.check_version()`, skipped when this very binary answered before."""
    identity = _identity(engine.binary)
    known = _remembered(memo, identity) if identity is not None else None
    if known is not None:
        engine.remember_version(known)
    version = await engine.check_version()  # too old is refused even when remembered
    if identity is not None and known is None:
        payload = {"binary": identity, "version": list(version)}
        with contextlib.suppress(OSError):  # a read-only or full state folder: ask next time
            write_atomic(memo, json.dumps(payload).encode())
