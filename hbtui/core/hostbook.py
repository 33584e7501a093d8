"""`hbtui hosts`: the remote hosts the user keeps in the config.

Adding and removing change the config (and, with --force, forget the rows
of a removed host's boxes); checking and trusting go through the remote
provider the HostPool makes, so the SSH library loads only for them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hbtui.config import Config, HostSettings, editing_config, parse_port_range
from hbtui.core.foundation.hosts import HostKeyOffer, HostPool, HostReport
from hbtui.core.foundation.registry import Registry
from hbtui.errors import HbtuiError, UsageError
from hbtui.names import check_host_name
from hbtui.paths import Paths
from hbtui.target import parse_target


class FingerprintMismatch(HbtuiError):
    """The host presents another key than the fingerprint the user gave."""

    exit_code = 3


def normal_fingerprint(text: str) -> str:
    """`SHA256:abc=`, `sha256:abc` and `abc` all name the same key."""
    text = text.strip()
    if text.upper().startswith("SHA256:"):
        text = text[len("SHA256:") :]
    return "SHA256:" + text.rstrip("=")


class HostBook:
    """The hosts as the front ends reach them (`service.hosts`): this machine and the
    remote hosts of the config, each checked by name before anything is done to it."""

    def __init__(self, paths: Paths, config: Config, hosts: HostPool, registry: Registry) -> None:
        self.paths = paths
        self.config = config
        self.hosts = hosts
        self.registry = registry

    def settings(self, name: str) -> HostSettings:
        """A remote host's settings; a one-line error for a name the config lacks."""
        found = self.config.hosts.get(name)
        if found is None:
            raise UsageError(f"unknown host {name!r}; see: hbtui hosts ls")
        return found

    def names(self) -> list[str]:
        """Every host a box can be on: this machine first, then the config's."""
        return self.hosts.names()

    def listing(self) -> dict[str, HostSettings]:
        """The remote hosts of the config, by name."""
        return dict(sorted(self.config.hosts.items()))

    def port_range(self, name: str) -> str:
        """The host's port range as LO-HI (its own, or the global one)."""
        own = self.settings(name).ports
        return own or f"{self.config.ports.low}-{self.config.ports.high}"

    def add(
        self,
        name: str,
        *,
        ssh: str,
        identity: str = "",
        smolvm: str = "",
        state_dir: str = "",
        ports: str = "",
    ) -> HostSettings:
        """The host as asked (as typed), checked, with its target and key file made
        exact, written into config.toml."""
        asked = HostSettings(
            ssh=ssh, identity=identity, smolvm=smolvm, state_dir=state_dir, ports=ports
        )
        check_host_name(name)
        if name in self.config.hosts:
            raise UsageError(
                f"host {name!r} exists already; remove it first: hbtui hosts rm {name}"
            )
        target = parse_target(ssh)
        key_file = ""
        if identity:
            path = Path(identity).expanduser().absolute()
            if not path.exists():
                raise UsageError(f"--identity {identity}: no such file")
            problem = self.hosts.remote().identity_problem(str(path))
            if problem:
                raise UsageError(f"--identity: {problem}")
            key_file = str(path)
        if ports:
            parse_port_range(ports)
        settings = replace(asked, ssh=str(target), identity=key_file)
        with editing_config(self.paths) as fresh:
            if name in fresh.hosts:  # added by another process since this one started
                raise UsageError(
                    f"host {name!r} exists already; remove it first: hbtui hosts rm {name}"
                )
            fresh.hosts[name] = settings
        self._adopt(fresh)
        return settings

    def _adopt(self, fresh: Config) -> None:
        """The hosts as written, in the Config this process shares with its HostPool."""
        self.config.hosts.clear()
        self.config.hosts.update(fresh.hosts)

    async def remove(self, name: str, *, force: bool = False) -> list[str]:
        """Forget the host; with `force` also its boxes' rows. Returns those boxes."""
        self.settings(name)
        boxes = [r.name for r in self.registry.read().on_host(name)]
        if boxes and not force:
            raise UsageError(
                f"host {name!r} still has boxes ({', '.join(boxes)}); remove them "
                f"first, or forget the host and its rows with --force"
            )
        if boxes:
            async with self.registry.transaction() as rows:
                for box in boxes:
                    rows.remove(box, name)
        with editing_config(self.paths) as fresh:
            fresh.hosts.pop(name, None)
        self._adopt(fresh)
        self.hosts.forget(name)
        return boxes

    async def check(self, name: str) -> HostReport:
        """Reach the host over SSH and say what works there (`hbtui hosts check`)."""
        self.settings(name)
        return await self.hosts.remote().check(name)

    async def offered_key(self, name: str) -> HostKeyOffer:
        """The key the host presents, for the user to trust or not."""
        self.settings(name)
        return await self.hosts.remote().offered_key(name)

    def trust(self, offer: HostKeyOffer, *, expected: str | None = None) -> None:
        """Trust the offered key; with `expected`, only if it has that fingerprint."""
        if expected is not None and normal_fingerprint(expected) != offer.fingerprint:
            raise FingerprintMismatch(
                f"REFUSED: host {offer.host} presents {offer.fingerprint}, not the "
                f"{expected} you gave; nothing was trusted"
            )
        self.hosts.remote().trust(offer)
