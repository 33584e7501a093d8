"""Host keys: checked against the user's known_hosts, never accepted silently.

The file is `~/.ssh/known_hosts` (or `HBTUI_KNOWN_HOSTS`), shared with
OpenSSH, so a host trusted with `ssh` is trusted here and the reverse.
hbtui only ever appends a key the user confirmed, by fingerprint.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from hbtui.paths import read_state
from hbtui.target import DEFAULT_PORT, SshTarget

ENV_KNOWN_HOSTS = "HBTUI_KNOWN_HOSTS"


def known_hosts_path() -> Path:
    override = os.environ.get(ENV_KNOWN_HOSTS)
    if override:
        return Path(override).expanduser()
    return Path("~/.ssh/known_hosts").expanduser()


def load_known_hosts(path: Path | None = None) -> asyncssh.SSHKnownHosts:
    """The trusted keys; a missing file trusts nothing."""
    path = path or known_hosts_path()
    data = read_state(path)
    return asyncssh.import_known_hosts(data.decode(errors="replace") if data else "")


def _match_args(target: SshTarget) -> tuple[str, str, int | None]:
    return target.host, "", (None if target.port == DEFAULT_PORT else target.port)


def trusted_keys(target: SshTarget, path: Path | None = None) -> list[asyncssh.SSHKey]:
    host, addr, port = _match_args(target)
    keys, ca_keys, *_ = load_known_hosts(path).match(host, addr, port)
    return list(keys) + list(ca_keys)


def fingerprint(key: asyncssh.SSHKey) -> str:
    return key.get_fingerprint("sha256")


def key_line(target: SshTarget, key: asyncssh.SSHKey) -> str:
    alg, b64 = key.export_public_key("openssh").decode().split()[:2]
    return f"{target.known_hosts_pattern} {alg} {b64}\n"


def append_trusted(target: SshTarget, key: asyncssh.SSHKey, path: Path | None = None) -> Path:
    """Add `key` for `target` to known_hosts (creating it 0600, its folder 0700)."""
    path = path or known_hosts_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    before = read_state(path) or b""  # a regular file, or an error naming it
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, 0o600)
    with os.fdopen(fd, "a") as f:
        if before and not before.endswith(b"\n"):
            f.write("\n")
        f.write(key_line(target, key))
    return path


@dataclass(frozen=True)
class ServerKey:
    key: asyncssh.SSHKey
    fingerprint: str
    algorithm: str


async def fetch_server_key(
    target: SshTarget, *, algorithms: list[str] | None = None, timeout: float = 10.0
) -> ServerKey:
    """The host key the server presents (no authentication happens)."""
    kwargs: dict[str, Any] = {}
    if algorithms:
        kwargs["server_host_key_algs"] = algorithms
    async with asyncio.timeout(timeout):
        key = await asyncssh.get_server_host_key(target.host, target.port, **kwargs)
    if key is None:
        raise asyncssh.Error(0, "the server presented no host key")
    return ServerKey(key, fingerprint(key), key.get_algorithm())


def key_algorithms(keys: list[asyncssh.SSHKey]) -> list[str]:
    algs: list[str] = []
    for key in keys:
        for alg in key.sig_algorithms:
            name = alg.decode() if isinstance(alg, bytes) else str(alg)
            if name not in algs:
                algs.append(name)
    return algs
