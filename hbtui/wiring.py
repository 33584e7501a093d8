"""Building the Service both front ends use: paths, config, and the remote layer.

This is the one module above the core and the remote layer: the core is
handed the remote provider as a factory, which imports hbtui.remote (and
asyncssh) only when a remote host is first used.
"""

from __future__ import annotations

from hbtui.config import Config, load_config
from hbtui.core.hosts import RemoteHosts
from hbtui.core.passphrase import PassphraseSource
from hbtui.core.service import Service
from hbtui.paths import Paths, resolve_paths


def build_service(
    paths: Paths | None = None,
    config: Config | None = None,
    *,
    secrets_passphrase: PassphraseSource | None = None,
) -> Service:
    """The Service for this process; the state folders exist when it returns.
    `secrets_passphrase`: the front end's source (default: the environment, else the
    terminal; the dashboard passes one that never reads the terminal)."""
    paths = paths or resolve_paths()
    config = config if config is not None else load_config(paths)
    paths.ensure()

    def remote() -> RemoteHosts:
        from hbtui.remote.hosts import SshHosts

        return SshHosts(paths, config)

    return Service(paths, config, remote=remote, secrets_passphrase=secrets_passphrase)
