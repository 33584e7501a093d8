"""What a box says while it is saved, checked: the parts it announces and hands over.

The save script runs in the box, and root there can replace any tool it calls (`tar`,
`split`), so each announcement is a claim. A part is taken only under the name split
gives it next, no larger than the part size, and only as many as the box could fill:
its disks and its memory (a tmpfs under /data), twice over for tar's headers. Its copy
is watched as it is made and ended once it passes the size announced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from pathlib import Path

from hbtui import boxtext
from hbtui.core.foundation.hosts import Host
from hbtui.engine import Machine
from hbtui.errors import HbtuiError
from hbtui.present import human_bytes

SAVE_DIR = "/root/.hbtui-save"
PART_TAG = "::hbtui-part::"
READ_TAG = "::hbtui-read::"
ENGINE_DISKS_GIB = (20, 10)  # the engine's storage and overlay disks when a box sets none
MEMORY_MIB = 8192  # the engine's memory when the listing says none
HEADROOM = 2  # times what the box can hold: tar's headers, zstd's frames
WATCH_SECONDS = 0.02  # between looks at a copy in progress

_NUMBER = re.compile(r"[0-9]{1,20}")


class SaveFailed(HbtuiError):
    pass


def most_bytes(machine: Machine | None) -> int:
    """The most compressed bytes a save of the box can need (see the module's text)."""
    storage, overlay = ENGINE_DISKS_GIB
    memory = MEMORY_MIB
    if machine is not None:
        storage = machine.storage_gb if machine.storage_gb and machine.storage_gb > 0 else storage
        overlay = machine.overlay_gb if machine.overlay_gb and machine.overlay_gb > 0 else overlay
        memory = machine.memory_mib if machine.memory_mib and machine.memory_mib > 0 else memory
    return HEADROOM * ((storage + overlay) * 2**30 + memory * 2**20)


def shown(line: str) -> str:
    """A line of the box's as an error may quote it: plain, one line, short."""
    flat = boxtext.line(line).strip()
    return flat if len(flat) <= 80 else flat[:79] + "…"


class Announcements:
    """The parts a box announces, each checked before it is copied."""

    def __init__(self, part_bytes: int, most: int) -> None:
        self.part_bytes = part_bytes
        self.most_parts = max(1, -(-most // part_bytes))
        self.count = 0

    def part(self, line: str) -> tuple[str, int]:
        """The guest path and size of the next part, from its announcement."""
        words = line.split()
        if len(words) != 3 or words[0] != PART_TAG or not _NUMBER.fullmatch(words[2]):
            raise SaveFailed(
                f"the box announced a part in a form hbtui does not know: {shown(line)!r}"
            )
        path, size = words[1], int(words[2])
        expected = f"{SAVE_DIR}/part-{self.count:06d}"
        if path != expected:
            raise SaveFailed(
                f"the box announced the part {shown(path)!r} where {expected} was next"
            )
        if not 0 < size <= self.part_bytes:
            raise SaveFailed(
                f"the box announced a part of {size:,} bytes; a part is 1 to "
                f"{self.part_bytes:,} bytes ([archive] part_size_mib)"
            )
        if self.count >= self.most_parts:
            raise SaveFailed(
                f"the box announced more than {self.most_parts:,} parts, more than its /data "
                f"can fill ({human_bytes(self.most_parts * self.part_bytes)})"
            )
        self.count += 1
        return path, size


def read_number(line: str) -> tuple[str, int] | None:
    """A progress line's word and number (`total N`, or `N` records), or None."""
    words = line.split(READ_TAG, 1)[1].split()
    if words[:1] == ["total"] and len(words) == 2 and _NUMBER.fullmatch(words[1]):
        return "total", int(words[1])
    if len(words) == 1 and _NUMBER.fullmatch(words[0]):
        return "records", int(words[0])
    return None


async def copy_part(host: Host, name: str, guest: str, local: Path, size: int) -> None:
    """`machine cp` of one announced part into `local` (alone in its folder), ended once
    the folder holds more than `size` bytes; then it must hold exactly `size`."""
    copying = asyncio.ensure_future(host.engine.cp_out(name, guest, local))
    try:
        while not copying.done():
            await asyncio.wait([copying], timeout=WATCH_SECONDS)
            if not copying.done() and _held(local.parent) > size:
                raise SaveFailed(_grew(guest, size))
        copying.result()
    finally:
        copying.cancel()
        await asyncio.wait([copying])
        if not copying.cancelled():
            copying.exception()  # retrieved: raised above, or replaced by the refusal
    got = local.stat().st_size
    if got != size:
        raise SaveFailed(_grew(guest, size) if got > size else f"the box's part {guest} "
                         f"was announced as {size:,} bytes and is {got:,}")  # fmt: skip


def _grew(guest: str, size: int) -> str:
    return f"the box's part {guest} grew past the {size:,} bytes it announced: copy ended"


def _held(folder: Path) -> int:
    """The bytes of the files in `folder` (a copy writes beside its target first)."""
    total = 0
    with os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                total += entry.stat(follow_symlinks=False).st_size
    return total
