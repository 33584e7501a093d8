"""One multiplexed SSH connection per remote host.

Every engine call, file transfer, port probe and forward to a host shares
one asyncssh connection, opened on first use and opened again after it
drops. Host keys are checked against known_hosts on every connect; a key
that is unknown or changed is refused with its fingerprint and the command
that trusts it. asyncssh errors never leave this module: they become
`HostUnreachable`, `HostAuthFailed` or a `HostKeyError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncssh

from hbtui.paths import UnreadableFile, read_state
from hbtui.remote.errors import (
    HostAuthFailed,
    HostKeyChanged,
    HostKeyError,
    HostKeyUnknown,
    HostUnreachable,
    RemoteError,
)
from hbtui.remote.knownhosts import (
    fetch_server_key,
    known_hosts_path,
    load_known_hosts,
    trusted_keys,
)
from hbtui.target import SshTarget

CONNECT_TIMEOUT = 10.0  # TCP connect + handshake + authentication
KEEPALIVE_INTERVAL = 15.0  # a silent drop is noticed after 3 missed keepalives
KEEPALIVE_COUNT = 3
HELPER_TIMEOUT = 30.0  # small helper commands (mktemp, rm, kill, probes)

# The exceptions a failed connection attempt shows up as.
CONNECTION_ERRORS = (OSError, asyncssh.Error, EOFError)
# ... and those an established connection dying shows up as (a local file
# problem, like FileNotFoundError, is not one of them).
LINK_ERRORS = (ConnectionError, asyncssh.Error, EOFError)


def reason(exc: BaseException) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    if isinstance(exc, asyncssh.Error):
        return exc.reason or type(exc).__name__
    errno = getattr(exc, "errno", None)
    if isinstance(errno, int) and errno > 0:
        return os.strerror(errno).lower()
    text = str(exc).replace("\n", " ").strip()
    return text or type(exc).__name__


IDENTITY_MAX = 1 << 20  # a private key file is a few KiB


def identity_problem(path: str) -> str | None:
    """Why hbtui cannot log in with the private key file at `path`, or None."""
    where = Path(path)
    if where.is_dir():
        return f"identity {path} is a folder, not a private key file"
    try:
        # Read as a state file is: a FIFO in its place hung `hosts add` and every connect.
        data = read_state(where, IDENTITY_MAX)
    except UnreadableFile as exc:
        return f"identity {path}: {exc.reason}"
    if data is None:
        return f"identity {path}: no such file"
    try:
        asyncssh.import_private_key(data)
    except asyncssh.KeyImportError as exc:
        if "passphrase" in str(exc).lower():
            return (
                f"identity {path} is encrypted with a passphrase, which hbtui cannot ask "
                "for; load it into ssh-agent (ssh-add) and leave --identity out, or use a "
                "key without a passphrase"
            )
        return f"identity {path} is not a private key this SSH client reads ({exc})"
    except (asyncssh.KeyEncryptionError, ValueError) as exc:
        return f"identity {path} cannot be read as a private key ({exc})"
    except OSError as exc:
        return f"identity {path}: {exc.strerror or exc}"
    return None


def unknown_key_error(name: str, t: SshTarget, algorithm: str, fp: str) -> HostKeyUnknown:
    return HostKeyUnknown(
        f"host {name} ({t.host}:{t.port}) is not trusted yet: its {algorithm} key is {fp}; "
        f"if that is right, trust it with: hbtui hosts trust {name} --fingerprint {fp}",
        fingerprint=fp,
    )


def changed_key_error(name: str, t: SshTarget, algorithm: str, fp: str) -> HostKeyChanged:
    kh = known_hosts_path()
    return HostKeyChanged(
        f"REFUSED: the host key of {name} ({t.host}:{t.port}) has CHANGED: it now presents "
        f"{algorithm} {fp}, which is not the key in {kh}. Someone may be intercepting the "
        f"connection, or the host was reinstalled. Only if you know why it changed, remove the "
        f"old key with: ssh-keygen -R '{t.known_hosts_pattern}' -f {kh} and then run: "
        f"hbtui hosts trust {name}",
        fingerprint=fp,
    )


class HostConnection:
    """The SSH connection to one host, shared by everything that talks to it."""

    def __init__(
        self,
        name: str,
        target: SshTarget,
        identity: str = "",
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
    ) -> None:
        self.name = name
        self.target = target
        self.identity = str(Path(identity).expanduser()) if identity else ""
        self.connect_timeout = connect_timeout
        self._conn: asyncssh.SSHClientConnection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        return f"HostConnection({self.name!r}, {self.target})"

    # -- connecting ---------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {
            "port": self.target.port,
            "username": self.target.user,
            "known_hosts": load_known_hosts(),
            "connect_timeout": self.connect_timeout,
            "keepalive_interval": KEEPALIVE_INTERVAL,
            "keepalive_count_max": KEEPALIVE_COUNT,
        }
        if self.identity:
            opts["client_keys"] = [self.identity]
        return opts

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The live connection, made (again) if there is none."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            # A connection belongs to the event loop that made it; the CLI runs
            # one loop per step, so start over on a new one.
            self._abandon()
            self._loop = loop
            self._lock = asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            conn = self._conn
            if conn is not None and not conn.is_closed():
                return conn
            self._conn = None
            self._conn = await self._connect()
            return self._conn

    async def _connect(self) -> asyncssh.SSHClientConnection:
        if self.identity:
            problem = identity_problem(self.identity)
            if problem:
                raise HostAuthFailed(f"host {self.name}: {problem}")
        try:
            async with asyncio.timeout(self.connect_timeout + 5):
                return await asyncssh.connect(self.target.host, **self._options())
        except asyncssh.HostKeyNotVerifiable:
            raise await self.host_key_error() from None
        except asyncssh.PermissionDenied as exc:
            key = f" with {self.identity}" if self.identity else ""
            raise HostAuthFailed(
                f"host {self.name}: {self.target} refused our key{key} ({reason(exc)})"
            ) from None
        except (TimeoutError, *CONNECTION_ERRORS) as exc:
            raise HostUnreachable(
                f"cannot connect to host {self.name} ({self.target}): {reason(exc)}"
            ) from None

    async def host_key_error(self) -> HostKeyError:
        """Why the server's key was refused, with its fingerprint and the way on."""
        t = self.target
        known = trusted_keys(t)
        try:
            server = await fetch_server_key(t, timeout=self.connect_timeout)
        except (TimeoutError, *CONNECTION_ERRORS) as exc:
            return HostKeyUnknown(
                f"host {self.name}: the host key of {t.host}:{t.port} could "
                f"not be verified and could not be read again: {reason(exc)}"
            )
        if known:
            return changed_key_error(self.name, t, server.algorithm, server.fingerprint)
        return unknown_key_error(self.name, t, server.algorithm, server.fingerprint)

    def _abandon(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.abort()

    def drop(self) -> None:
        """Forget the connection (the next call connects again)."""
        self._abandon()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and self._loop is asyncio.get_running_loop():
            conn.close()
            with contextlib.suppress(Exception):
                async with asyncio.timeout(5):
                    await conn.wait_closed()
        elif conn is not None:
            with contextlib.suppress(Exception):
                conn.abort()

    # -- using it -----------------------------------------------------------------

    @contextlib.contextmanager
    def guard(self, what: str) -> Iterator[None]:
        """Turn a connection failure during `what` into HostUnreachable."""
        try:
            yield
        except TimeoutError:
            raise  # the caller's own deadline, not a dead connection
        except asyncssh.ChannelOpenError as exc:
            raise HostUnreachable(f"host {self.name}: {what} failed: {reason(exc)}") from None
        except asyncssh.SFTPError as exc:
            raise RemoteError(f"host {self.name}: {what} failed: {reason(exc)}") from None
        except LINK_ERRORS as exc:
            self._abandon()
            raise HostUnreachable(
                f"connection to host {self.name} lost during {what}: {reason(exc)}"
            ) from None

    async def start_process(
        self, command: str, *, merge_stderr: bool = False, what: str = "a command"
    ) -> asyncssh.SSHClientProcess[bytes]:
        """Open a channel running `command`. A connection found dead before the
        command started is replaced once; after that, failures are errors."""
        kwargs: dict[str, Any] = {"encoding": None}
        if merge_stderr:
            kwargs["stderr"] = asyncssh.STDOUT
        for attempt in (1, 2):
            conn = await self.connection()
            try:
                async with asyncio.timeout(self.connect_timeout):
                    return await conn.create_process(command, **kwargs)
            except asyncssh.ChannelOpenError as exc:
                raise HostUnreachable(
                    f"host {self.name}: cannot run {what}: {reason(exc)}"
                ) from None
            except (TimeoutError, *CONNECTION_ERRORS) as exc:
                self._abandon()
                if attempt == 2:
                    raise HostUnreachable(
                        f"connection to host {self.name} lost starting {what}: {reason(exc)}"
                    ) from None
        raise AssertionError("unreachable")

    async def run_shell(
        self,
        script: str,
        *args: str,
        timeout: float = HELPER_TIMEOUT,
        what: str = "a helper command",
    ) -> tuple[int, str, str]:
        """Run a small POSIX sh script (no wrapper); (status, stdout, stderr)."""
        command = "exec /bin/sh -c " + shlex.quote(script) + " hbtui " + shlex.join(args)
        proc = await self.start_process(command, what=what)
        try:
            with self.guard(what):
                proc.stdin.write_eof()
                async with asyncio.timeout(timeout):
                    out, err = await proc.communicate()
        except TimeoutError:
            raise HostUnreachable(
                f"host {self.name}: {what} timed out after {timeout:g}s"
            ) from None
        finally:
            proc.close()
        if proc.returncode is None:
            self._abandon()
            raise HostUnreachable(f"connection to host {self.name} lost during {what}")
        return proc.returncode, out.decode(errors="replace"), err.decode(errors="replace")

    async def open_tcp(
        self, port: int, *, host: str = "127.0.0.1", timeout: float = 10.0
    ) -> tuple[asyncssh.SSHReader[bytes], asyncssh.SSHWriter[bytes]]:
        """A TCP stream to host:port as seen from the remote host (direct-tcpip)."""
        conn = await self.connection()
        with self.guard(f"connecting to {host}:{port}"):
            async with asyncio.timeout(timeout):
                return await conn.open_connection(host, port, encoding=None)

    @contextlib.asynccontextmanager
    async def sftp(self) -> AsyncIterator[asyncssh.SFTPClient]:
        conn = await self.connection()
        with self.guard("opening SFTP"):
            async with asyncio.timeout(self.connect_timeout):
                client = await conn.start_sftp_client()
        try:
            yield client
        finally:
            client.exit()

    # -- OpenSSH, for terminals ------------------------------------------------------

    def ssh_argv(self, remote_command: str, *, tty: bool) -> list[str]:
        """An OpenSSH argv running `remote_command` there, with our identity,
        port and known_hosts and strict host key checking."""
        argv = [
            "ssh",
            "-t" if tty else "-T",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"UserKnownHostsFile={known_hosts_path()}",
            "-o",
            f"ConnectTimeout={int(self.connect_timeout)}",
            "-o",
            f"ServerAliveInterval={int(KEEPALIVE_INTERVAL)}",
            "-p",
            str(self.target.port),
            "-l",
            self.target.user,
        ]
        if self.identity:
            argv += ["-i", self.identity, "-o", "IdentitiesOnly=yes"]
        return [*argv, "--", self.target.host, remote_command]
