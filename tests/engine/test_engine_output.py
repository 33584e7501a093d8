"""An engine call's whole output (hbtui.engine.capture): read as it comes, refused one
byte past its bound with the child ended, or only its end kept; stderr bounded too."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from hbtui.engine import Bound, Engine, EngineOutputTooLong
from hbtui.engine.capture import ERR_MAX, OutputTooLong, read_bounded
from hbtui.engine.runner import Command, LocalRunner


def fed(*pieces: bytes) -> asyncio.StreamReader:
    stream = asyncio.StreamReader()
    for piece in pieces:
        stream.feed_data(piece)
    stream.feed_eof()
    return stream


async def bounded(pieces: list[bytes], limit: int, tail: bool) -> tuple[bytes, int]:
    return await read_bounded(fed(*pieces), limit, tail=tail, which="output")


def test_output_up_to_the_bound_is_whole() -> None:
    assert asyncio.run(bounded([b"abc", b"de"], 5, False)) == (b"abcde", 0)


def test_one_byte_past_the_bound_is_refused() -> None:
    with pytest.raises(OutputTooLong, match="output went past 5 B"):
        asyncio.run(bounded([b"abc", b"def"], 5, False))


def test_a_tail_bound_keeps_the_end_and_counts_what_it_left_out() -> None:
    data, dropped = asyncio.run(bounded([b"0123", b"4567", b"89"], 5, True))
    assert (data, dropped) == (b"56789", 5)


def test_a_tail_bound_is_linear_in_the_output() -> None:
    """Trimming the kept bytes at each chunk would copy the whole bound each time."""
    pieces = [bytes([i % 256]) * 4096 for i in range(20_000)]  # 80 MB
    began = time.thread_time()
    data, dropped = asyncio.run(bounded(pieces, 8 << 20, True))
    assert len(data) == 8 << 20 and dropped == 20_000 * 4096 - (8 << 20)
    assert data[-1] == (20_000 - 1) % 256
    assert time.thread_time() - began < 5.0


def running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_command_that_prints_without_end_is_ended_at_its_bound(stream: str) -> None:
    """`yes` never ends: without a bound the call reads until its timeout, holding all."""
    marker = f"hbtui-flood-{os.getpid()}-{stream}"
    redirect = "" if stream == "stdout" else " >&2"
    argv = ["sh", "-c", f"exec yes {marker}{redirect}"]

    async def run() -> None:
        await LocalRunner().run(Command(argv, timeout=120, bound=Bound(1 << 20)))

    began = time.monotonic()
    with pytest.raises(OutputTooLong) as caught:
        asyncio.run(run())
    assert caught.value.limit == (1 << 20 if stream == "stdout" else ERR_MAX)
    assert time.monotonic() - began < 60
    assert running(marker) == []


def test_an_exec_past_its_bound_is_one_engine_error() -> None:
    """The engine stand-in prints 3 MiB for an exec bounded at 2 MiB."""
    script = "import sys; sys.stdout.write('x' * (3 << 20))"
    engine = Engine(sys.executable)
    engine.argv = lambda *args: [sys.executable, "-c", script]  # type: ignore[method-assign]

    with pytest.raises(EngineOutputTooLong) as caught:
        asyncio.run(engine.exec("b1", ["hb", "agents"], bound=Bound(2 << 20)))
    assert str(caught.value).endswith(
        "its output went past 2.0 MiB; hbtui stopped reading and ended it"
    )
    assert "\n" not in str(caught.value)


def test_a_log_past_its_bound_keeps_its_last_whole_lines_and_says_so(monkeypatch) -> None:
    from hbtui.engine import client

    monkeypatch.setattr(client, "LOGS_MAX", 1000)
    script = "import sys; sys.stdout.write(''.join(f'line {i:04}\\n' for i in range(300)))"
    engine = Engine(sys.executable)
    engine.argv = lambda *args: [sys.executable, "-c", script]  # type: ignore[method-assign]

    text = asyncio.run(engine.logs("b1"))
    note, first, *_rest, last = text.splitlines()
    assert note.startswith("… 2,010 bytes before these left out")
    assert (first, last) == ("line 0201", "line 0299")
