"""Remote hosts over SSH: the core's `RemoteHosts` implemented with asyncssh.

- `SshHosts(paths, config)`: remote `Host`s (engine over an `SshRunner`,
  busy-port probe, HTTP check, web forward), `hosts check`, host-key trust.
- `SshRunner`: the engine Runner protocol over one shared connection.

hbtui.wiring hands an SshHosts factory to the core; nothing else imports
this package, and nothing here imports Textual.
"""
