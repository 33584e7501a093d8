"""Files of the host's work tree that git ignores (a `.env`, a folder of local settings),
named with `new --repo --copy PATH`, copied into the box's clone as they are, and left
uncommitted there.

A PATH is relative to the work tree's top (an absolute one must be in it). It is refused,
in one line and before any box is made, when it does not exist, is or leads (after `..` and
symlinks) outside the work tree or into its `.git`, or names anything git does not ignore:
a tracked file is in the clone already, and an untracked one would count as the agent's
work. A PATH that is a symlink lands under its own name with what it points at; a symlink
inside a named folder is copied as a symlink, never followed, so nothing outside the work
tree is read. What is copied is bounded (`HBTUI_COPY_MAX_BYTES`, default 100 MiB): a
dependency tree belongs in the repository's setup, not here.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import last_line
from hbtui.core.foundation.hosts import Host
from hbtui.core.work import box as work_box
from hbtui.core.work.book import WorkError
from hbtui.errors import UsageError
from hbtui.events import Phase, Report

COPY_MAX_ENV = "HBTUI_COPY_MAX_BYTES"
COPY_MAX_DEFAULT = 100 << 20

# $1 the archive (readable by the agent)  $2 the clone
COPY_SCRIPT = f"""set -eu
cd "$2" 2>/dev/null || {{ echo "{work_box.TAG} noclone"; exit 3; }}
tar -x --no-same-owner -f "$1"
"""


@dataclass(frozen=True)
class Copy:
    """One named path: its place in the work tree (and the clone), what it is on the host
    (symlinks resolved, inside the work tree), and its size in bytes."""

    place: str
    source: Path
    size: int


def copy_max() -> int:
    """The most `--copy` may bring in all (`HBTUI_COPY_MAX_BYTES`, default 100 MiB)."""
    text = os.environ.get(COPY_MAX_ENV, "")
    if not text:
        return COPY_MAX_DEFAULT
    if not text.isascii() or not text.isdigit() or int(text) < 1:
        raise UsageError(f"{COPY_MAX_ENV} must be a number of bytes, not {text!r}")
    return int(text)


def _within(path: Path, top: Path) -> bool:
    return top in path.parents


def _size(source: Path) -> int:
    if not source.is_dir():
        return source.stat().st_size
    total = 0
    for folder, _, files in os.walk(source):  # symlinked folders are not walked into
        for file in files:
            each = os.lstat(os.path.join(folder, file))  # a symlink goes as one: no size
            total += each.st_size if stat.S_ISREG(each.st_mode) else 0
    return total


async def _ignored(top: Path, text: str, place: str) -> None:
    """Refuse a place git does not ignore, or holding a file it does not ignore."""
    code, out, err = await gitops.run_git(
        top, "ls-files", "-z", "-t", "--cached", "--others", "--exclude-standard", "--", place,
        check=False, env={"GIT_LITERAL_PATHSPECS": "1"},
    )  # fmt: skip
    if code != 0:
        raise UsageError(
            f"--copy {text}: git cannot say whether it ignores {place} ({last_line(err)})"
        )
    entries = [e for e in out.decode(errors="replace").split("\0") if e]
    tracked = [e[2:] for e in entries if not e.startswith("? ")]
    others = [e[2:] for e in entries if e.startswith("? ")]
    if tracked:
        what = f"{place} is" if tracked == [place] else f"{place} holds {tracked[0]}, which is"
        raise UsageError(f"--copy {text}: {what} tracked by git: it is in the clone already")
    if others:
        what = f"{place} is" if others == [place] else f"{place} holds {others[0]}, which is"
        raise UsageError(
            f"--copy {text}: {what} not ignored by git: in the box it would count as the "
            "agent's work (ignore it, or commit it)"
        )


async def _one(top: Path, real_top: Path, text: str) -> Copy:
    given = Path(text).expanduser()
    named = Path(os.path.normpath(given if given.is_absolute() else top / given))
    if not named.exists():
        raise UsageError(f"--copy {text}: {named} does not exist")
    place = named.parent.resolve() / named.name
    source = named.resolve()
    if not (_within(place, real_top) and _within(source, real_top)):
        raise UsageError(f"--copy {text}: {source} is not inside the work tree {top}")
    relative = place.relative_to(real_top)
    if ".git" in (relative.parts[0], source.relative_to(real_top).parts[0]):
        raise UsageError(f"--copy {text}: that is git's own folder, not the work tree")
    if not (source.is_file() or source.is_dir()):
        raise UsageError(f"--copy {text}: {source} is not a file or a folder")
    await _ignored(real_top, text, relative.as_posix())
    return Copy(relative.as_posix(), source, _size(source))


async def check(top: Path, paths: Sequence[str]) -> list[Copy]:
    """Each of `paths` checked (see the module's words), with what they come to in all;
    a UsageError names the first refused."""
    real_top, cap = top.resolve(), copy_max()
    copies: list[Copy] = []
    for text in dict.fromkeys(paths):
        copy = await _one(top, real_top, text)
        if copy.place not in (c.place for c in copies):
            copies.append(copy)
    if (total := sum(c.size for c in copies)) > cap:
        raise UsageError(
            f"--copy: the files named come to {total} bytes, more than {cap} ({COPY_MAX_ENV}); "
            "let the repository's .hbtui/setup.sh make what is large"
        )
    return copies


def pack(copies: Sequence[Copy], archive: Path, cap: int) -> None:
    """The copies into one tar (files, folders, symlinks as symlinks; nothing else), its
    files held to `cap` bytes in all again: they may have grown since they were checked."""
    total = 0

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        nonlocal total
        if not (info.isfile() or info.isdir() or info.issym() or info.islnk()):
            return None  # a socket, a pipe, a device: not a file to work with
        total += info.size if info.isfile() else 0
        if total > cap:
            raise WorkError(f"the files --copy named grew past {cap} bytes ({COPY_MAX_ENV})")
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    with tarfile.open(archive, "w") as tar:
        for copy in copies:
            tar.add(copy.source, arcname=copy.place, filter=keep)


async def put(
    host: Host, name: str, clone: str, top: Path, paths: Sequence[str], folder: Path,
    guest_tmp: str, report: Report,
) -> None:  # fmt: skip
    """The named files into the box's clone, as its agent (checked again: the dashboard's
    request may not have been, and the tree may have changed since)."""
    copies = await check(top, paths)
    report(Phase(f"copying {', '.join(c.place for c in copies)} into {name}'s clone"))
    archive = folder / "copy.tar"
    pack(copies, archive, copy_max())
    guest = f"{guest_tmp}/copy.tar"
    await host.engine.cp_in(name, archive, guest, mode="0644")
    answer = await work_box.run_step(host, name, COPY_SCRIPT, [guest, clone], cap=64 * 1024)
    if answer.returncode != 0:
        raise WorkError(f"copying the named files into box {name} failed: {answer.why()}")
