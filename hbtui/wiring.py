"""Building the Service both front ends use: paths, config, and the remote layer.

This is the one module above the core and the remote layer: the core is
handed the remote provider as a factory, which imports hbtui.remote (and
asyncssh) only when a remote host is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbtui.config import Config, load_config
from hbtui.errors import HbtuiError
from hbtui.paths import Paths, resolve_paths

if TYPE_CHECKING:
    from hbtui.core.foundation.hosts import RemoteHosts
    from hbtui.core.keys.passphrase import PassphraseSource
    from hbtui.core.service import Service
    from hbtui.engine import Engine
    from hbtui.engine.early import EarlyListing

# The core loads in build_service: EarlyStart must come before the heavy imports.


def build_service(
    paths: Paths | None = None,
    config: Config | None = None,
    *,
    secrets_passphrase: PassphraseSource | None = None,
    early: EarlyStart | None = None,
) -> Service:
    """The Service for this process; the state folders exist when it returns.
    `secrets_passphrase`: the front end's source (default: the environment, else the
    terminal; the dashboard passes one that never reads the terminal)."""
    from hbtui.core.service import Service

    paths = paths or resolve_paths()
    config = config if config is not None else load_config(paths)
    paths.ensure()

    def remote() -> RemoteHosts:
        from hbtui.remote.hosts import SshHosts

        return SshHosts(paths, config)

    return Service(
        paths,
        config,
        remote=remote,
        secrets_passphrase=secrets_passphrase,
        local_engine=early.engine if early else None,
    )


class EarlyStart:
    """This machine's engine, made before the dashboard imports its screens, with its first
    listing already running (hbtui.engine.early); the Service built later takes it over."""

    def __init__(self, paths: Paths, config: Config) -> None:
        from hbtui.core.foundation.hosts import local_engine

        self.engine: Engine | None = None
        self._listing: EarlyListing | None = None
        try:
            engine = local_engine(paths, config)
            self._listing = engine.start_listing()
        except (HbtuiError, OSError):
            return  # no engine here: the Service says so, as it always has
        self.engine = engine

    def close(self) -> None:
        """End the listing if nobody took it (the dashboard quit before its first row)."""
        if self._listing is not None:
            self._listing.close()
