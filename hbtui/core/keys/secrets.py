"""The secret store: credential values, kept where the OS keeps secrets.

The OS keyring (macOS Keychain, the Secret Service on a Linux desktop) through
the `keyring` package when it has a usable backend; otherwise, on a headless
server, one file in the data folder encrypted with our HBX format under a
passphrase (`HBTUI_SECRETS_PASSPHRASE` or a prompt, asked once per process).
An index beside it lists the names and where each is kept, never a value.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from hbtui.config import Config
from hbtui.core.foundation.registry import utc_now
from hbtui.errors import UsageError
from hbtui.paths import Paths, make_folder, read_state
from hbtui.statefile import locked, write_atomic

if TYPE_CHECKING:
    from hbtui.archive import Kek

SERVICE = "hbtui"
KEYRING = "keyring"
FILE = "file"


class SecretsError(UsageError):
    pass


# A box's engine gets each value in one environment variable, which Linux caps at
# 128 KiB (name included); every value of a box shares the whole environment's limit too.
VALUE_MAX = 64 * 1024


def value_problem(value: str) -> str | None:
    """What is wrong with a secret's value, said after "the value of NAME", or None."""
    if not value:
        return "is empty"
    if "\0" in value:
        return "holds a NUL byte, which no environment variable can carry"
    if "\n" in value or "\r" in value:
        return "holds a line break (LF or CR); store one line"
    control = next((c for c in value if not c.isprintable() and c != "\t"), None)
    if control is not None:
        return f"holds a control character (U+{ord(control):04X}); a key is printable text"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not UTF-8 text"
    if size > VALUE_MAX:
        return (
            f"is {size} bytes; at most {VALUE_MAX} (a box's engine gets it in one environment "
            "variable, which Linux caps at 128 KiB)"
        )
    return None


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
        try:
            value = self.backend.get_password(SERVICE, name)
        except Exception as exc:  # a backend raises what its platform raises (D-Bus, ...)
            raise keyring_failure(exc, self.where, f"read {name!r}", existing=name) from None
        return value if isinstance(value, str) else None

    def put(self, name: str, value: str) -> None:
        try:
            self.backend.set_password(SERVICE, name, value)
        except Exception as exc:
            raise keyring_failure(exc, self.where, f"store {name!r}") from None

    def delete(self, name: str) -> None:
        import keyring.errors

        try:
            self.backend.delete_password(SERVICE, name)
        except keyring.errors.PasswordDeleteError:
            pass  # not there: nothing to delete
        except Exception as exc:
            raise keyring_failure(exc, self.where, f"delete {name!r}", existing=name) from None


def keyring_failure(exc: Exception, where: str, doing: str, *, existing: str = "") -> SecretsError:
    """Anything a keyring backend raised, as one line with what to do. For a secret
    already kept there (`existing`), moving to the file does not help until it is stored
    again; for a new one it does."""
    import keyring.errors

    detail = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, keyring.errors.KeyringLocked):
        problem = f"the {where} is locked, so hbtui could not {doing}"
        fix = "unlock it (log in to the desktop session) and try again"
    else:
        problem = f"the {where} could not {doing}: {detail}"
        fix = "check the keyring (is its service running?) and try again"
    if existing:
        fix += f", or store the secret again in the file: hbtui secrets set {existing}"
    else:
        fix += ', or keep secrets in an encrypted file: set [secrets] store = "file"'
    return SecretsError(f"{problem}; {fix}")


class FileStore:
    """Every value in one HBX file (a JSON object inside), rewritten whole on a change."""

    kind = FILE

    def __init__(self, path: Path, passphrase: Callable[[bool], bytes]) -> None:
        self.path = path
        self.where = f"file {path}"
        self._passphrase = passphrase  # (confirm) -> bytes
        self._values: dict[str, str] | None = None
        self._key: bytes | None = None
        # What the KDF gave for the file this process last read or wrote: a rewrite
        # wraps its new key under it (Argon2id ran twice a `secrets set`, ~0.2 s each).
        self._kek: Kek | None = None

    def _load(self) -> dict[str, str]:
        if self._values is not None:
            return self._values
        sealed = read_state(self.path)
        if sealed is None:
            self._values = {}
            return self._values
        # A key this process already has (asked once, or given by `unlock`) reads it again.
        return self.unlock(self._key or self._passphrase(False), sealed)

    def unlock(self, key: bytes, sealed: bytes | None = None) -> dict[str, str]:
        """Read the file with `key` (kept for the next write); SecretsError if it fails."""
        from hbtui.archive import ArchiveError, Decryptor, WrongPassphrase

        if sealed is None:
            sealed = read_state(self.path) or b""
        out = io.BytesIO()
        try:
            opened = Decryptor(io.BytesIO(sealed), key)
            for chunk in opened.chunks():
                out.write(chunk)
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
        self._key = key  # only a key that opened the file is kept
        self._kek = opened.kek
        self._values = {k: v for k, v in raw.items() if isinstance(v, str)}
        return self._values

    def _save(self, values: dict[str, str]) -> None:
        from hbtui.archive import DEFAULT_KDF, Encryptor

        if self._key is None:
            self._key = self._passphrase(not self.path.exists())
        out = io.BytesIO()
        # Under the last key only while the KDF it came from is today's: older parameters
        # are replaced by today's at the next write.
        kek = self._kek
        sealing = Encryptor(out, kek if kek is not None and kek.kdf == DEFAULT_KDF else self._key)
        sealing.feed(json.dumps(values).encode())
        sealing.finish()
        make_folder(self.path.parent, 0o700)
        write_atomic(self.path, out.getvalue())
        self._values = values
        self._kek = sealing.kek

    def reread(self) -> None:
        """Read the file again on next use: another process may have changed it."""
        self._values = None

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
    try:
        backend = keyring.get_keyring()
    except Exception:  # a backend that cannot even start is no keyring
        return None
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
    left_behind: str = ""  # set: why a copy in its former store could not be deleted

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "store": self.store, "set": self.set, "boxes": list(self.boxes)}


class SecretStore:
    """Names in an index file; values in the store each was put in."""

    def __init__(self, paths: Paths, config: Config, passphrase: Callable[[bool], bytes]) -> None:
        self.index_path = paths.data_dir / "secrets.json"
        self.file_path = paths.data_dir / "secrets.hbx"
        self.lock_path = paths.locks_dir / "secrets.lock"
        self.config = config
        self._passphrase = passphrase
        self._stores: dict[str, Store] = {}

    def _index(self) -> dict[str, dict[str, str]]:
        try:
            data = read_state(self.index_path)
            if data is None:
                return {}
            raw = json.loads(data.decode("utf-8"))
        except ValueError as exc:
            raise SecretsError(f"{self.index_path}: cannot be read ({exc})") from None
        if not isinstance(raw, dict):
            raise SecretsError(f"{self.index_path}: cannot be read (not a JSON object)")
        damaged = sorted(k for k, v in raw.items() if not isinstance(v, dict))
        if damaged:  # dropping it would orphan its value in the store at the next write
            raise SecretsError(
                f"{self.index_path}: cannot be read (the entry {damaged[0]!r} is not an object;"
                " restore the file from a copy)"
            )
        return raw

    def _write_index(self, index: dict[str, dict[str, str]]) -> None:
        make_folder(self.index_path.parent, 0o700)
        write_atomic(self.index_path, (json.dumps(index, indent=2, sort_keys=True) + "\n").encode())

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """One change of the index and a store at a time, across processes, each read
        fresh: two `secrets set` at once keep both secrets."""
        with locked(self.lock_path):
            for store in self._stores.values():
                if isinstance(store, FileStore):
                    store.reread()
            yield

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
                    raise self._no_keyring(setting)
                self._stores[kind] = KeyringStore(backend)
            else:
                self._stores[kind] = FileStore(self.file_path, self._passphrase)
        return self._stores[kind]

    @staticmethod
    def _no_keyring(setting: str) -> SecretsError:
        """No keyring here: what to do depends on whether the config asks for one."""
        if setting == KEYRING:
            return SecretsError(
                'no usable OS keyring here; set [secrets] store = "auto" (or "file") to keep '
                "secrets in an encrypted file"
            )
        return SecretsError(
            "the secret is kept in the OS keyring, which is not usable here now; make the "
            "keyring usable again, or store the secret anew (it then goes to the encrypted file)"
        )

    def _delete_value(self, name: str, kind: str | None) -> str:
        """Delete a secret's value from its store; "" when done, else where it stays and
        why (a keyring not usable now must not keep its name from being forgotten)."""
        try:
            self.store(kind).delete(name)
        except SecretsError as exc:
            return exc.message
        return ""

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
        problem = value_problem(value)
        if problem:
            raise SecretsError(f"the value of {name!r} {problem}; nothing was stored")
        with self._changing():
            index = self._index()
            old = index.get(name, {}).get("store")
            target = self.store()
            target.put(name, value)
            left = self._delete_value(name, old) if old and old != target.kind else ""
            index[name] = {"store": target.kind, "set": utc_now()}
            self._write_index(index)
        return SecretInfo(name, target.kind, index[name]["set"], left_behind=left)

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

    def remove(self, name: str) -> str:
        """Forget a secret; "" when its value is gone too, else why it stays where it is."""
        with self._changing():
            index = self._index()
            entry = index.pop(name, None)
            if entry is None:
                raise SecretsError(f"no secret {name!r} (see: hbtui secrets ls)")
            left = self._delete_value(name, entry.get("store"))
            self._write_index(index)
        return left
