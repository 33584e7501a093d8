"""An engine command's output lines (`Deadline.lines`): read a chunk at a time, split as
readline would, a line past the limit refused (after the lines before it), a long line
in small pieces read once, the call's time limit kept."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from hbtui.engine import EngineLineTooLong, EngineStream
from hbtui.engine.runner import Deadline, LineTooLong, LocalStream, RunTimeout


async def collect(data: list[bytes], *, limit: int = 1 << 20, size: int = 7) -> list[bytes]:
    """The lines of a stream fed `data` piece by piece (a small read size: lines cross
    chunk boundaries)."""
    stream = asyncio.StreamReader()
    for piece in data:
        stream.feed_data(piece)
    stream.feed_eof()
    deadline = Deadline(["x"], 10)
    real_read = deadline.read

    async def small_reads(s, n=size):
        return await real_read(s, n)

    deadline.read = small_reads  # type: ignore[method-assign]
    return [line async for line in deadline.lines(stream, limit)]


def test_lines_split_as_readline_would_across_chunks() -> None:
    data = [b"first line\nsec", b"ond\r\n\n", b"a much longer third line here\nlast"]
    lines = asyncio.run(collect(data))
    assert lines == [b"first line", b"second\r", b"", b"a much longer third line here", b"last"]


def test_no_output_is_no_lines() -> None:
    assert asyncio.run(collect([])) == []


@pytest.mark.parametrize("data", [[b"x" * 40], [b"ok\n", b"y" * 40 + b"\nz\n"]])
def test_a_line_past_the_limit_is_refused(data: list[bytes]) -> None:
    with pytest.raises(LineTooLong, match="longer than 32 bytes"):
        asyncio.run(collect(data, limit=32))


def test_the_lines_before_a_line_past_the_limit_come_first() -> None:
    seen: list[bytes] = []

    async def read() -> None:
        stream = asyncio.StreamReader()
        stream.feed_data(b"one\ntwo\n" + b"y" * 40 + b"\nthree\n")
        stream.feed_eof()
        async for line in Deadline(["x"], 10).lines(stream, 32):
            seen.append(line)

    with pytest.raises(LineTooLong):
        asyncio.run(read())
    assert seen == [b"one", b"two"]


def test_a_long_line_in_small_pieces_is_read_once() -> None:
    """Each piece of an unfinished line was copied and searched with all before it: a
    1 MiB progress line (CRs, no newline) in 80-byte reads took 7.7 s of CPU."""
    pieces = [b"p" * 79 + b"\r"] * 50_000  # 4 MB

    began = time.thread_time()
    lines = asyncio.run(collect([*pieces, b"\nend\n"], limit=8 << 20, size=80))
    assert lines == [b"".join(pieces), b"end"]
    assert time.thread_time() - began < 2.0  # linear: a fraction of that; quadratic: minutes


def test_an_engine_line_past_the_limit_is_one_error_not_a_traceback() -> None:
    argv = [sys.executable, "-c", "print('ok'); print('x' * ((1 << 20) + 1)); print('after')"]

    async def run() -> list[str]:
        return [line async for line in EngineStream(LocalStream(argv, 30), argv)]

    with pytest.raises(EngineLineTooLong, match="longer than 1048576 bytes"):
        asyncio.run(run())


def test_a_local_stream_keeps_its_time_limit_and_strips_line_ends() -> None:
    async def run(argv: list[str], timeout: float) -> list[str]:
        return [line async for line in LocalStream(argv, timeout)]

    assert asyncio.run(run(["printf", "a\\r\\nb\\nc"], 30)) == ["a", "b", "c"]
    with pytest.raises(RunTimeout):
        asyncio.run(run(["sh", "-c", "echo one; exec sleep 60"], 0.5))
