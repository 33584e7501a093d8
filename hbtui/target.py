"""`USER@HOST[:PORT]`: where a remote host's SSH server is."""

from __future__ import annotations

import getpass
import re
from dataclasses import dataclass

from hbtui.errors import UsageError

DEFAULT_PORT = 22
_HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9.\-_]*[A-Za-z0-9])?$")
_USER_RE = re.compile(r"^[A-Za-z0-9._][A-Za-z0-9._\-]*$")


@dataclass(frozen=True)
class SshTarget:
    user: str
    host: str
    port: int = DEFAULT_PORT

    @property
    def known_hosts_pattern(self) -> str:
        """How OpenSSH names this host in known_hosts."""
        return self.host if self.port == DEFAULT_PORT else f"[{self.host}]:{self.port}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = "" if self.port == DEFAULT_PORT else f":{self.port}"
        return f"{self.user}@{host}{port}"


def parse_target(text: str) -> SshTarget:
    """Parse `USER@HOST[:PORT]` (HOST may be `[v6addr]`); USER defaults to ours."""
    bad = UsageError(
        f"--ssh wants USER@HOST[:PORT], like root@build.example.com:2222 (got {text!r})"
    )
    text = text.strip()
    if not text or any(c.isspace() for c in text):
        raise bad
    user, sep, rest = text.rpartition("@")
    if not sep:
        user, rest = getpass.getuser(), text
    if not user or not _USER_RE.match(user):
        raise bad
    port = DEFAULT_PORT
    if rest.startswith("["):
        host, close, after = rest[1:].partition("]")
        if not close or not host or ":" not in host:
            raise bad
        if after:
            if not after.startswith(":"):
                raise bad
            port = _port(after[1:], bad)
    else:
        host, colon, port_text = rest.partition(":")
        if colon:
            port = _port(port_text, bad)
        if not _HOST_RE.match(host):
            raise bad
    return SshTarget(user, host, port)


def _port(text: str, bad: UsageError) -> int:
    # ASCII digits only: str.isdigit() also passes "²", which int() refuses.
    if not (text.isascii() and text.isdigit()) or not 1 <= int(text) <= 65535:
        raise bad
    return int(text)


def target_problem(text: str) -> str | None:
    """Why `text` is not an SSH target, or None."""
    try:
        parse_target(text)
    except UsageError:
        return "not an SSH target"
    return None
