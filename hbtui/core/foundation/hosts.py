"""A host that runs boxes: this machine, or a remote one over SSH.

Everything the core needs to know about where a box lives is here: its
engine client, its port range, which ports are busy there, whether a port
on it answers HTTP, and how to reach a port on it from this machine. The
core builds the local Host itself; remote Hosts come from a `RemoteHosts`
provider it is handed (hbtui.remote implements one over SSH), so the core
never imports the remote layer.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import stat
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hbtui.checks import Check, all_needed_pass
from hbtui.config import Config
from hbtui.core.foundation.version import check_local_version
from hbtui.engine import Engine, locate_engine
from hbtui.errors import UsageError
from hbtui.names import LOCAL
from hbtui.paths import Paths, kind_of
from hbtui.statefile import fsync_dir
from hbtui.target import SshTarget

# Which of these ports accept connections on the host.
BusyProbe = Callable[[Iterable[int]], Awaitable[set[int]]]
HttpProbe = Callable[[int], Awaitable[bool]]
Closer = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class WebAccess:
    """A URL on this machine that reaches a box's executor, and how to let it go."""

    url: str
    close: Closer
    forwarded: bool = False  # True: a port forward that lives until `close()`


# (a URL on this machine reaching that port on the host, a closer)
Forwarder = Callable[[int], Awaitable[WebAccess]]


def _accepts(port: int) -> bool:
    for family, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(0.3)
                if s.connect_ex((addr, port)) == 0:
                    return True
        except OSError:
            continue  # no IPv6 on this host
    return False


async def local_busy_ports(ports: Iterable[int]) -> set[int]:
    """The ports something on this machine accepts connections on (v4 or v6 loopback)."""
    wanted = list(ports)
    results = await asyncio.gather(*(asyncio.to_thread(_accepts, p) for p in wanted))
    return {p for p, busy in zip(wanted, results, strict=True) if busy}


def _http_answers(port: int) -> bool:
    import urllib.error  # late: urllib.request costs ~15 ms, paid only when probing
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # an HTTP error status is still an answer
    except (OSError, ValueError):
        return False


async def local_http_ok(port: int) -> bool:
    return await asyncio.to_thread(_http_answers, port)


async def _nothing_to_close() -> None:
    return None


async def local_web(port: int) -> WebAccess:
    """A local box's port is already on this machine."""
    return WebAccess(f"http://127.0.0.1:{port}/", _nothing_to_close)


class HostFiles(Protocol):
    """The few file operations the core does where a host's engine runs (its bases)."""

    def bases_dir(self) -> str:
        """Where packs of bases live on the host."""
        ...

    async def make_dir(self, path: str) -> None: ...

    async def remove_tree(self, path: str) -> None:
        """Remove a folder and what is in it; a missing one is fine."""
        ...

    async def digest(self, path: str) -> tuple[int, str] | None:
        """(size, sha256 hex) of a file, or None if there is no such file."""
        ...

    async def sync(self, path: str) -> None:
        """Make a file the engine wrote, and its name, survive a power cut."""
        ...


def _sha256(path: Path) -> tuple[int, str] | None:
    import hashlib  # loaded by the verbs that check a file, not by every verb

    digest = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            size = 0
            while chunk := fh.read(1 << 20):
                size += len(chunk)
                digest.update(chunk)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None
    return size, digest.hexdigest()


class LocalFiles:
    """This machine's files, for the local engine."""

    def __init__(self, bases: Path) -> None:
        self._bases = bases

    def bases_dir(self) -> str:
        return str(self._bases)

    async def make_dir(self, path: str) -> None:
        Path(path).mkdir(mode=0o700, parents=True, exist_ok=True)

    async def remove_tree(self, path: str) -> None:
        await asyncio.to_thread(shutil.rmtree, path, ignore_errors=True)

    async def digest(self, path: str) -> tuple[int, str] | None:
        return await asyncio.to_thread(_sha256, Path(path))

    async def sync(self, path: str) -> None:
        await asyncio.to_thread(_sync_file, Path(path))


def _sync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(path.parent)


@dataclass
class Host:
    name: str
    engine: Engine
    port_range: tuple[int, int]
    files: HostFiles
    busy_ports: BusyProbe = local_busy_ports
    http_ok: HttpProbe = local_http_ok
    web: Forwarder = local_web

    def url(self, port: int) -> str:
        """The executor URL as seen on that host (a remote box needs `web()` to reach it)."""
        return f"http://127.0.0.1:{port}/"


@dataclass(frozen=True)
class HostKeyOffer:
    """The SSH host key a remote host presents, and whether it is trusted already."""

    host: str
    target: SshTarget
    algorithm: str
    fingerprint: str  # "SHA256:..."
    trusted: bool
    known_hosts: Path
    key: object = field(repr=False, compare=False)  # the provider's own key object


@dataclass
class HostReport:
    """`hbtui hosts check`: what works on a remote host and what is missing."""

    host: str
    checks: list[Check] = field(default_factory=list)
    engine: str = ""
    version: str = ""

    @property
    def ok(self) -> bool:
        return all_needed_pass(self.checks)

    def to_json(self) -> dict[str, object]:
        return {
            "host": self.host,
            "ok": self.ok,
            "engine": self.engine or None,
            "version": self.version or None,
            "checks": [c.to_json() for c in self.checks],
        }


class RemoteHosts(Protocol):
    """What the core needs from a remote-host layer (hbtui.remote.SshHosts)."""

    async def host(self, name: str) -> Host:
        """A connected Host whose engine runs there (raises RemoteError if it can't)."""
        ...

    async def check(self, name: str) -> HostReport: ...

    async def offered_key(self, name: str) -> HostKeyOffer:
        """The key the host presents; raises HostKeyChanged if it differs from a trusted one."""
        ...

    def trust(self, offer: HostKeyOffer) -> None:
        """Add the offered key to known_hosts."""
        ...

    def identity_problem(self, path: str) -> str | None:
        """Why the private key file at `path` cannot log in (encrypted, not a key, a
        folder), or None."""
        ...

    async def close(self) -> None: ...


def _check_state_dir(state_dir: str) -> None:
    """The engine's state folder, when set, is a folder or not there yet (the engine makes
    it): anything else was the engine's "create directory: Not a directory (os error 20)",
    naming no path."""
    try:
        mode = os.stat(state_dir).st_mode
    except FileNotFoundError:
        if os.path.lexists(state_dir):  # the engine's mkdir: "File exists (os error 17)"
            raise UsageError(
                f"the engine's state folder {state_dir} is a symbolic link to nothing "
                f"({os.readlink(state_dir)})"
            ) from None
        return
    except OSError as exc:  # a symlink loop, a path through a file
        why = (exc.strerror or str(exc)).lower()
        raise UsageError(f"the engine's state folder {state_dir} cannot be used ({why})") from None
    if not stat.S_ISDIR(mode):
        raise UsageError(
            f"the engine's state folder {state_dir} is {kind_of(mode)}, not a folder "
            "(HBTUI_SMOLVM_STATE_DIR, or [engine] state_dir in config.toml)"
        )


def local_engine(paths: Paths, config: Config) -> Engine:
    """This machine's engine, as the config says where it is and keeps its state."""
    located = locate_engine(config.engine_path_setting())
    if config.engine_state_dir():
        _check_state_dir(config.engine_state_dir())
    return Engine(
        located.path,
        state_dir=config.engine_state_dir(),
        timeout=config.engine.timeout,
        locks_dir=paths.locks_dir,
    )


class HostPool:
    """Hosts by name, each made once: this machine from the config, the others
    from the remote provider, which is made (and its libraries imported) only
    when a remote host is first asked for."""

    def __init__(
        self,
        paths: Paths,
        config: Config,
        remote: Callable[[], RemoteHosts] | None = None,
        local: Engine | None = None,
    ) -> None:
        """`local`: this machine's engine when the front end made it early (its listing
        already running); else it is made when first asked for."""
        self.paths = paths
        self.config = config
        self._make_remote = remote
        self._remote: RemoteHosts | None = None
        self._hosts: dict[str, Host] = {}
        self._local = local

    def names(self) -> list[str]:
        return [LOCAL, *sorted(self.config.hosts)]

    def local_engine(self) -> Engine:
        engine, self._local = self._local, None
        return engine or local_engine(self.paths, self.config)

    @property
    def local_bases_dir(self) -> Path:
        """Where this machine's engine keeps packs: bases, and boxes being remade."""
        return self.paths.data_dir / "bases" / LOCAL

    def remote(self) -> RemoteHosts:
        if self._remote is None:
            if self._make_remote is None:
                raise UsageError("remote hosts are not available in this hbtui")
            self._remote = self._make_remote()
        return self._remote

    async def get(self, name: str = LOCAL) -> Host:
        if name in self._hosts:
            return self._hosts[name]
        if name == LOCAL:
            host = Host(
                LOCAL,
                self.local_engine(),
                (self.config.ports.low, self.config.ports.high),
                LocalFiles(self.local_bases_dir),
            )
        elif name in self.config.hosts:
            host = await self.remote().host(name)
        else:
            raise UsageError(
                f"unknown host {name!r}; add it with: hbtui hosts add {name} --ssh USER@HOST"
            )
        if name == LOCAL:
            await check_local_version(host.engine, self.paths.data_dir / "engine-version.json")
        else:
            await host.engine.check_version()
        self._hosts[name] = host
        return host

    def forget(self, name: str) -> None:
        """Drop a host made earlier (its settings changed or it was removed)."""
        self._hosts.pop(name, None)

    async def close(self) -> None:
        if self._remote is not None:
            await self._remote.close()
