"""Packs a killed hbtui left in this machine's bases folder, removed by the next run.

Two kinds of folder live there beside the bases' own: a base build's
(`IDENT-STAMP-PID`) before its manifest is written, and a remake's
(`.remake-NAME-PID-NS`). Once its process is gone, a folder that no manifest and no
remake journal entry names holds nothing a box needs: a build that never finished,
or a box's disk packed before its machine was touched. A base whose manifest is damaged
keeps its folders: the pack may be all that is left of it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from hbtui.core.boxes.remakes import RemakeJournal
from hbtui.core.foundation.basebook import BaseBook
from hbtui.environment import pid_alive
from hbtui.names import LOCAL

_FOLDER = re.compile(r"^(?:\.remake-.+-(\d+)-\d+|.+-\d{8}T\d{6}Z-(\d+))$")


def sweep(bases_dir: Path, bases: BaseBook, remakes: RemakeJournal) -> list[Path]:
    """Remove the folders of dead processes that nothing names; returns them."""
    try:
        entries = [p for p in bases_dir.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
    candidates = []
    for entry in entries:
        owner = _FOLDER.match(entry.name)
        if owner is not None and not pid_alive(int(owner.group(1) or owner.group(2))):
            candidates.append(entry)
    if not candidates:
        return []
    named = remakes.folders() | {b.folder for b in bases.manifests(LOCAL)}
    # A manifest that cannot be read names no folder: its base's packs are kept all the same.
    kept = tuple(f"{path.stem}-" for path in bases.damaged(LOCAL))
    removed = [p for p in candidates if str(p) not in named and not p.name.startswith(kept)]
    for folder in removed:
        shutil.rmtree(folder, ignore_errors=True)
    return removed
