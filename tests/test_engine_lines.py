"""An engine command's output lines (`Deadline.lines`): read a chunk at a time, split as
readline would, a line past the limit refused, the call's time limit kept."""

from __future__ import annotations

import asyncio

import pytest

from hbtui.engine.runner import Deadline, LocalStream, RunTimeout


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
    with pytest.raises(ValueError, match="longer than 32 bytes"):
        asyncio.run(collect(data, limit=32))


def test_a_local_stream_keeps_its_time_limit_and_strips_line_ends() -> None:
    async def run(argv: list[str], timeout: float) -> list[str]:
        return [line async for line in LocalStream(argv, timeout)]

    assert asyncio.run(run(["printf", "a\\r\\nb\\nc"], 30)) == ["a", "b", "c"]
    with pytest.raises(RunTimeout):
        asyncio.run(run(["sh", "-c", "echo one; exec sleep 60"], 0.5))
