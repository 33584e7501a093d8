"""How engine commands run: on this machine, or (hbtui.remote) over SSH.

A Runner executes one argv and never blocks the event loop. Every call has a
timeout; on timeout or cancellation the child's whole process group is
killed, so no engine call outlives the operation that made it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from hbtui.engine import child
from hbtui.engine.capture import USUAL, Bound
from hbtui.environment import child_env


@dataclass(frozen=True)
class Command:
    """One command for a Runner to run: `argv`, what it reads on stdin (None: nothing),
    its time limit, the `secrets` that go into its environment only (never into argv or a
    file), and the `bound` its output is read within: past it, the command is ended
    (OutputTooLong)."""

    argv: list[str]
    input: bytes | None = None
    timeout: float | None = None
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)  # never shown
    bound: Bound = USUAL


@dataclass(frozen=True)
class Completed:
    argv: list[str]
    returncode: int
    stdout: bytes
    stderr: bytes
    dropped: int = 0  # bytes of stdout left out before what was kept (a `tail` bound)


class RunTimeout(Exception):
    def __init__(self, argv: list[str], timeout: float) -> None:
        super().__init__(f"timed out after {timeout:g}s: {shown_command(argv)}")
        self.argv = argv
        self.timeout = timeout


class LineTooLong(ValueError):
    def __init__(self, argv: list[str], limit: int) -> None:
        super().__init__(
            f"a line of its output is longer than {limit} bytes: {shown_command(argv)}"
        )
        self.argv = argv


def shown_command(argv: list[str]) -> str:
    """The whole command as a user could type it again, without the engine's global flags
    (`--error-format json`, `--state-dir DIR`) that every call carries."""
    shown: list[str] = [os.path.basename(argv[0])] if argv else []
    rest = iter(argv[1:])
    for word in rest:
        if word == "--":
            shown += [word, *rest]
        elif word in ("--error-format", "--state-dir"):
            next(rest, None)
        else:
            shown.append(word)
    return shlex.join(shown)


class Stream(Protocol):
    returncode: int | None
    stderr_tail: str

    def __aiter__(self) -> AsyncIterator[str]: ...


class Pipe(Protocol):
    """A running command's stdin and stdout as bytes, both ways at once (its stderr is
    dropped). `write` and `drain` are a StreamWriter's: drain waits while too much is
    unsent, so what the pipe holds stays bounded."""

    async def read(self, n: int, /) -> bytes: ...

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def write_eof(self) -> None: ...


PIPE_GRACE = 5.0  # seconds a piped command has to end once its pipes are closed


class Runner(Protocol):
    """Where engine commands run. `label` is "local" or the remote host's name."""

    label: str

    async def run(self, command: Command) -> Completed: ...

    def stream(self, argv: list[str], *, timeout: float | None = None) -> Stream: ...

    def pipe(self, argv: list[str]) -> AbstractAsyncContextManager[Pipe]:
        """`argv` running with its stdin and stdout piped to this process, until the block
        ends: then its pipes are closed and it is given PIPE_GRACE to end before it is
        killed. No time limit of its own: it lasts as long as its reader."""
        ...

    def interactive_argv(self, argv: list[str]) -> list[str]: ...

    def engine_path_for_upload(self, local: Path) -> AbstractAsyncContextManager[str]:
        """A path on the engine's host holding `local`'s bytes, for `machine cp` in."""
        ...

    def engine_path_for_download(self, local: Path) -> AbstractAsyncContextManager[str]:
        """A path on the engine's host that `machine cp` writes to; its bytes land
        at `local` when the block exits without error."""
        ...


CHUNK = 1 << 16  # what a stream's read asks for at once
LINE_MAX = 1 << 20  # the longest line a stream passes on


class Deadline:
    """One call's time limit, shared by every line read from its output."""

    def __init__(self, argv: list[str], timeout: float | None) -> None:
        self.argv = argv
        self.timeout = timeout
        self.at = None if timeout is None else asyncio.get_running_loop().time() + timeout

    async def read(self, stream: Any, size: int = CHUNK) -> bytes:
        remaining = None if self.at is None else self.at - asyncio.get_running_loop().time()
        if remaining is not None and remaining <= 0:
            raise RunTimeout(self.argv, self.timeout or 0)
        try:
            async with asyncio.timeout(remaining):
                data: bytes = await stream.read(size)
                return data
        except TimeoutError:
            raise RunTimeout(self.argv, self.timeout or 0) from None

    async def lines(self, stream: Any, limit: int = LINE_MAX) -> AsyncIterator[bytes]:
        """The stream's lines, without their ends, read a chunk at a time: one timer a
        chunk, not one a line (a 200,000-line diff spent 2 s of CPU in per-line reads).
        Only each new chunk is searched, so a long line arriving in small pieces costs
        its length once. A line longer than `limit` ends the stream: LineTooLong, after
        the lines before it."""
        partial = bytearray()
        while chunk := await self.read(stream):
            cut = chunk.rfind(b"\n")
            if cut < 0:
                partial += chunk
            else:
                whole = bytes(partial) + chunk[:cut] if partial else chunk[:cut]
                partial = bytearray(chunk[cut + 1 :])
                for raw in whole.split(b"\n"):
                    if len(raw) > limit:
                        raise LineTooLong(self.argv, limit)
                    yield raw
            if len(partial) > limit:
                raise LineTooLong(self.argv, limit)
        if partial:
            yield bytes(partial)


class LocalStream:
    """Lines of a running child's stdout and stderr, merged, as produced."""

    def __init__(self, argv: list[str], timeout: float | None) -> None:
        self.argv = argv
        self.timeout = timeout
        self.returncode: int | None = None
        self.stderr_tail = ""

    async def __aiter__(self) -> AsyncIterator[str]:
        proc = await child.spawn(self.argv, env=child_env(), stderr=child.STDOUT, limit=LINE_MAX)
        deadline = Deadline(self.argv, self.timeout)
        tail: deque[str] = deque(maxlen=20)
        try:
            assert proc.stdout is not None
            async for raw in deadline.lines(proc.stdout):
                line = raw.decode(errors="replace").rstrip("\r")
                tail.append(line)
                yield line
            self.returncode = await proc.wait()
            self.stderr_tail = "\n".join(tail)
        finally:
            await proc.end()


class LocalPipe:
    """A local child's stdin and stdout (see Pipe)."""

    def __init__(self, proc: child.Child) -> None:
        assert proc.stdout is not None and proc.stdin is not None
        self._out = proc.stdout
        self._in = proc.stdin

    async def read(self, n: int, /) -> bytes:
        return await self._out.read(n)

    def write(self, data: bytes) -> None:
        self._in.write(data)

    async def drain(self) -> None:
        await self._in.drain()

    def write_eof(self) -> None:
        if not self._in.is_closing():
            self._in.write_eof()


class LocalRunner:
    """Runs commands as child processes of this one."""

    label = "local"

    async def run(self, command: Command) -> Completed:
        argv, timeout = command.argv, command.timeout
        proc = await child.spawn(
            argv,
            env={**child_env(), **command.secrets},
            stdin=child.PIPE if command.input is not None else child.DEVNULL,
        )
        try:
            async with asyncio.timeout(timeout):
                got = await proc.communicate(command.input, command.bound)
        except TimeoutError:
            raise RunTimeout(argv, timeout or 0) from None
        finally:
            await proc.end()
        return Completed(argv, proc.returncode or 0, got.stdout, got.stderr, got.dropped)

    def stream(self, argv: list[str], *, timeout: float | None = None) -> LocalStream:
        return LocalStream(argv, timeout)

    @contextlib.asynccontextmanager
    async def pipe(self, argv: list[str]) -> AsyncIterator[LocalPipe]:
        proc = await child.spawn(argv, env=child_env(), stdin=child.PIPE, stderr=child.DEVNULL)
        try:
            yield LocalPipe(proc)
        finally:
            ending = asyncio.ensure_future(proc.let_go(PIPE_GRACE))
            try:
                await asyncio.shield(ending)
            except asyncio.CancelledError:
                await ending  # a cancel does not leave the child behind
                raise

    def interactive_argv(self, argv: list[str]) -> list[str]:
        return list(argv)

    @contextlib.asynccontextmanager
    async def engine_path_for_upload(self, local: Path) -> AsyncIterator[str]:
        yield str(local)

    @contextlib.asynccontextmanager
    async def engine_path_for_download(self, local: Path) -> AsyncIterator[str]:
        yield str(local)
