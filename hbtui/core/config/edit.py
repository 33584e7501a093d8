"""Changing config.toml by hand: one key (`config set KEY VALUE`) or the whole file in an
editor (`config edit`).

Either way the new file is checked by the loader's own schema before it replaces the
old one, atomically and under the config lock; a bad key or value is one line and
nothing is written. `set` changes the one value in place (tomlkit), so the file's
comments, order and other values stay as they were.
"""

from __future__ import annotations

import copy
import dataclasses
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import tomlkit
from tomlkit.exceptions import TOMLKitError

from hbtui.config import Config, ConfigError, overriding, parse_config
from hbtui.core.config.text import template
from hbtui.errors import HbtuiError, UsageError
from hbtui.paths import Paths, UnreadableFile, read_state
from hbtui.schema import Invalid, fields_of, parse_toml, plain, show
from hbtui.statefile import locked, write_atomic

Key = tuple[str, ...]


@dataclass(frozen=True)
class Setting:
    """A setting named on the command line: its place in the file and what it takes."""

    key: Key
    kind: Any  # str, int, float or bool

    @property
    def dotted(self) -> str:
        return ".".join(self.key)

    def value(self, text: str) -> object:
        """`text` as the kind of value the setting takes; as it is when it is not one,
        for the schema to say what is wanted."""
        try:
            if self.kind is bool:
                return {"true": True, "false": False}.get(text, text)
            if self.kind is int:
                return int(text)
            if self.kind is float:
                return float(text)
        except ValueError:
            pass
        return text


def setting(dotted: str) -> Setting:
    """The setting `dotted` names (`defaults.cpus`, `keymap.new`, `hosts.mac.ssh`);
    UsageError in one line when it names none."""
    parts = dotted.split(".")
    cls: type = Config
    key: list[str] = []
    while parts:
        f = next((f for f in fields_of(cls) if f.name == parts[0]), None)
        if f is None:
            break
        key.append(parts.pop(0))
        kind = f.kind
        if get_origin(kind) is dict:  # named entries: the name may hold dots of its own
            kind = get_args(kind)[1]
            cut = len(parts) - 1 if _is_table(kind) else len(parts)
            if cut < 1:
                like = f"{key[0]}.NAME" + (f".{fields_of(kind)[0].name}" if _is_table(kind) else "")
                raise UsageError(
                    f"{plain(dotted)} is a table: name one of its entries, like {like}"
                )
            key.append(".".join(parts[:cut]))
            parts = parts[cut:]
        if not _is_table(kind):
            if parts:
                break
            return Setting(tuple(key), kind)
        if not parts:
            raise UsageError(
                f"{plain(dotted)} is a table: name one of its settings, like "
                f"{plain('.'.join(key))}.{fields_of(kind)[0].name}"
            )
        cls = kind
    raise UsageError(f"no setting named {plain(dotted)} (hbtui config show --template lists them)")


def _is_table(kind: Any) -> bool:
    return dataclasses.is_dataclass(kind) and isinstance(kind, type)


@dataclass(frozen=True)
class Changed:
    """What `config set` did: the setting, its value before (None: the default) and now,
    and the variable that overrides it in this environment, if one does."""

    setting: str
    before: object
    after: object
    overridden_by: str | None


def _current(paths: Paths) -> tuple[bytes | None, dict[str, Any]]:
    """The config file's bytes (None: there is none) and its table."""
    path = paths.config_file
    try:
        data = read_state(path)
        return data, ({} if data is None else parse_toml(data))
    except (UnreadableFile, Invalid) as exc:
        reason = exc.reason if isinstance(exc, UnreadableFile) else str(exc)
        raise ConfigError(f"config {plain(str(path))}: {reason}") from None


def _bytes(paths: Paths) -> bytes | None:
    try:
        return read_state(paths.config_file)
    except UnreadableFile as exc:
        raise ConfigError(f"config {plain(str(exc))}") from None


def _put(table: dict[str, Any], key: Key, value: object, path: Path) -> None:
    node: Any = table
    for depth, part in enumerate(key[:-1]):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            where = ".".join(key[: depth + 1])
            raise ConfigError(
                f"config {plain(str(path))}: {where} must be a table, got {show(node)}"
            )
    node[key[-1]] = value


def _put_in_document(doc: tomlkit.TOMLDocument, key: Key, value: object) -> None:
    """`value` at `key` in the document, making the tables on the way (a table of named
    tables, like [hosts], as a super table: only its [hosts.NAME] headers are written)."""
    container: Any = doc
    for depth, part in enumerate(key[:-1]):
        if part not in container:
            named = depth == 0 and len(key) > 2
            container.add(part, tomlkit.table(is_super_table=named or None))
        container = container[part]
    container[key[-1]] = value


def set_value(paths: Paths, dotted: str, text: str) -> Changed:
    """Set one setting in config.toml from its text on a command line."""
    s = setting(dotted)
    value = s.value(text)
    path = paths.config_file
    paths.ensure()
    with locked(paths.locks_dir / "config.lock"):
        data, raw = _current(paths)
        changed = copy.deepcopy(raw)
        _put(changed, s.key, value, path)
        parse_config(changed, path)  # the loader's own check: a bad value is one line
        try:
            doc = tomlkit.parse(data.decode()) if data is not None else tomlkit.document()
            _put_in_document(doc, s.key, value)
            out = tomlkit.dumps(doc)
        except TOMLKitError as exc:
            raise ConfigError(
                f"config {plain(str(path))}: cannot change {s.dotted} in place "
                f"({plain(str(exc))}); hbtui config edit changes it by hand"
            ) from None
        if parse_toml(out.encode()) != changed:
            raise ConfigError(
                f"config {plain(str(path))}: cannot change {s.dotted} in place without "
                "changing more; hbtui config edit changes it by hand"
            )
        write_atomic(path, out.encode())
    before: object = raw
    for part in s.key:
        before = before.get(part) if isinstance(before, dict) else None
    return Changed(s.dotted, before, value, overriding(s.dotted))


# ---------------------------------------------------------------------------
# config edit


UNCHANGED, SAVED = "unchanged", "saved"


def edit(paths: Paths, run_editor: Callable[[Path], None], again: Callable[[str], bool]) -> str:
    """Let the user edit a copy of config.toml (the template when there is none) with
    `run_editor`, check it as the loader would, then save it atomically. An edit that
    does not load is refused in one line unless `again(problem)` says to edit it again;
    a config changed by another hbtui meanwhile is never overwritten. SAVED or UNCHANGED."""
    before = _bytes(paths)  # a file that does not load may be edited: it is how it is put right
    start = before if before is not None else template().encode()
    folder = Path(tempfile.mkdtemp(prefix="hbtui-config-"))
    draft = folder / "config.toml"
    keep = False
    try:
        write_atomic(draft, start)
        while True:
            run_editor(draft)
            data = read_state(draft)
            if data is None:
                raise HbtuiError(f"the edited copy {draft} is gone; config.toml is unchanged")
            if data == start:
                return UNCHANGED
            problem = _problem(data)
            if problem is None:
                break
            if not again(problem):
                raise ConfigError(f"{problem} (config.toml is unchanged)")
        paths.ensure()
        with locked(paths.locks_dir / "config.lock"):
            if _bytes(paths) != before:
                keep = True
                raise HbtuiError(
                    f"config.toml changed while you edited it; nothing saved (your edit is "
                    f"in {draft})"
                )
            write_atomic(paths.config_file, data)
        return SAVED
    except UnreadableFile as exc:
        raise HbtuiError(f"the edited copy {exc}; config.toml is unchanged") from None
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _problem(data: bytes) -> str | None:
    """Why the edited text would not load, in one line, or None."""
    try:
        parse_config(parse_toml(data))
    except Invalid as exc:
        return f"your edit: {exc}"
    except ConfigError as exc:
        return f"your edit: {exc.message.removeprefix('config: ')}"
    return None
