"""Dataclasses as the schema of TOML tables: a field's type says what kind of value it
takes and its `rule(...)` metadata what range; `from_table` checks a parsed table against
them, naming the key of the first wrong value. It serves the user's settings
(hbtui.config) and the registry's rows (hbtui.core.foundation.registry).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, get_args, get_origin, get_type_hints

from hbtui.paths import UnreadableFile, read_state

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


class Invalid(Exception):
    """One problem in a table, worded from the table's root (`defaults.cpus must be ...`).

    Never leaves a reader: each turns it into its own HbtuiError naming the file.
    """


@dataclass(frozen=True)
class Rule:
    """What one field accepts beyond its type (the dataclass annotation).

    Numbers: `low`..`high` inclusive (`above`: low itself excluded); strings:
    `nonempty`, `choices`, `check` (returns why a value is wrong, or None);
    tables (dict fields): `keys` checks each key like `check`. `desc` replaces
    the generated wording of what is wanted, `note` is added to it, and
    `missing` words the error for a required field that is absent. `doc` says
    what the setting is for: the comment beside it in the config's template.
    """

    low: float | None = None
    high: float | None = None
    above: bool = False
    nonempty: bool = False
    choices: tuple[str, ...] = ()
    check: Callable[[str], str | None] | None = None
    keys: Callable[[str], str | None] | None = None
    desc: str = ""
    note: str = ""
    missing: str = ""
    doc: str = ""


NO_RULE = Rule()


def rule(**kwargs: Any) -> dict[str, Rule]:
    """Field metadata: `port: int = field(default=0, metadata=rule(low=1024, high=65535))`."""
    return {"rule": Rule(**kwargs)}


def show(value: object, limit: int = 60) -> str:
    """A value as an error message shows it: TOML-like, one line, not too long."""
    if isinstance(value, str):
        text = value if len(value) <= limit else value[:limit] + "..."
        return '"' + plain(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return (
            str(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
        )
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, datetime):
        return f"a date-time ({value.isoformat()})"
    if isinstance(value, date):
        return f"a date ({value.isoformat()})"
    if isinstance(value, time):
        return f"a time ({value.isoformat()})"
    return f"a {type(value).__name__}"


def plain(text: str) -> str:
    """`text` with anything unprintable (line breaks above all) escaped, so it stays one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


@dataclass(frozen=True)
class Field:
    """One field of a schema: its name, kind and rule, and whether a table must have it."""

    name: str
    kind: Any  # str, int, float, bool, a dataclass, or dict[str, one of those]
    rule: Rule
    required: bool


@functools.cache
def fields_of(cls: type) -> tuple[Field, ...]:
    """The fields of the dataclass `cls` as its tables have them, in order."""
    hints = get_type_hints(cls)
    return tuple(
        Field(
            f.name,
            hints[f.name],
            f.metadata.get("rule", NO_RULE),
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
        if f.init
    )


def describe(kind: Any, r: Rule) -> str:
    """What a field wants, in words: `an integer 1024-65535`."""
    if r.desc:
        text = r.desc
    elif r.choices:
        text = "one of " + ", ".join(show(c) for c in r.choices)
    elif kind is bool:
        text = "true or false"
    elif kind is str:
        text = "a non-empty string" if r.nonempty else "a string"
    elif kind is int or kind is float:
        text = "an integer" if kind is int else "a number"
        if r.low is not None and r.high is not None and not r.above:
            text += f" {_number(r.low)}-{_number(r.high)}"
        elif r.low is not None:
            text += f" above {_number(r.low)}" if r.above else f" of at least {_number(r.low)}"
            if r.high is not None:
                text += f" and at most {_number(r.high)}"
        elif r.high is not None:
            text += f" of at most {_number(r.high)}"
    else:
        text = "a table"
    return f"{text} ({r.note})" if r.note else text


def _scalar(kind: Any, r: Rule, value: object, where: str) -> object:  # noqa: C901 (named in pyproject.toml)
    """`value` checked against a scalar kind and its rule (ints are taken for floats)."""

    def wrong(problem: str | None = None) -> Invalid:
        why = f" ({problem})" if problem else ""
        return Invalid(f"{where} must be {describe(kind, r)}, got {show(value)}{why}")

    if kind is bool:
        if not isinstance(value, bool):
            raise wrong()
        return value
    if kind is int or kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise wrong()
        if kind is int and not isinstance(value, int):
            raise wrong()
        if isinstance(value, float) and not math.isfinite(value):  # nan passes any comparison
            raise wrong()
        if r.low is not None and (value <= r.low if r.above else value < r.low):
            raise wrong()
        if r.high is not None and value > r.high:
            raise wrong()
        if kind is float:
            try:
                return float(value)
            except OverflowError:  # an int past what a float holds
                raise wrong() from None
        return value
    if kind is str:
        if not isinstance(value, str) or (r.nonempty and not value):
            raise wrong()
        if r.choices and value not in r.choices:
            raise wrong()
        problem = r.check(value) if r.check is not None else None
        if problem is not None:
            raise wrong(problem)
        return value
    raise TypeError(f"no rule for fields of type {kind!r}")  # a schema bug, not bad data


def _value(kind: Any, r: Rule, value: object, where: str) -> object:
    if dataclasses.is_dataclass(kind) and isinstance(kind, type):
        return from_table(kind, value, where)
    if get_origin(kind) is dict:
        _, item_kind = get_args(kind)
        if not isinstance(value, dict):
            raise Invalid(f"{where} must be a table, got {show(value)}")
        items = {}
        for key, item in value.items():
            problem = r.keys(key) if r.keys is not None else None
            if problem is not None:
                raise Invalid(f"{where}.{plain(key)}: {problem}")
            item_rule = NO_RULE if dataclasses.is_dataclass(item_kind) else r
            items[key] = _value(item_kind, item_rule, item, f"{where}.{plain(key)}")
        return items
    return _scalar(kind, r, value, where)


T = TypeVar("T", bound="DataclassInstance")


def from_table(
    cls: type[T], raw: object, where: str = "", given: Mapping[str, object] | None = None
) -> T:
    """An instance of the dataclass `cls` from a parsed TOML table, every field checked.

    `where` is the table's dotted name in messages; `given` fields do not come
    from the table (a registry row's name and host are its keys) but are
    checked by their rules all the same. A dataclass may add a check across
    its fields as a method `problem(self) -> str | None`. Raises Invalid.
    """
    if not isinstance(raw, dict):
        raise Invalid(f"{where or 'the file'} must be a table, got {show(raw)}")
    given = given or {}
    prefix = f"{where}." if where else ""
    schema = fields_of(cls)
    known = {f.name for f in schema} - set(given)
    unknown = sorted(k for k in raw if k not in known)
    if unknown:
        raise Invalid(f"unknown key {prefix}{plain(unknown[0])}")
    values: dict[str, object] = {}
    for f in schema:
        if f.name in given:
            values[f.name] = _value(f.kind, f.rule, given[f.name], f"{prefix}{f.name}")
        elif f.name in raw:
            values[f.name] = _value(f.kind, f.rule, raw[f.name], f"{prefix}{f.name}")
        elif f.required:
            missing = f.rule.missing or f"needs a {f.name} key"
            raise Invalid(f"{where} {missing}" if where else missing)
    obj = cls(**values)
    check: Callable[[], str | None] | None = getattr(obj, "problem", None)
    problem = check() if check is not None else None
    if problem is not None:
        raise Invalid(f"{where}: {problem}" if where else problem)
    return obj


def to_table(obj: DataclassInstance) -> dict[str, Any]:
    """The dataclass as a plain table, as from_table reads it back."""
    return asdict(obj)


def read_toml(path: Path) -> dict[str, Any] | None:
    """The parsed file, or None when there is none; Invalid when it cannot be read or parsed.
    Only a regular file of sane size is read (`paths.read_state`)."""
    try:
        data = read_state(path)
    except UnreadableFile as exc:
        raise Invalid(exc.reason) from None
    return None if data is None else parse_toml(data)


def parse_toml(data: bytes) -> dict[str, Any]:
    """The table a TOML file's bytes hold; Invalid saying why when they hold none."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Invalid(
            f"not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise Invalid(f"not valid TOML: {plain(str(exc))}") from None
    except ValueError:  # int() refusing thousands of digits
        raise Invalid("not valid TOML: a number with too many digits") from None
    except RecursionError:  # arrays or tables nested too deeply for the parser
        raise Invalid("not valid TOML: nested too deeply") from None
