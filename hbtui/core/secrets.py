"""The secret store: credential values, kept where the OS keeps secrets.

The OS keyring (macOS Keychain, the Secret Service on a Linux desktop) through
the `keyring` package when it has a usable backend; otherwise, on a headless
server, one file in the data folder encrypted with our HBX format under a
passphrase (`HBTUI_SECRETS_PASSPHRASE` or a prompt, asked once per process).
An index beside it lists the names and where each is kept, never a value.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from hbtui.config import Config
from hbtui.core.registry import utc_now
from hbtui.errors import UsageError
from hbtui.paths import Paths, make_folder

SERVICE = "hbtui"
KEYRING = "keyring"
FILE = "file"


class SecretsError(UsageError):
    pass


class Store(Protocol):
    kind: str  # KEYRING or FILE
    where: str  # for people: "keyring (SecretService)", "file /path/secrets.hbx"

    def get(self, name: str) -> str | None: ...

    def put(self, name: str, value: str) -> None: ...

    def delete(self, name: str) -> None: ...


class KeyringStore:
    kind = KEYRING

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.where = f"keyring ({type(backend).__name__})"

    def get(self, name: str) -> str | None:
        value = self.backend.get_password(SERVICE, name)
        return value if isinstance(value, str) else None

    def put(self, name: str, value: str) -> None:
        self.backend.set_password(SERVICE, name, value)

    def delete(self, name: str) -> None:
        import keyring.errors

        try:
            self.backend.delete_password(SERVICE, name)
        except keyring.errors.PasswordDeleteError:
            pass


class FileStore:
    """Every value in one HBX file (a JSON object inside), rewritten whole on a change."""

    kind = FILE

    def __init__(self, path: Path, passphrase: Callable[[bool], bytes]) -> None:
        self.path = path
        self.where = f"file {path}"
        self._passphrase = passphrase  # (confirm) -> bytes
        self._values: dict[str, str] | None = None
        self._key: bytes | None = None

    def _load(self) -> dict[str, str]:
        if self._values is not None:
            return self._values
        if not self.path.exists():
            self._values = {}
            return self._values
        return self.unlock(self._passphrase(False))

    def unlock(self, key: bytes) -> dict[str, str]:
        """Read the file with `key` (kept for the next write); SecretsError if it fails."""
        from hbtui.archive import ArchiveError, WrongPassphrase, decrypt_stream

        self._key = key
        out = io.BytesIO()
        try:
            with open(self.path, "rb") as fh:
                decrypt_stream(fh, out, self._key)
            raw = json.loads(out.getvalue() or b"{}")
            if not isinstance(raw, dict):
                raise ValueError("not an object")
        except (ArchiveError, ValueError) as exc:
            if isinstance(exc, WrongPassphrase):
                raise SecretsError(
                    f"the secrets file {self.path} cannot be read: {exc}; "
                    "check HBTUI_SECRETS_PASSPHRASE"
                ) from None
            raise SecretsError(
                f"the secrets file {self.path} cannot be read: {exc}",
                hint="restore it from a copy, or move it away and set the secrets again",
            ) from None
        self._values = {k: v for k, v in raw.items() if isinstance(v, str)}
        return self._values

    def _save(self, values: dict[str, str]) -> None:
        from hbtui.archive import encrypt_stream

        if self._key is None:
            self._key = self._passphrase(not self.path.exists())
        out = io.BytesIO()
        encrypt_stream(io.BytesIO(json.dumps(values).encode()), out, self._key)
        make_folder(self.path.parent, 0o700)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, out.getvalue())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self._values = values

    def get(self, name: str) -> str | None:
        return self._load().get(name)

    def put(self, name: str, value: str) -> None:
        self._save({**self._load(), name: value})

    def delete(self, name: str) -> None:
        values = dict(self._load())
        if values.pop(name, None) is not None:
            self._save(values)


def usable_keyring() -> Any | None:
    """The keyring backend, if one really stores secrets here (not the fail or null one)."""
    try:
        import keyring
        from keyring.backends import chainer, fail
    except ImportError:
        return None
    backend = keyring.get_keyring()
    if isinstance(backend, fail.Keyring):
        return None
    if isinstance(backend, chainer.ChainerBackend) and not backend.backends:
        return None
    if getattr(backend, "priority", 1) < 1 and type(backend).__module__.startswith("keyring."):
        return None
    return backend


@dataclass(frozen=True)
class SecretInfo:
    """What `secrets ls` shows of one secret: never its value."""

    name: str
    store: str
    set: str
    boxes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "store": self.store, "set": self.set, "boxes": list(self.boxes)}


class Secrets:
    """Names in an index file; values in the store each was put in."""

    def __init__(self, paths: Paths, config: Config, passphrase: Callable[[bool], bytes]) -> None:
        self.index_path = paths.data_dir / "secrets.json"
        self.file_path = paths.data_dir / "secrets.hbx"
        self.config = config
        self._passphrase = passphrase
        self._stores: dict[str, Store] = {}

    def _index(self) -> dict[str, dict[str, str]]:
        try:
            raw = json.loads(self.index_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise SecretsError(f"{self.index_path}: cannot be read ({exc})") from None
        if not isinstance(raw, dict):
            raise SecretsError(f"{self.index_path}: cannot be read (not a JSON object)")
        return {k: v for k, v in raw.items() if isinstance(v, dict)}

    def _write_index(self, index: dict[str, dict[str, str]]) -> None:
        make_folder(self.index_path.parent, 0o700)
        tmp = self.index_path.with_name(f".{self.index_path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, self.index_path)

    def store(self, kind: str | None = None) -> Store:
        """The store of that kind, or the one new secrets go to (the config's choice)."""
        setting = self.config.secrets.store
        if kind is None:
            if setting == "auto":
                kind = KEYRING if usable_keyring() is not None else FILE
            else:
                kind = setting
        if kind not in self._stores:
            if kind == KEYRING:
                backend = usable_keyring()
                if backend is None:
                    raise SecretsError(
                        'no usable OS keyring here; set [secrets] store = "file" '
                        '(or "auto") to keep secrets in an encrypted file'
                    )
                self._stores[kind] = KeyringStore(backend)
            else:
                self._stores[kind] = FileStore(self.file_path, self._passphrase)
        return self._stores[kind]

    def unlock(self, passphrase: bytes) -> None:
        """Open the encrypted file with a passphrase a front end asked for itself."""
        store = self.store(FILE)
        assert isinstance(store, FileStore)
        if store.path.exists():
            store.unlock(passphrase)

    def names(self) -> list[str]:
        return sorted(self._index())

    def listing(self, used: dict[str, list[str]]) -> list[SecretInfo]:
        return [
            SecretInfo(
                name, entry.get("store", ""), entry.get("set", ""), tuple(used.get(name, ()))
            )
            for name, entry in sorted(self._index().items())
        ]

    def put(self, name: str, value: str) -> SecretInfo:
        if not value:
            raise SecretsError(f"the value of {name!r} is empty; nothing was stored")
        if "\n" in value or "\0" in value:
            raise SecretsError(f"the value of {name!r} holds a line break; store one line")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise SecretsError(
                f"the value of {name!r} is not UTF-8 text; nothing was stored"
            ) from None
        index = self._index()
        old = index.get(name, {}).get("store")
        target = self.store()
        target.put(name, value)
        if old and old != target.kind:
            self.store(old).delete(name)
        index[name] = {"store": target.kind, "set": utc_now()}
        self._write_index(index)
        return SecretInfo(name, target.kind, index[name]["set"])

    def get(self, name: str) -> str:
        entry = self._index().get(name)
        if entry is None:
            raise SecretsError(f"no secret {name!r}; store it with: hbtui secrets set {name}")
        value = self.store(entry.get("store")).get(name)
        if value is None:
            raise SecretsError(
                f"the secret {name!r} is listed but its {entry.get('store')} has no value; "
                f"store it again with: hbtui secrets set {name}"
            )
        return value

    def remove(self, name: str) -> None:
        index = self._index()
        entry = index.pop(name, None)
        if entry is None:
            raise SecretsError(f"no secret {name!r} (see: hbtui secrets ls)")
        self.store(entry.get("store")).delete(name)
        self._write_index(index)
