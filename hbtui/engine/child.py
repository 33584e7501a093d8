"""A child process started off the event loop.

asyncio's own subprocesses fork and exec in the event loop's thread, which waits until
the child has exec'd: a few milliseconds on an idle machine, tens under load. With an
engine call for every listing, stats, pane capture and agent exec, the dashboard's loop
spent that long stalled about four times a second. Here the fork runs in a worker
thread; the pipes are read by the loop, and the exit is waited for by a pidfd the loop
watches (Linux) or by a thread of its own (elsewhere).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import IO

from hbtui.engine.capture import Bound, Captured, capture, together

PIPE = subprocess.PIPE
STDOUT = subprocess.STDOUT
DEVNULL = subprocess.DEVNULL


class Child:
    """A running child: its stdout (and stderr, unless merged) as stream readers."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        pipes: list[asyncio.BaseTransport],
        stdout: asyncio.StreamReader | None,
        stderr: asyncio.StreamReader | None,
        stdin: asyncio.StreamWriter | None,
    ) -> None:
        self._popen = popen
        self._pipes = pipes
        self.pid = popen.pid
        self.stdout = stdout
        self.stderr = stderr
        self.stdin = stdin
        self._exited = asyncio.get_running_loop().create_future()
        _watch_exit(popen, self._exited)

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    async def wait(self) -> int:
        await asyncio.shield(self._exited)
        code = self._popen.wait()  # reaped already, or at once: it has exited
        return code

    async def communicate(self, input: bytes | None, bound: Bound) -> Captured:
        """Feed `input` while both outputs are read within `bound` (OutputTooLong past
        it: the caller ends the child), then wait for the exit."""

        async def feed() -> None:
            if self.stdin is None:
                return
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                if input:
                    self.stdin.write(input)
                    await self.stdin.drain()
                self.stdin.close()

        assert self.stdout is not None
        _, captured = await together(feed(), capture(self.stdout, self.stderr, bound))
        await self.wait()
        return captured

    async def end(self) -> None:
        """Kill the child's group if it still runs, reap it, close its pipes: one left to
        the garbage collector outlives its event loop ("Event loop is closed" at exit)."""
        self.kill_group()
        await self.wait()
        for pipe in self._pipes:
            pipe.close()

    async def let_go(self, grace: float) -> None:
        """Close its pipes (EOF on its stdin, a broken pipe on its next write), give it
        `grace` seconds to end on that, then end() it. A command in a box ends this way
        before its group is killed: killing the engine's exec with what it started in
        the box can leave the box a process no one reaps."""
        for pipe in self._pipes:
            pipe.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await self.wait()
        await self.end()

    def kill_group(self) -> None:
        """SIGKILL to the child's whole process group (it leads its own session)."""
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)


def _watch_exit(popen: subprocess.Popen[bytes], exited: asyncio.Future[None]) -> None:
    loop = exited.get_loop()

    def done() -> None:
        if not exited.done():
            exited.set_result(None)

    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        with contextlib.suppress(OSError):
            fd = pidfd_open(popen.pid)

            def readable() -> None:
                loop.remove_reader(fd)
                os.close(fd)
                done()

            loop.add_reader(fd, readable)
            return

    def waiter() -> None:
        popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(done)

    threading.Thread(target=waiter, name=f"wait-{popen.pid}", daemon=True).start()


async def spawn(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    stdin: int = DEVNULL,
    stderr: int = PIPE,
    limit: int = 1 << 16,
) -> Child:
    """Start `argv` in a new session (its own process group), stdout piped; stdin
    DEVNULL or PIPE, stderr PIPE or STDOUT (merged into stdout). A cancellation while
    it starts still ends the child: none is left behind."""
    loop = asyncio.get_running_loop()
    starting = loop.run_in_executor(
        None,
        lambda: subprocess.Popen(
            list(argv), stdin=stdin, stdout=PIPE, stderr=stderr, start_new_session=True,
            env=dict(env),
        ),
    )  # fmt: skip
    try:
        popen = await asyncio.shield(starting)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            late = await starting
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(late.pid, signal.SIGKILL)
            await loop.run_in_executor(None, late.wait)
            _close(late)
        raise
    pipes: list[asyncio.BaseTransport] = []
    try:
        out = await _reader(loop, popen.stdout, limit, pipes)
        err = await _reader(loop, popen.stderr, limit, pipes)
        writer = await _writer(loop, popen.stdin, pipes)
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        await loop.run_in_executor(None, popen.wait)
        for pipe in pipes:
            pipe.close()
        _close(popen)
        raise
    return Child(popen, pipes, out, err, writer)


def _close(popen: subprocess.Popen[bytes]) -> None:
    for pipe in (popen.stdin, popen.stdout, popen.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


async def _reader(
    loop: asyncio.AbstractEventLoop,
    pipe: IO[bytes] | None,
    limit: int,
    pipes: list[asyncio.BaseTransport],
) -> asyncio.StreamReader | None:
    if pipe is None:
        return None
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), pipe
    )
    pipes.append(transport)
    return reader


async def _writer(
    loop: asyncio.AbstractEventLoop, pipe: IO[bytes] | None, pipes: list[asyncio.BaseTransport]
) -> asyncio.StreamWriter | None:
    if pipe is None:
        return None
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.streams.FlowControlMixin(loop=loop), pipe
    )
    pipes.append(transport)
    return asyncio.StreamWriter(transport, protocol, None, loop)
