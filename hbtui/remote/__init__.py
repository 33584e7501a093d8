"""Remote hosts over SSH: `hbtui hosts`, `--host NAME` on every box verb.

- `remote_host_factory(paths, config)`: BoxService's hook, an async
  `(name) -> hbtui.core.hosts.Host` whose engine runs over SSH.
- `open_forward(service, name, host_name)`: a local URL reaching a remote
  box's executor, and an async closer (for `hbtui open` and the dashboard).
- `SshRunner`: the engine Runner protocol over one shared asyncssh connection.

Nothing here imports Textual.
"""

from hbtui.remote.connection import HostConnection
from hbtui.remote.errors import (
    HostAuthFailed,
    HostKeyChanged,
    HostKeyError,
    HostKeyUnknown,
    HostUnreachable,
    RemoteError,
)
from hbtui.remote.forward import open_forward
from hbtui.remote.hosts import check_host, remote_host_factory
from hbtui.remote.runner import SshRunner

__all__ = [
    "HostConnection",
    "HostAuthFailed",
    "HostKeyChanged",
    "HostKeyError",
    "HostKeyUnknown",
    "HostUnreachable",
    "RemoteError",
    "open_forward",
    "check_host",
    "remote_host_factory",
    "SshRunner",
]
