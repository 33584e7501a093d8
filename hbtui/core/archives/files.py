"""Archives as files: what kind a file is, what its header says, verify and extract (no
box, no VM). Moving a box's /data into one and back: hbtui.core.archives.save and
hbtui.core.archives.load.

The passphrase stays in this process: it never reaches argv, a log, or a
child's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui import boxtext
from hbtui.core.foundation.scratch import staged_beside
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import Notice, Phase, Report, Transfer, ignore
from hbtui.paths import Paths, kind_of

if TYPE_CHECKING:
    from hbtui.archive.tarpolicy import TarSummary

ARCHIVE_SUFFIX = ".hbx"


HBX = "hbx"  # our format
LEGACY = "legacy"  # the old tool's *.tar.gz.gpg


def check_writable_beside(target: Path) -> None:
    """Make and drop a temporary file where the archive's will be: a read-only disk, a
    name too long for its temporary form, a /proc path fail here, in a line."""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(tmp)


async def verify(archive: Path, *, passphrase: bytes, report: Report = ignore) -> int:
    """Authenticate every chunk of an .hbx archive without writing plaintext."""
    from hbtui.archive.files import verify_file

    archive = Path(archive).expanduser().absolute()
    if archive_kind(archive) != HBX:
        raise UsageError(
            f"{archive}: verify checks .hbx archives; extract an old backup to check it"
        )
    size = archive.stat().st_size
    progress = progress_from_thread(report, size, "verifying")

    # The work starts first: rendering the first event may take a while (a front
    # end loading its progress display), and the KDF in the thread overlaps that.
    work = asyncio.ensure_future(asyncio.to_thread(verify_file, archive, passphrase, progress))
    report(Phase(f"verifying {archive.name}"))
    return await work


# -- kind, contents, extract ----------------------------------------------------------


PROGRESS_STEPS = 500  # Transfer events per pass at most: smooth to a reader, cheap to render


def progress_from_thread(report: Report, total: int, label: str) -> Callable[[int], None]:
    """A byte-progress callback for a worker thread: it reports on the event loop's
    thread, and only every 1/PROGRESS_STEPS of `total` (and at the end)."""
    loop = asyncio.get_running_loop()
    step = max(total // PROGRESS_STEPS, 1)
    last = [-step]

    def progress(done: int) -> None:
        if done - last[0] >= step or done >= total:
            last[0] = done
            loop.call_soon_threadsafe(report, Transfer(done, total, label))

    return progress


def archive_kind(archive: Path) -> str:
    """HBX or LEGACY; anything else (or no file) is a one-line error."""
    from hbtui.archive.legacy import is_legacy
    from hbtui.archive.stream import is_hbx

    if not os.path.lexists(archive):
        raise UsageError(f"no such archive: {archive}")
    try:
        mode = os.stat(archive).st_mode
    except OSError as exc:  # a symlink loop, or a link to nothing
        why = (exc.strerror or str(exc)).lower()
        raise UsageError(f"{archive} cannot be opened ({why}), so not an archive") from None
    if not stat.S_ISREG(mode):
        raise UsageError(f"{archive} is {kind_of(mode)}, not a file, so not an archive")
    if is_hbx(archive):
        return HBX
    if is_legacy(archive):
        return LEGACY
    raise UsageError(f"{archive} is neither an hbtui archive (.hbx) nor an old *.tar.gz.gpg backup")


def check_contents(
    archive: Path, kind: str, passphrase: bytes, progress: Callable[[int], None]
) -> bytes | None:
    """Every entry checked, writing nothing; the host's note the archive carries, if any
    (an old gpg backup has none)."""
    from hbtui.archive import note
    from hbtui.archive.hbxtar import validate_hbx
    from hbtui.archive.legacy import validate_legacy

    # Links to absolute paths (a venv's python -> /usr/bin/python3) are normal in a
    # box and resolve inside the guest; nothing is ever written through a link.
    if kind != HBX:
        validate_legacy(archive, passphrase, allow_external_symlinks=True)
        return None
    head = bytearray()
    validate_hbx(archive, passphrase, progress=progress, allow_external_symlinks=True, head=head)
    return note.read(head)


async def extract(  # noqa: C901 (named in pyproject.toml)
    paths: Paths,
    archive: Path,
    dest: Path | None = None,
    *,
    passphrase: bytes,
    report: Report = ignore,
) -> Path:
    """Files only, no VM: unpack into DEST, which appears only if all verified."""
    from hbtui.archive.hbxtar import extract_hbx
    from hbtui.archive.legacy import extract_legacy

    archive = Path(archive).expanduser().absolute()
    kind = archive_kind(archive)
    if dest is None:
        base = archive.name
        for suffix in (ARCHIVE_SUFFIX, ".gpg", ".gz", ".tar"):
            base = base.removesuffix(suffix)
        dest = archive.with_name(f"{base}-extracted")
    dest = Path(dest).expanduser().absolute()
    if os.path.lexists(dest):
        raise UsageError(f"{dest} already exists; extract needs a new folder")
    if os.path.lexists(dest.parent) and not dest.parent.is_dir():
        raise UsageError(f"{dest.parent} is not a folder")
    if not dest.parent.is_dir():
        raise UsageError(f"folder {dest.parent} does not exist")
    size = archive.stat().st_size
    stop = threading.Event()
    forward = progress_from_thread(report, size, "extracting")

    def progress(done: int) -> None:
        if stop.is_set():
            raise Cancelled("extract cancelled")  # unwinds the extractor, which cleans up
        forward(done)

    def work() -> TarSummary:
        # A link leading outside the folder (a venv's python -> /usr/bin/python3) is the
        # box's, meaningless here and a way out of the folder: left out, and named.
        if kind == HBX:
            return extract_hbx(
                archive, dest, passphrase, progress=progress, leave_out_external=True
            )
        return extract_legacy(archive, dest, passphrase, leave_out_external=True)

    report(Phase(f"extracting {archive.name} into {dest}"))
    with staged_beside(paths, dest):  # a SIGKILL leaves staged plaintext: the next run sweeps it
        running = asyncio.ensure_future(asyncio.to_thread(work))
        try:
            summary = await asyncio.shield(running)
        except asyncio.CancelledError:
            # The thread cannot be killed: stop it at its next chunk, wait for it, and
            # remove the folder if it got as far as renaming it into place.
            stop.set()
            with contextlib.suppress(Exception):
                await running
            if os.path.lexists(dest):
                shutil.rmtree(dest, ignore_errors=True)
            raise
        except OSError as exc:
            if exc.filename is not None:
                raise
            raise HbtuiError(f"extracting into {dest}: {exc.strerror or exc}") from None
    if summary.left_out:
        report(Notice(left_out_notice(summary.left_out)))
    if summary.odd_times:
        report(Notice(odd_times_notice(summary.odd_times, summary.first_odd_time)))
    return dest


LEFT_OUT_NAMED = 3  # links named in the notice; the rest counted


def left_out_notice(links: list[tuple[str, str]]) -> str:
    """The links an extract left out, in one line (the archive's names: made safe)."""
    named = ", ".join(
        f"{boxtext.line(path)} -> {boxtext.line(target)}" for path, target in links[:LEFT_OUT_NAMED]
    )
    more = f" and {len(links) - LEFT_OUT_NAMED} more" if len(links) > LEFT_OUT_NAMED else ""
    return (
        f"left out {len(links)} symbolic link(s) leading outside the folder "
        f"(they point into the box's own system): {named}{more}"
    )


def odd_times_notice(count: int, first: str) -> str:
    """The entries whose time an extract could not keep, in one line."""
    which = boxtext.line(first) if count == 1 else f"{count} entries, like {boxtext.line(first)},"
    return (
        f"{which} had a time out of range or not a number: set to the nearest date "
        "hbtui can set (the years 1 to 9999; not a number: 1970)"
    )


# -- info ------------------------------------------------------------------------------


def payload_size(archive: Path) -> int | None:
    from hbtui.archive.stream import read_header

    return read_header(archive).plaintext_size


def archive_info(archive: Path) -> dict[str, object]:
    """An .hbx archive's header, readable without the passphrase."""
    from hbtui.archive.stream import read_header

    archive = Path(archive).expanduser().absolute()
    if archive_kind(archive) != HBX:
        raise UsageError(f"{archive} is an old gpg backup; it has no hbtui header")
    info = read_header(archive)
    return {
        "format_version": info.version,
        "aead": info.aead,
        "kdf": info.kdf_name,
        "kdf_params": info.kdf.describe(),
        "chunk_size": info.chunk_size,
        "archive_size": info.archive_size,
        "payload_size": info.plaintext_size,
        "kdf_warning": info.kdf_warning,
    }
