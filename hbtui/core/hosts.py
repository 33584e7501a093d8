"""A host that runs boxes: this machine, or a remote one over SSH.

Everything the core needs to know about where a box lives is here: its
engine client, its port range, how to tell which ports are busy there, and
how to check that a port on it answers HTTP. hbtui.remote builds the same
object for SSH hosts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from hbtui.core.ports import BusyProbe, local_busy_ports
from hbtui.core.registry import LOCAL
from hbtui.engine import Engine


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


@dataclass
class Host:
    name: str
    engine: Engine
    port_range: tuple[int, int]
    busy_ports: BusyProbe = local_busy_ports
    http_ok: Callable[[int], Awaitable[bool]] = local_http_ok

    @property
    def is_local(self) -> bool:
        return self.name == LOCAL

    def url(self, port: int) -> str:
        """The executor URL as seen on that host (remote boxes need a forward)."""
        return f"http://127.0.0.1:{port}/"
