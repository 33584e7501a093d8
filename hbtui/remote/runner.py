"""SshRunner: the engine's Runner protocol over a host's SSH connection.

Each command runs as `/bin/sh -c WRAPPER argv...` on the host. The wrapper
reports its pid (sshd makes every session command a process-group leader)
and checks that the program exists before exec'ing it, so that

- a timeout or a cancellation kills the remote command's whole process
  group (`kill -KILL -PID` on a second channel), not just our channel;
- a missing engine binary is told apart from a guest command that failed.

No local environment is sent to the host, so secrets stay here. Files move
over SFTP through a private temporary folder on the host, removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path

import asyncssh

from hbtui.engine.capture import Captured, capture
from hbtui.engine.runner import PIPE_GRACE, Command, Completed, Deadline, RunTimeout
from hbtui.remote.connection import HostConnection
from hbtui.remote.errors import HostUnreachable

_PID_TAG = b"hbtui-pid "
_MISSING_TAG = "hbtui: program not found: "
_WRAPPER = (
    f'echo "{_PID_TAG.decode()}$$" >&PIDFD; '
    f'command -v "$0" >/dev/null 2>&1 || {{ echo "{_MISSING_TAG}$0" >&2; exit 127; }}; '
    'exec "$0" "$@"'
)
KILL_TIMEOUT = 10.0
# A piped command: its stderr dropped there (stdout and stderr share the channel's window,
# so unread stderr would stall stdout); it ends on its own when the channel closes (EOF
# on its stdin, a broken pipe on its stdout).
_PIPE_WRAPPER = (
    'command -v "$0" >/dev/null 2>&1 || { echo "%s$0" >&2; exit 127; }; exec "$0" "$@" 2>/dev/null'
)


_SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def remote_command(argv: list[str], *, merge: bool = False, secrets: tuple[str, ...] = ()) -> str:
    """The command line sshd hands to the login shell for `argv`. With `merge`,
    stderr joins stdout on the host, so the lines keep their order. `secrets` names
    variables whose values the wrapper reads from stdin, one line each, and exports:
    they reach the program's environment and nothing else (no argv, no file)."""
    reads = ""
    for name in secrets:
        if not _SECRET_NAME.fullmatch(name):
            raise ValueError(f"not a variable name: {name!r}")
        reads += f"IFS= read -r {name} && export {name} || exit 125; "
    wrapper = _WRAPPER.replace("PIDFD", "1" if merge else "2") + (" 2>&1" if merge else "")
    return "exec /bin/sh -c " + shlex.quote(reads + wrapper) + " " + shlex.join(argv)


def _parse_pid(line: bytes) -> int | None:
    if line.startswith(_PID_TAG):
        text = line[len(_PID_TAG) :].strip()
        if text.isdigit():
            return int(text)
    return None


class SshStream:
    """Lines of a remote command's stdout and stderr, merged, as produced."""

    def __init__(self, runner: SshRunner, argv: list[str], timeout: float | None) -> None:
        self.runner = runner
        self.argv = argv
        self.timeout = timeout
        self.returncode: int | None = None
        self.stderr_tail = ""

    async def __aiter__(self) -> AsyncIterator[str]:
        conn = self.runner.conn
        what = f"{self.argv[0]} {' '.join(self.argv[1:4])}"
        proc = await conn.start_process(
            remote_command(self.argv, merge=True), merge_stderr=True, what=what
        )
        deadline = Deadline(self.argv, self.timeout)
        tail: deque[str] = deque(maxlen=20)
        pid: int | None = None
        finished = False
        try:
            with conn.guard(what):
                proc.stdin.write_eof()
                first = True
                async for raw in deadline.lines(proc.stdout):
                    if first:
                        first = False
                        pid = _parse_pid(raw)
                        if pid is not None:
                            continue
                    line = raw.decode(errors="replace").rstrip("\r")
                    tail.append(line)
                    yield line
                async with asyncio.timeout(30):
                    await proc.wait_closed()
            if proc.returncode is None:
                conn.drop()
                raise HostUnreachable(f"connection to host {conn.name} lost during {what}")
            finished = True
            self.returncode = proc.returncode
            self.stderr_tail = "\n".join(tail)
        finally:
            if not finished:
                await asyncio.shield(self.runner.kill(pid))
            proc.close()


class SshPipe:
    """A remote command's stdin and stdout over its channel (see Pipe)."""

    def __init__(self, proc: asyncssh.SSHClientProcess[bytes]) -> None:
        self._proc = proc

    async def read(self, n: int, /) -> bytes:
        return await self._proc.stdout.read(n)

    def write(self, data: bytes) -> None:
        self._proc.stdin.write(data)

    async def drain(self) -> None:
        await self._proc.stdin.drain()

    def write_eof(self) -> None:
        with contextlib.suppress(OSError, asyncssh.Error):
            self._proc.stdin.write_eof()


class SshRunner:
    """Runs engine commands on a remote host over its shared SSH connection."""

    def __init__(self, conn: HostConnection) -> None:
        self.conn = conn
        self.label = conn.name

    async def kill(self, pid: int | None) -> None:
        """Kill a remote command's process group; best effort, never raises."""
        if pid is None:
            return
        with contextlib.suppress(Exception):
            await self.conn.run_shell(
                'kill -KILL "-$1" 2>/dev/null || kill -KILL "$1" 2>/dev/null; true',
                str(pid),
                timeout=KILL_TIMEOUT,
                what="killing a timed-out command",
            )

    async def run(self, command: Command) -> Completed:
        argv, secrets = command.argv, command.secrets
        what = f"{argv[0]} {' '.join(argv[1:4])}"
        names = tuple(secrets)
        for value in secrets.values():
            if "\n" in value or "\0" in value:
                raise ValueError("a secret value holds a line break; it cannot be passed on")
        lines = "".join(f"{secrets[n]}\n" for n in names).encode()
        proc = await self.conn.start_process(remote_command(argv, secrets=names), what=what)
        pid: int | None = None
        finished = False
        lead = b""

        async def talk() -> Captured:
            nonlocal pid, lead
            if lines:
                proc.stdin.write(lines)  # read by the wrapper before anything else
            first = await proc.stderr.readline()
            pid = _parse_pid(first)
            if pid is None:
                lead = first
            if command.input:
                proc.stdin.write(command.input)
                await proc.stdin.drain()
            proc.stdin.write_eof()
            got = await capture(proc.stdout, proc.stderr, command.bound)
            await proc.wait_closed()
            return got

        try:
            with self.conn.guard(what):
                try:
                    async with asyncio.timeout(command.timeout):
                        got = await talk()
                except TimeoutError:
                    raise RunTimeout(argv, command.timeout or 0) from None
            if proc.returncode is None:
                self.conn.drop()
                raise HostUnreachable(f"connection to host {self.conn.name} lost during {what}")
            finished = True
        finally:
            if not finished:
                await asyncio.shield(self.kill(pid))
            proc.close()
        err = lead + got.stderr
        if proc.returncode == 127 and err.decode(errors="replace").startswith(_MISSING_TAG):
            raise FileNotFoundError(argv[0])
        return Completed(argv, proc.returncode, got.stdout, err, got.dropped)

    def stream(self, argv: list[str], *, timeout: float | None = None) -> SshStream:
        return SshStream(self, argv, timeout)

    @contextlib.asynccontextmanager
    async def pipe(self, argv: list[str]) -> AsyncIterator[SshPipe]:
        command = "exec /bin/sh -c " + shlex.quote(_PIPE_WRAPPER % _MISSING_TAG) + " "
        proc = await self.conn.start_process(command + shlex.join(argv), what=argv[0])
        try:
            yield SshPipe(proc)
        finally:
            proc.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(PIPE_GRACE):
                    await asyncio.shield(proc.wait_closed())

    def interactive_argv(self, argv: list[str]) -> list[str]:
        """`ssh -t HOST 'argv'`: hands this terminal to `argv` on the host."""
        head = argv[: argv.index("--")] if "--" in argv else argv
        return self.conn.ssh_argv(shlex.join(argv), tty="-t" in head)

    # -- files ------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def _remote_tmpdir(self) -> AsyncIterator[str]:
        code, out, err = await self.conn.run_shell(
            'umask 077; mktemp -d "${TMPDIR:-/tmp}/hbtui.XXXXXXXX"', what="making a temp folder"
        )
        folder = out.strip()
        if code != 0 or not folder.startswith("/") or "/hbtui." not in folder:
            raise HostUnreachable(
                f"host {self.conn.name}: cannot make a temporary folder: "
                f"{err.strip() or out.strip() or code}"
            )
        try:
            yield folder
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(
                    self.conn.run_shell('rm -rf -- "$1"', folder, what="removing a temp folder")
                )

    @contextlib.asynccontextmanager
    async def engine_path_for_upload(self, local: Path) -> AsyncIterator[str]:
        async with self._remote_tmpdir() as folder:
            remote = f"{folder}/{local.name or 'upload'}"
            async with self.conn.sftp() as sftp:
                with self.conn.guard(f"uploading {local.name}"):
                    await sftp.put(str(local), remote)
            yield remote

    @contextlib.asynccontextmanager
    async def engine_path_for_download(self, local: Path) -> AsyncIterator[str]:
        async with self._remote_tmpdir() as folder:
            remote = f"{folder}/{local.name or 'download'}"
            yield remote
            part = local.with_name(f".{local.name}.{os.getpid()}.part")
            try:
                async with self.conn.sftp() as sftp:
                    with self.conn.guard(f"downloading {local.name}"):
                        await sftp.get(remote, str(part))
                os.replace(part, local)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    part.unlink()
