"""Where plaintext in flight lives, and how it is cleaned up after any exit.

Parts of a box's /data copied out for encryption (save), decrypted for the
guest (load), and recipe tarballs live in one private (0700) folder under
hbtui's state home, one subfolder per operation named with its pid. Every
exit path of the operation removes its subfolder; a SIGKILL or a power cut
cannot, so each hbtui run first sweeps subfolders whose process is gone.
`extract` stages its plaintext beside the destination (to rename it into
place) and `save` writes its archive beside its destination under a temporary
name; each leaves a note here while it runs, and the sweep removes what such a
note names too if its process died.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from hbtui.environment import pid_alive
from hbtui.paths import Paths, UnreadableFile, make_folder, read_state
from hbtui.statefile import temp_prefix

_OWNED = re.compile(r"^([a-z]+)-(\d+)-")  # "<purpose>-<pid>-<random>"
NOTE_SUFFIX = ".staging"


def root(paths: Paths) -> Path:
    return paths.data_dir / "scratch"


@contextlib.contextmanager
def scratch(paths: Paths, purpose: str) -> Iterator[Path]:
    """A private folder for one operation's plaintext, removed however the block ends."""
    top = make_folder(root(paths))
    os.chmod(top, 0o700)
    folder = Path(tempfile.mkdtemp(prefix=f"{purpose}-{os.getpid()}-", dir=top))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def staging_glob(dest: Path, purpose: str = "extract", pid: int = 0) -> str:
    """The names `extract` stages `dest` under, beside it (see hbtui.archive.safetar), or
    those a `save` by `pid` writes it under (see hbtui.statefile.atomic_output)."""
    if purpose == "save":
        return f"{temp_prefix(dest, pid)}*.part"
    return f".{dest.name}.extract-*"


@contextlib.contextmanager
def staged_beside(paths: Paths, dest: Path, purpose: str = "extract") -> Iterator[None]:
    """Note, while the block runs, that `dest` is being made beside it (by `purpose`:
    extract or save), so that what a SIGKILL leaves there is swept by the next run."""
    top = make_folder(root(paths))
    fd, note = tempfile.mkstemp(prefix=f"{purpose}-{os.getpid()}-", suffix=NOTE_SUFFIX, dir=top)
    try:
        os.write(fd, os.fsencode(dest))
        os.close(fd)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(note)


def sweep(paths: Paths) -> list[Path]:
    """Remove what dead hbtui processes left; returns what was removed."""
    top = root(paths)
    try:
        entries = list(os.scandir(top))
    except OSError:
        return []
    removed: list[Path] = []
    for entry in entries:
        owner = _OWNED.match(entry.name)
        if owner is None or pid_alive(int(owner.group(2))):
            continue
        if entry.name.endswith(NOTE_SUFFIX):
            purpose, pid = owner.group(1), int(owner.group(2))
            with contextlib.suppress(OSError, UnreadableFile):
                dest = Path(os.fsdecode(read_state(entry.path, 4096) or b""))
                for staged in dest.parent.glob(staging_glob(dest, purpose, pid)):
                    if staged.is_dir() and not staged.is_symlink():
                        shutil.rmtree(staged, ignore_errors=True)
                    else:
                        staged.unlink(missing_ok=True)
                    removed.append(staged)
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        else:
            shutil.rmtree(entry.path, ignore_errors=True)
        removed.append(Path(entry.path))
    return removed
