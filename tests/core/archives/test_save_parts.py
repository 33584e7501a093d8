"""What a box says while it is saved (hbtui.core.archives.parts), and the start of what it
sends (hbtui.archive.hbxtar.payload_start_problem): each claim checked, each refusal
one line."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from hbtui.archive import note
from hbtui.archive.hbxtar import payload_start_problem
from hbtui.core.archives.parts import (
    SAVE_DIR,
    Announcements,
    SaveFailed,
    copy_part,
    most_bytes,
    read_number,
)
from hbtui.engine import Machine

MiB = 2**20


def part(n: int, size: int) -> str:
    return f"::hbtui-part:: {SAVE_DIR}/part-{n:06d} {size}"


def test_parts_in_split_order_within_the_part_size_are_taken() -> None:
    parts = Announcements(MiB, 3 * MiB)
    assert parts.part(part(0, MiB)) == (f"{SAVE_DIR}/part-000000", MiB)
    assert parts.part(part(1, 17)) == (f"{SAVE_DIR}/part-000001", 17)
    assert parts.count == 2


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("::hbtui-part:: onlyone", "a form hbtui does not know: '::hbtui-part:: onlyone'"),
        (f"::hbtui-part:: {SAVE_DIR}/part-000000 ٣", "a form hbtui does not know"),
        (f"::hbtui-part:: {SAVE_DIR}/part-000000 {'9' * 5000}", "a form hbtui does not know"),
        (part(0, MiB + 1), "a part of 1,048,577 bytes; a part is 1 to 1,048,576 bytes"),
        (part(0, 0), "a part of 0 bytes"),
        (part(1, 10), f"the part '{SAVE_DIR}/part-000001' where {SAVE_DIR}/part-000000 was next"),
        ("::hbtui-part:: /dev/zero 10", "'/dev/zero' where"),
        ("::hbtui-part:: \x1b]52;c;eA==\x07/x 10", "the part '/x' where"),
    ],
)
def test_an_announcement_that_breaks_a_rule_is_one_line(line: str, words: str) -> None:
    with pytest.raises(SaveFailed) as caught:
        Announcements(MiB, 100 * MiB).part(line)
    assert words in caught.value.message and "\n" not in caught.value.message
    assert "\x1b" not in caught.value.message


def test_no_more_parts_than_the_box_can_fill() -> None:
    parts = Announcements(MiB, int(2.5 * MiB))  # three parts at most
    for n in range(3):
        parts.part(part(n, MiB))
    with pytest.raises(SaveFailed, match=r"more than 3 parts, more than its /data can fill"):
        parts.part(part(3, MiB))


def test_what_a_box_can_fill_is_its_disks_and_memory_twice_over() -> None:
    sized = Machine("b1", "running", memory_mib=4096, storage_gb=5, overlay_gb=2)
    assert most_bytes(sized) == 2 * (7 * 2**30 + 4 * 2**30)
    defaults = Machine("b1", "running", memory_mib=2048)  # the engine's 20 + 10 GiB disks
    assert most_bytes(defaults) == 2 * (30 * 2**30 + 2 * 2**30)
    assert most_bytes(None) == 2 * (30 * 2**30 + 8 * 2**30)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("::hbtui-read:: total 123", ("total", 123)),
        ("tar: ::hbtui-read:: 42", ("records", 42)),
        ("::hbtui-read:: total", None),
        ("::hbtui-read:: total x", None),
        ("::hbtui-read:: ²", None),
        (f"::hbtui-read:: {'9' * 5000}", None),
        ("::hbtui-read:: 1 2", None),
    ],
)
def test_progress_lines_are_numbers_or_nothing(line: str, said: tuple[str, int] | None) -> None:
    assert read_number(line) == said


def copier(writes: int | None, chunk: int = 64 * 1024) -> tuple[SimpleNamespace, list[int]]:
    """A host whose `machine cp` writes `writes` bytes (None: without end) beside its
    target, then renames it into place, as the engine does."""
    written = [0]

    async def cp_out(name: str, guest: str, local: Path) -> None:
        beside = local.with_name(f".{local.name}.copying")
        with open(beside, "wb") as out:
            while writes is None or written[0] < writes:
                step = chunk if writes is None else min(chunk, writes - written[0])
                out.write(b"\0" * step)
                out.flush()
                written[0] += step
                await asyncio.sleep(0.001)  # a copy at some 60 MB/s
        beside.rename(local)

    return SimpleNamespace(engine=SimpleNamespace(cp_out=cp_out)), written


async def copy(host: SimpleNamespace, local: Path, size: int) -> None:
    async with asyncio.timeout(60):  # without the watch, a copy without end never ends
        await copy_part(host, "b1", f"{SAVE_DIR}/part-000000", local, size)  # type: ignore[arg-type]


def test_a_part_of_the_announced_size_is_copied(tmp_path: Path) -> None:
    host, _ = copier(300_000)
    asyncio.run(copy(host, tmp_path / "part", 300_000))
    assert (tmp_path / "part").stat().st_size == 300_000


def test_a_copy_that_grows_past_the_announced_size_is_ended(tmp_path: Path) -> None:
    host, written = copier(None)
    with pytest.raises(SaveFailed, match="grew past the 1,048,576 bytes it announced"):
        asyncio.run(copy(host, tmp_path / "part", MiB))
    assert written[0] < 16 * MiB  # ended soon after the bound, not at the end of anything


def test_a_part_smaller_than_announced_is_refused(tmp_path: Path) -> None:
    host, _ = copier(1000)
    with pytest.raises(SaveFailed, match="announced as 2,000 bytes and is 1,000"):
        asyncio.run(copy(host, tmp_path / "part", 2000))


def zstd(data: bytes, path: Path) -> Path:
    path.write_bytes(subprocess.run(["zstd", "-q", "-c"], input=data, capture_output=True).stdout)
    return path


def tar_of(*names: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("payload", "problem"),
    [
        (b"", "is empty"),
        (b"not a tar at all\n", "is not a tar"),
        (tar_of(), "does not open with the folder itself (its first entry: none)"),
        (tar_of("home"), "does not open with the folder itself (its first entry: 'home')"),
    ],
)
def test_a_payload_that_is_not_a_tar_of_a_folder_says_why(
    tmp_path: Path, payload: bytes, problem: str
) -> None:
    found = payload_start_problem(zstd(payload, tmp_path / "part"))
    assert found is not None and found.startswith(problem), found


def test_a_payload_that_is_not_zstd_says_so(tmp_path: Path) -> None:
    (tmp_path / "part").write_bytes(tar_of("./"))
    assert (payload_start_problem(tmp_path / "part") or "").startswith("is not zstd data")


def test_a_payload_opening_with_a_note_of_its_own_is_refused(tmp_path: Path) -> None:
    real = zstd(tar_of("./"), tmp_path / "real").read_bytes()
    (tmp_path / "part").write_bytes(note.frame(b'{"work": {}}') + real)
    assert "only the host's note" in (payload_start_problem(tmp_path / "part") or "")


def test_the_first_part_of_a_tar_of_a_folder_passes_even_cut_mid_frame(tmp_path: Path) -> None:
    big = tar_of("./", "home") + os.urandom(4 * MiB)
    whole = zstd(big, tmp_path / "whole").read_bytes()
    (tmp_path / "part").write_bytes(whole[: len(whole) // 2])
    assert payload_start_problem(tmp_path / "part") is None
