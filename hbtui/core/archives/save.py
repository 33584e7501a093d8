"""save: a box's /data into an encrypted archive.

Quiesce the box; in the guest `tar | zstd -T0 | split --filter` writes one part at a
time and waits until the host has taken it, so neither side ever holds more than one
part; each part is copied out with `machine cp`, fed to the encryptor and deleted on
both sides; services are resumed always. The passphrase stays in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.core.archives.files import ARCHIVE_SUFFIX, check_writable_beside, verify
from hbtui.core.archives.parts import (
    PART_TAG,
    READ_TAG,
    SAVE_DIR,
    Announcements,
    SaveFailed,
    copy_part,
    most_bytes,
    read_number,
)
from hbtui.core.boxes import guest
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.registry import utc_now
from hbtui.core.foundation.scratch import scratch, staged_beside
from hbtui.core.foundation.views import BOX, ORPHAN
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import MachineState, Notice, Phase, Report, Transfer, ignore
from hbtui.names import LOCAL
from hbtui.paths import Paths

if TYPE_CHECKING:
    from hbtui.archive.stream import Encryptor

CHECKPOINT_RECORDS = 1024  # tar records of 10 KiB between progress lines
RECORD_BYTES = 10240  # tar's record: 20 blocks of 512 (its %u counts records, not checkpoints)
PART_TIMEOUT = 600.0
ALIVE_TAG = "::hbtui-alive::"
QUIESCE_MARKER = "home/agent/.config/hermes-box/quiesced"  # relative to /data


def _save_script(part_bytes: int) -> str:
    # split runs the filter once per part, sequentially: the filter publishes
    # the part under its final name, announces it, then blocks until the host
    # deletes it. That stalls the pipe, so tar waits too.
    announce = (
        f'f=$FILE; cat > "$f.tmp" && mv "$f.tmp" "$f" && '
        f'echo "{PART_TAG} $f $(stat -c %s "$f")" && '
        'while [ -e "$f" ]; do sleep 0.05; done'
    )
    return "\n".join(
        [
            "set -euo pipefail",
            f"rm -rf {SAVE_DIR} && mkdir -m 700 {SAVE_DIR}",
            # du of a large /data is long and silent: a beat every 10 s says it runs.
            f"( while sleep 10 >/dev/null; do echo {ALIVE_TAG}; done ) & beat=$!",
            'total=$(du -sb /data | cut -f1); kill "$beat"',
            f'echo "{READ_TAG} total $total"',
            "exec 3>&1",
            # The quiesce marker save itself set is not part of the box's state.
            (
                f"tar -C /data --numeric-owner --exclude=./{QUIESCE_MARKER} "
                f"--checkpoint={CHECKPOINT_RECORDS} "
                f"--checkpoint-action=echo='{READ_TAG} %u' -cf - . 2>&3 "
                f"| zstd -T0 -q -c | split -b {part_bytes} -a 6 -d "
                f"--filter={shlex.quote(announce)} - {SAVE_DIR}/part-"
            ),
            f"rm -rf {SAVE_DIR}",
        ]
    )


def output_problem(target: Path) -> str | None:
    """What stops an archive being written at `target`, checked before anything else
    (the dashboard's Save dialog asks before it closes)."""
    if os.path.lexists(target):  # a dangling link too: nothing is written through it
        return f"{target} already exists"
    if os.path.lexists(target.parent) and not target.parent.is_dir():
        return f"{target.parent} is not a folder"
    if not target.parent.is_dir():
        return f"folder {target.parent} does not exist"
    return None


def default_archive_path(boxes: BoxCore, name: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return boxes.config.backups_dir(boxes.paths) / f"{name}-{stamp}{ARCHIVE_SUFFIX}"


async def _guest_rm(host: Host, name: str, path: str) -> None:
    with contextlib.suppress(HbtuiError):
        await host.engine.exec(name, ["rm", "-rf", "--", path], timeout=60)


async def save(  # noqa: C901 (named in pyproject.toml)
    boxes: BoxCore,
    name: str,
    host_name: str = LOCAL,
    *,
    output: Path | None = None,
    passphrase: bytes,
    note: bytes = b"{}",
    verify_after: bool = True,
    report: Report = ignore,
) -> Path:
    """`note`: the host's word about the box, written ahead of its /data
    (hbtui.archive.note; always, so a note at the start is never the box's)."""
    view = await boxes.get(name, host_name)
    host = await boxes.hosts.get(host_name)
    if view.kind not in (BOX, ORPHAN):
        raise UsageError(f"box {name!r} has no machine to save ({view.kind})")
    boxes.refuse_unprovisioned(view)
    boxes.refuse_paused(view, "save it")
    target = (output or default_archive_path(boxes, name)).expanduser().absolute()
    problem = output_problem(target)
    if problem and (output is not None or os.path.lexists(target.parent)):
        with_o = "; choose another path with -o" if os.path.lexists(target) else ""
        raise UsageError(problem + with_o)
    if not target.parent.is_dir():  # the backups folder, made on first use
        try:
            target.parent.mkdir(parents=True, mode=0o700)
        except (FileExistsError, NotADirectoryError):
            raise UsageError(
                f"the backups folder {target.parent} is (under) a file; "
                "set [archive] backups_dir to a folder"
            ) from None
    check_writable_beside(target)  # before the box is paused, not after it was packed
    part_bytes = boxes.config.archive.part_size_mib * 2**20
    was_running = view.state == MachineState.RUNNING
    if not was_running:
        report(Phase(f"starting {name} to read its /data"))
        await boxes.boot(host, name)
    try:
        parts = Announcements(part_bytes, most_bytes(await host.engine.find(name)))
        async with guest.quiesced(host, name, report) as lease:
            await _save_parts(
                host, name, target, passphrase, note, parts, lease, boxes.paths, report
            )
    except FileExistsError as exc:
        if str(target) not in (exc.filename, exc.filename2):  # not the archive's own name
            raise
        raise SaveFailed(
            f"{target} appeared while this save ran (another save to the same path?); "
            "it was left as it was and this archive was not kept"
        ) from None
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise SaveFailed(f"writing {target}: {exc.strerror or exc}") from None
    finally:
        await _guest_rm(host, name, SAVE_DIR)
        if was_running:
            await guest.resume(host, name, report)
        else:
            report(Phase(f"stopping {name} again"))
            await host.engine.stop(name)
            guest.note_quiesced(0)
    if verify_after:
        try:
            await verify(target, passphrase=passphrase, report=report)
        except asyncio.CancelledError:
            raise Cancelled(
                f"cancelled while verifying: {target} is complete but not verified; "
                f"check it with: hbtui verify {target}"
            ) from None
    await boxes.registry.update(name, host_name, last_save=utc_now())
    report(Phase(f"saved {name} to {target}"))
    return target


async def _save_parts(
    host: Host,
    name: str,
    target: Path,
    passphrase: bytes,
    note: bytes,
    parts: Announcements,
    lease: guest.Lease,
    paths: Paths,
    report: Report,
) -> None:
    report(Phase("packing /data (tar | zstd) and encrypting it part by part"))
    total_box: list[int | None] = [None]
    read = [0]

    def progress(done: int) -> None:
        report(Transfer(max(done, read[0]), total_box[0], "saving"))

    script = _save_script(parts.part_bytes)
    stream = host.engine.exec_stream(name, ["bash", "-c", script], timeout=None)
    with scratch(paths, "save") as tmp:
        local_part = tmp / "part"
        from hbtui.archive import note as notes
        from hbtui.archive.files import create_archive
        from hbtui.archive.hbxtar import payload_start_problem

        # A SIGKILL leaves the archive's temporary file beside it: the next run sweeps it.
        with staged_beside(paths, target, "save"), create_archive(target, passphrase) as enc:
            enc.feed(notes.frame(note))
            idle = guest.idle_bound()
            lines = guest.progressing(
                aiter(stream), idle, _moved_on(total_box), lambda: _silent(name, idle)
            )
            async for line in lines:
                if READ_TAG in line:  # tar prefixes its checkpoint echo with "tar: "
                    said = read_number(line)
                    if said is not None and said[0] == "total":
                        total_box[0] = said[1]
                    elif said is not None:
                        read[0] = said[1] * RECORD_BYTES
                        progress(enc.plaintext_bytes)
                elif line.startswith(PART_TAG):
                    guest_part, size = parts.part(line)
                    async with asyncio.timeout(PART_TIMEOUT):
                        await copy_part(host, name, guest_part, local_part, size)
                    if parts.count == 1:
                        problem = await asyncio.to_thread(payload_start_problem, local_part)
                        if problem:
                            raise SaveFailed(f"the stream {name} sent for its /data {problem}")
                    await asyncio.to_thread(_feed_file, enc, local_part)
                    local_part.unlink()
                    await host.engine.exec(name, ["rm", "-f", "--", guest_part], timeout=60)
                    progress(enc.plaintext_bytes)
                elif line.strip() and line.strip() != ALIVE_TAG:
                    report(Notice(f"guest: {line.strip()}"))
            if stream.returncode:
                raise SaveFailed(
                    f"packing /data in {name} failed (exit status {stream.returncode})"
                )
            if not parts.count:
                raise SaveFailed(f"{name} sent no part of its /data")
            # All of /data is read: tar's last checkpoint (or the compressed stream, for a
            # /data too small to reach one) counted less, and the bar stopped there.
            read[0] = total_box[0] or max(read[0], enc.plaintext_bytes)
            progress(read[0])
            lease.check()  # services that came back mid-save make an inconsistent archive
            await asyncio.to_thread(enc.finish)


def _moved_on(total: list[int | None]) -> Callable[[str], bool]:
    """Progress, for a save: a part, a tar checkpoint past the last, its size of /data;
    before that size, a beat of du's (for at most PART_TIMEOUT). Notices and repeats are
    not, so a box that goes silent, or drips, holds the save no longer than the idle
    bound."""
    began = time.monotonic()
    last = -1

    def moved(line: str) -> bool:
        nonlocal last
        said = read_number(line) if READ_TAG in line else None
        if said is not None and (said[0] == "total" or said[1] >= last + CHECKPOINT_RECORDS):
            last = said[1] if said[0] == "records" else last
            return True
        return line.startswith(PART_TAG) or (
            line.strip() == ALIVE_TAG
            and total[0] is None
            and time.monotonic() - began < PART_TIMEOUT
        )

    return moved


def _silent(name: str, idle: float) -> SaveFailed:
    return SaveFailed(
        f"box {name} went silent while packing its /data (nothing new in {idle:g} s): given up"
    )


def _feed_file(enc: Encryptor, path: Path) -> None:
    with open(path, "rb", buffering=0) as fh:
        enc.feed_from(fh)
