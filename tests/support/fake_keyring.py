"""A keyring backend for tests: the OS keyring this machine lacks, kept in a JSON file
named by FAKE_KEYRING_FILE (outside hbtui's state home, as a real keyring would be).
Selected with PYTHON_KEYRING_BACKEND=support.fake_keyring.FileKeyring and tests/ on PYTHONPATH."""

from __future__ import annotations

import json
import os

from keyring.backend import KeyringBackend
from keyring.errors import KeyringLocked, PasswordDeleteError, PasswordSetError


class FileKeyring(KeyringBackend):
    priority = 10  # type: ignore[assignment]

    def _load(self) -> dict[str, str]:
        try:
            with open(os.environ["FAKE_KEYRING_FILE"]) as fh:
                return json.load(fh)
        except FileNotFoundError:
            return {}

    def _save(self, data: dict[str, str]) -> None:
        with open(os.environ["FAKE_KEYRING_FILE"], "w") as fh:
            json.dump(data, fh)

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}/{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        self._save({**self._load(), f"{service}/{username}": password})

    def delete_password(self, service: str, username: str) -> None:
        data = self._load()
        if data.pop(f"{service}/{username}", None) is None:
            raise PasswordDeleteError(username)
        self._save(data)


class LockedKeyring(FileKeyring):
    """A keyring that is there but locked: every call raises KeyringLocked."""

    def get_password(self, service: str, username: str) -> str | None:
        raise KeyringLocked("Failed to unlock the collection!")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise KeyringLocked("Failed to unlock the collection!")

    def delete_password(self, service: str, username: str) -> None:
        raise KeyringLocked("Failed to unlock the collection!")


class RefusingKeyring(FileKeyring):
    """A keyring that refuses to store (a full or read-only store)."""

    def set_password(self, service: str, username: str, password: str) -> None:
        raise PasswordSetError("the collection is read-only")


class CrashingKeyring(FileKeyring):
    """A keyring whose platform layer fails with an error of its own (D-Bus gone)."""

    def get_password(self, service: str, username: str) -> str | None:
        raise ConnectionError("org.freedesktop.DBus.Error.ServiceUnknown")

    def delete_password(self, service: str, username: str) -> None:
        raise ConnectionError("org.freedesktop.DBus.Error.ServiceUnknown")
