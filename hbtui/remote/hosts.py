"""Remote hosts as the core sees them: `SshHosts`, the core's RemoteHosts over SSH.

Each `Host` it makes has an engine that runs over an `SshRunner`, a
busy-port probe that is one command on the host, an HTTP check and a web
forward that go through the SSH connection to 127.0.0.1:PORT there.
`check_host` is `hbtui hosts check`; `offered_key` and `trust` are
`hbtui hosts trust`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

import asyncssh

from hbtui.checks import Check
from hbtui.config import Config, HostSettings, parse_port_range
from hbtui.core.foundation.hosts import Host, HostKeyOffer, HostReport
from hbtui.engine import Engine, EngineMissing
from hbtui.engine.locate import MIN_VERSION, format_version
from hbtui.errors import HbtuiError, UsageError
from hbtui.paths import Paths
from hbtui.remote.connection import (
    CONNECTION_ERRORS,
    HostConnection,
    changed_key_error,
    identity_problem,
    reason,
)
from hbtui.remote.errors import HostUnreachable, RemoteError
from hbtui.remote.forward import web_forwarder
from hbtui.remote.knownhosts import (
    append_trusted,
    fetch_server_key,
    key_algorithms,
    known_hosts_path,
    trusted_keys,
)
from hbtui.remote.runner import SshRunner
from hbtui.target import parse_target

HTTP_TIMEOUT = 3.0

# Finds the engine on the host: the configured path, smolvm on PATH (or in
# ~/.local/bin, which non-login shells often lack), then the smol-vmm bundled
# in a Python's smolmachines package. Prints "SOURCE PATH", or "none".
_LOCATE = r"""
if [ -n "$1" ]; then
  if [ -f "$1" ] && [ -x "$1" ]; then echo "setting $1"; else echo "missing $1"; fi
  exit 0
fi
p=$(command -v smolvm 2>/dev/null) && [ -n "$p" ] && { echo "PATH $p"; exit 0; }
[ -x "$HOME/.local/bin/smolvm" ] && { echo "PATH $HOME/.local/bin/smolvm"; exit 0; }
for py in python3 python; do
  command -v "$py" >/dev/null 2>&1 || continue
  d=$("$py" -c 'import importlib.util as u
s = u.find_spec("smol")
print(next(iter(s.submodule_search_locations), "") if s and s.submodule_search_locations else "")' 2>/dev/null) || continue
  if [ -n "$d" ] && [ -f "$d/smol-vmm" ] && [ -x "$d/smol-vmm" ]; then echo "smolmachines $d/smol-vmm"; exit 0; fi
done
echo none
"""

# Listening TCP sockets, from whichever tool the host has.
_LISTENING = r"""
if command -v ss >/dev/null 2>&1 && out=$(ss -ltnH 2>/dev/null); then echo "#ss"; printf '%s\n' "$out"; exit 0; fi
if [ -r /proc/net/tcp ]; then echo "#proc"; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; exit 0; fi
if command -v netstat >/dev/null 2>&1; then echo "#netstat"; netstat -an -p tcp 2>/dev/null || netstat -ltn; exit 0; fi
echo "#none"
"""
_TRAILING_PORT = re.compile(r"[.:](\d+)$")


def parse_listening(text: str) -> tuple[str, set[int]]:
    """(the tool used, the ports something listens on) from `_LISTENING`'s output."""
    lines = text.splitlines()
    tool = lines[0].lstrip("#").strip() if lines else "none"
    ports: set[int] = set()
    for line in lines[1:]:
        fields = line.split()
        if tool == "ss" and len(fields) >= 4:
            m = _TRAILING_PORT.search(fields[3])
        elif tool == "proc" and len(fields) >= 4 and fields[3] == "0A" and ":" in fields[1]:
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
            continue
        elif tool == "netstat" and "LISTEN" in fields and len(fields) >= 4:
            m = _TRAILING_PORT.search(fields[3])
        else:
            continue
        if m:
            ports.add(int(m.group(1)))
    return tool, ports


async def remote_listening(conn: HostConnection) -> tuple[str, set[int]]:
    _code, out, _err = await conn.run_shell(_LISTENING, what="listing listening ports")
    return parse_listening(out)


def busy_probe(conn: HostConnection) -> Callable[[Iterable[int]], Awaitable[set[int]]]:
    async def busy(ports: Iterable[int]) -> set[int]:
        wanted = set(ports)
        tool, listening = await remote_listening(conn)
        if tool == "none":
            raise RemoteError(
                f"host {conn.name}: cannot tell which ports are busy "
                "(no ss, /proc/net/tcp or netstat there)"
            )
        return wanted & listening

    return busy


def http_probe(conn: HostConnection) -> Callable[[int], Awaitable[bool]]:
    async def http_ok(port: int) -> bool:
        """Does http://127.0.0.1:PORT/ on the host answer (any HTTP status)?"""
        try:
            reader, writer = await conn.open_tcp(port, timeout=HTTP_TIMEOUT)
        except RemoteError:
            return False
        try:
            writer.write(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            async with asyncio.timeout(HTTP_TIMEOUT):
                line = await reader.readline()
            return bool(line.startswith(b"HTTP/"))
        except (TimeoutError, OSError, Exception):
            return False
        finally:
            writer.close()

    return http_ok


@dataclass(frozen=True)
class EngineLocation:
    path: str  # "" when none was found
    source: str  # "setting", "PATH", "smolmachines", or "missing"/"none"


async def locate_remote_engine(conn: HostConnection, setting: str = "") -> EngineLocation:
    code, out, _err = await conn.run_shell(_LOCATE, setting, what="looking for smolvm")
    words = out.strip().split(" ", 1)
    if code != 0 or not words or words[0] not in ("setting", "PATH", "smolmachines", "missing"):
        return EngineLocation("", "none")
    if words[0] == "missing":
        return EngineLocation(words[1] if len(words) > 1 else setting, "missing")
    return EngineLocation(words[1], words[0])


def engine_missing_error(name: str, where: EngineLocation) -> EngineMissing:
    if where.source == "missing":
        return EngineMissing(
            f"host {name}: smolvm not found at {where.path} (from --smolvm); "
            f"fix it with: hbtui hosts add {name} ... --smolvm PATH",
            code="ENGINE_MISSING",
        )
    return EngineMissing(
        f"host {name}: no smolvm engine found (not on PATH, no smolmachines in its python); "
        f"install it there (pip install smolmachines) or give its path: "
        f"hbtui hosts add {name} ... --smolvm PATH",
        code="ENGINE_MISSING",
    )


def port_range_of(host: HostSettings, config: Config) -> tuple[int, int]:
    if host.ports:
        return parse_port_range(host.ports)
    return config.ports.low, config.ports.high


def host_connection(name: str, host: HostSettings) -> HostConnection:
    return HostConnection(name, parse_target(host.ssh), host.identity)


# Relative to the remote user's home, where SSH commands start.
REMOTE_BASES = ".local/share/hbtui/bases"


def remote_bases_dir(settings: HostSettings) -> str:
    """Bases are as big as disks: beside the engine's state when the host has a state dir
    of its own (often on a bigger disk), else in the remote user's data folder."""
    state = settings.state_dir.rstrip("/")
    return f"{state}/hbtui-bases" if state else REMOTE_BASES


class RemoteFiles:
    """A remote host's files, through small sh scripts over its SSH connection."""

    def __init__(self, conn: HostConnection, bases: str) -> None:
        self.conn = conn
        self._bases = bases

    def bases_dir(self) -> str:
        return self._bases

    async def _run(self, script: str, path: str, what: str) -> str:
        status, out, err = await self.conn.run_shell(script, path, what=what)
        if status != 0:
            raise RemoteError(f"host {self.conn.name}: {what} failed: {err.strip()[-200:]}")
        return out

    async def make_dir(self, path: str) -> None:
        await self._run('mkdir -p -m 700 -- "$1"', path, f"making {path}")

    async def remove_tree(self, path: str) -> None:
        await self._run('rm -rf -- "$1"', path, f"removing {path}")

    async def digest(self, path: str) -> tuple[int, str] | None:
        out = await self._run(
            '[ -f "$1" ] || exit 0; wc -c <"$1"; sha256sum <"$1"',
            path,
            f"hashing {path}",
        )
        fields = out.split()
        if len(fields) < 2 or not fields[0].isdigit():
            return None
        return int(fields[0]), fields[1]

    async def sync(self, path: str) -> None:
        await self._run('sync -- "$1" "${1%/*}" 2>/dev/null || sync', path, f"syncing {path}")


class SshHosts:
    """The core's RemoteHosts over SSH: one shared connection per configured host."""

    def __init__(self, paths: Paths, config: Config) -> None:
        self.paths = paths
        self.config = config
        self.connections: dict[str, HostConnection] = {}

    def _settings(self, name: str) -> HostSettings:
        host = self.config.hosts.get(name)
        if host is None:
            raise UsageError(
                f"unknown host {name!r}; add it with: hbtui hosts add {name} --ssh USER@HOST"
            )
        return host

    def connection(self, name: str) -> HostConnection:
        conn = self.connections.get(name)
        if conn is None:
            conn = self.connections[name] = host_connection(name, self._settings(name))
        return conn

    async def host(self, name: str) -> Host:
        settings = self._settings(name)
        conn = self.connection(name)
        where = await locate_remote_engine(conn, settings.smolvm)
        if not where.path or where.source == "missing":
            raise engine_missing_error(name, where)
        engine = Engine(
            where.path,
            state_dir=settings.state_dir,
            runner=SshRunner(conn),
            timeout=self.config.engine.timeout,
            locks_dir=self.paths.locks_dir / "hosts" / name,
        )
        return Host(
            name,
            engine,
            port_range_of(settings, self.config),
            RemoteFiles(conn, remote_bases_dir(settings)),
            busy_ports=busy_probe(conn),
            http_ok=http_probe(conn),
            web=web_forwarder(conn),
        )

    async def check(self, name: str) -> HostReport:
        return await check_host(name, self._settings(name), self.config)

    async def offered_key(self, name: str) -> HostKeyOffer:
        target = parse_target(self._settings(name).ssh)
        known = trusted_keys(target)
        try:
            if known:
                server = await fetch_server_key(target, algorithms=key_algorithms(known))
            else:
                server = await fetch_server_key(target)
        except (TimeoutError, *CONNECTION_ERRORS) as exc:
            raise HostUnreachable(
                f"cannot connect to host {name} ({target}): {reason(exc)}"
            ) from None
        trusted = any(k.public_data == server.key.public_data for k in known)
        if known and not trusted:
            raise changed_key_error(name, target, server.algorithm, server.fingerprint)
        return HostKeyOffer(
            host=name,
            target=target,
            algorithm=server.algorithm,
            fingerprint=server.fingerprint,
            trusted=trusted,
            known_hosts=known_hosts_path(),
            key=server.key,
        )

    def identity_problem(self, path: str) -> str | None:
        return identity_problem(path)

    def trust(self, offer: HostKeyOffer) -> None:
        if not isinstance(offer.key, asyncssh.SSHKey):
            raise TypeError("a HostKeyOffer made elsewhere cannot be trusted here")
        append_trusted(offer.target, offer.key, offer.known_hosts)

    async def close(self) -> None:
        for conn in self.connections.values():
            await conn.close()


# -- hbtui hosts check ------------------------------------------------------------------


async def check_host(name: str, host: HostSettings, config: Config) -> HostReport:
    """Connect, find the engine and its version, and say what is missing."""
    report = HostReport(name)
    conn = host_connection(name, host)
    try:
        await _check(conn, host, config, report)
    finally:
        await conn.close()
    return report


async def _check(
    conn: HostConnection, host: HostSettings, config: Config, report: HostReport
) -> None:
    add = report.checks.append
    try:
        await conn.connection()
    except HbtuiError as exc:
        add(Check("ssh", False, exc.message))
        return
    add(Check("ssh", True, f"connected to {conn.target} (host key trusted)"))

    where = await locate_remote_engine(conn, host.smolvm)
    if not where.path or where.source == "missing":
        err = engine_missing_error(conn.name, where)
        add(
            Check(
                "engine",
                False,
                err.message.split("; ", 1)[0],
                fix=err.message.split("; ", 1)[1] if "; " in err.message else "",
            )
        )
    else:
        engine = Engine(where.path, state_dir=host.state_dir, runner=SshRunner(conn))
        try:
            version = await engine.version()
        except HbtuiError as exc:
            add(Check("engine", False, f"{where.path} ({where.source}): {exc.message}"))
        else:
            report.engine, report.version = where.path, format_version(version)
            if version < MIN_VERSION:
                add(
                    Check(
                        "engine",
                        False,
                        f"smolvm {format_version(version)} at {where.path} is too old; "
                        f"hbtui needs {format_version(MIN_VERSION)}",
                        fix="upgrade it there: pip install -U smolmachines",
                    )
                )
            else:
                add(
                    Check(
                        "engine",
                        True,
                        f"smolvm {format_version(version)} at {where.path} ({where.source})",
                    )
                )
            try:
                await engine.list()
            except HbtuiError as exc:
                sd = f" with --state-dir {host.state_dir}" if host.state_dir else ""
                add(Check("engine state", False, f"machine ls{sd} failed: {exc.message}"))
            else:
                add(
                    Check(
                        "engine state",
                        True,
                        "machine ls works"
                        + (f" (state dir {host.state_dir})" if host.state_dir else ""),
                    )
                )

    try:
        async with conn.sftp() as sftp:
            await sftp.realpath(".")
    except (HbtuiError, OSError, Exception) as exc:
        add(
            Check(
                "sftp",
                False,
                f"SFTP does not work: {getattr(exc, 'message', exc)}",
                fix="enable the sftp subsystem in the host's sshd_config",
            )
        )
    else:
        add(Check("sftp", True, "SFTP works (recipes and archives move over it)"))

    tool, _ = await remote_listening(conn)
    lo, hi = port_range_of(host, config)
    if tool == "none":
        add(
            Check(
                "ports",
                False,
                "cannot list listening ports (no ss, /proc/net/tcp, netstat)",
                fix="install iproute2 (ss) on the host",
            )
        )
    else:
        add(Check("ports", True, f"busy ports read with {tool}; range {lo}-{hi}"))

    allowed, detail = await forwarding_allowed(conn)
    add(
        Check(
            "forwarding",
            allowed,
            detail,
            fix="" if allowed else "set AllowTcpForwarding yes in the host's sshd_config",
        )
    )


async def forwarding_allowed(conn: HostConnection) -> tuple[bool, str]:
    """May we open direct-tcpip channels (needed for open and the ready check)?"""
    ssh = await conn.connection()
    try:
        async with asyncio.timeout(HTTP_TIMEOUT):
            _, writer = await ssh.open_connection("127.0.0.1", conn.target.port)
    except asyncssh.ChannelOpenError as exc:
        if exc.code == asyncssh.OPEN_ADMINISTRATIVELY_PROHIBITED:
            return False, f"TCP forwarding is not allowed: {exc.reason}"
        return True, "TCP forwarding to the host's 127.0.0.1 is allowed"
    except (TimeoutError, OSError, asyncssh.Error) as exc:
        return False, f"TCP forwarding failed: {exc}"
    writer.close()
    return True, "TCP forwarding to the host's 127.0.0.1 works"
