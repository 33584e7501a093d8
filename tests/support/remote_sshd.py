"""A small SSH server for the remote-host tests (asyncssh, loopback only).

    python tests/support/remote_sshd.py --host-key FILE --authorized-keys FILE --port-file FILE

Key authentication only; every exec request runs under a real `/bin/sh -c`
in its own session (as sshd does), with a login-like environment and none
of ours. SFTP is on, direct-tcpip to 127.0.0.1 is allowed.

Signals, for the tests: SIGUSR1 drops every connection at once (a network
failure); SIGUSR2 stops accepting connections, and SIGUSR2 again resumes on
the same port. SIGTERM stops the server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
from pathlib import Path

import asyncssh

ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "USER": "root",
    "LOGNAME": "root",
    "SHELL": "/bin/sh",
    "LANG": "C.UTF-8",
}

connections: set[asyncssh.SSHServerConnection] = set()


class Server(asyncssh.SSHServer):
    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        connections.discard(self.conn)

    def connection_requested(
        self, dest_host: str, dest_port: int, orig_host: str, orig_port: int
    ) -> bool:
        return dest_host in ("127.0.0.1", "localhost", "::1")


async def _copy_out(reader: asyncio.StreamReader, writer) -> None:
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except Exception:
        pass


async def _copy_in(reader, proc: asyncio.subprocess.Process) -> None:
    assert proc.stdin is not None
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            proc.stdin.write(data)
            await proc.stdin.drain()
    except Exception:
        pass
    finally:
        with contextlib.suppress(Exception):
            proc.stdin.close()


async def handle(process: asyncssh.SSHServerProcess) -> None:
    if not process.command:
        process.stderr.write(b"this test server runs commands only\n")
        process.exit(1)
        return
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        process.command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        env=ENV,
        cwd=ENV["HOME"],
    )
    feeder = asyncio.ensure_future(_copy_in(process.stdin, proc))
    await asyncio.gather(
        _copy_out(proc.stdout, process.stdout), _copy_out(proc.stderr, process.stderr)
    )
    status = await proc.wait()
    feeder.cancel()
    with contextlib.suppress(Exception):
        process.exit(status if status >= 0 else 128 - status)


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--host-key", required=True)
    ap.add_argument("--authorized-keys", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()

    async def listen(port: int) -> asyncssh.SSHAcceptor:
        return await asyncssh.create_server(
            Server,
            "127.0.0.1",
            port,
            server_host_keys=[args.host_key],
            authorized_client_keys=args.authorized_keys,
            process_factory=handle,
            encoding=None,
            sftp_factory=True,
            allow_scp=False,
            password_auth=False,
            kbdint_auth=False,
            reuse_address=True,
        )

    server = await listen(args.port)
    port = server.sockets[0].getsockname()[1]
    tmp = Path(args.port_file + ".tmp")
    tmp.write_text(str(port))
    os.replace(tmp, args.port_file)

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    state = {"server": server}

    def drop() -> None:
        for conn in list(connections):
            conn.abort()

    async def toggle() -> None:
        if state["server"] is not None:
            state["server"].close()
            await state["server"].wait_closed()
            state["server"] = None
            drop()
        else:
            state["server"] = await listen(port)

    loop.add_signal_handler(signal.SIGUSR1, drop)
    loop.add_signal_handler(signal.SIGUSR2, lambda: asyncio.ensure_future(toggle()))
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    await stop.wait()
    if state["server"] is not None:
        state["server"].close()
    drop()


if __name__ == "__main__":
    asyncio.run(main())
