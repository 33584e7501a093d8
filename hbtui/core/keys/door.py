"""Keys as the front ends reach them (`service.secrets`): the credential presets a box can
bind, and the secrets stored for them (names and where each is kept, never a value out).
"""

from __future__ import annotations

from hbtui.config import Config, split_list
from hbtui.core.foundation.registry import Registry
from hbtui.core.keys import credentials as creds
from hbtui.core.keys.credentials import Preset
from hbtui.core.keys.secrets import SecretInfo, SecretStore
from hbtui.names import LOCAL


class Secrets:
    """The presets, and the stored secrets with the boxes that use each."""

    def __init__(self, store: SecretStore, config: Config, registry: Registry) -> None:
        self._store = store
        self._config = config
        self._registry = registry

    def presets(self) -> list[Preset]:
        """Every credential preset (built in and configured), by name."""
        return sorted(creds.presets(self._config).values(), key=lambda p: p.name)

    def preset(self, name: str) -> Preset:
        """The preset of that name; a one-line error naming the known ones if none."""
        return creds.preset(self._config, name)

    def unlock(self, passphrase: bytes) -> None:
        """Open the encrypted secrets file with a passphrase the front end asked for
        (the dashboard's dialog); SecretsError when it does not open it."""
        self._store.unlock(passphrase)

    def listing(self) -> list[SecretInfo]:
        """Every stored secret: its name, where it is kept, the boxes using it (no value)."""
        used: dict[str, list[str]] = {}
        for record in self._registry.read():
            for name in split_list(record.credentials):
                where = "" if record.host == LOCAL else f"@{record.host}"
                used.setdefault(name, []).append(record.name + where)
        return self._store.listing(used)

    def set(self, name: str, value: str) -> SecretInfo:
        """Store a secret's value, for a preset only (what a box can use)."""
        self.preset(name)
        return self._store.put(name, value)

    def remove(self, name: str) -> tuple[list[str], str]:
        """Forget a secret: the boxes that used it (they will not start without it), and
        why its value stays in its store ("" when it was deleted)."""
        users = next((s.boxes for s in self.listing() if s.name == name), ())
        left = self._store.remove(name)
        return list(users), left
