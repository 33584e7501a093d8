"""config.toml as text for people: the commented template of every setting, and the
settings in force, each marked with where its value comes from.

Both are rendered from the schema (the dataclasses in hbtui.config, each field's `doc`),
so the template `hbtui config show --template` prints, the one docs/boxes.md shows and
the settings the loader accepts are one list. Both are valid TOML.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args, get_origin

import tomli_w

from hbtui.config import ENVIRONMENT, Config, overriding
from hbtui.schema import Field, fields_of, show, to_table

Key = tuple[str, ...]
ALIGN_MAX = 36  # a line longer than this does not push its table's comments further right

TEMPLATE_HEAD = (
    "# config.toml: hbtui's settings (hbtui config path prints where it is). Every key has",
    "# a default, so any may be left out; hbtui config show prints the settings in force.",
)


@dataclass
class _Section:
    """One table as lines: its header (none for the top level), then `key = value` lines,
    each with its comment; an example section is all comments."""

    header: str | None
    note: str = ""
    lines: list[tuple[str, str]] = field(default_factory=list)
    example: bool = False

    def render(self) -> list[str]:
        rows = ([(self.header, self.note)] if self.header is not None else []) + self.lines
        fitting = [len(text) for text, _ in rows if len(text) <= ALIGN_MAX]
        width = max(fitting, default=0)
        out = [f"{text.ljust(width)}  # {note}" if note else text for text, note in rows]
        return [f"# {line}" for line in out] if self.example else out


def _bare(key: str) -> str:
    """A key as TOML writes it: bare when it can be, quoted otherwise."""
    return tomli_w.dumps({key: 0}).rsplit(" = ", 1)[0]


def _header(key: Key) -> str:
    return "[" + ".".join(_bare(k) for k in key) + "]"


def _line(name: str, value: object) -> str:
    return tomli_w.dumps({name: value}).rstrip("\n")


def _is_table(kind: Any) -> bool:
    return dataclasses.is_dataclass(kind) and isinstance(kind, type)


def _example(cls: type) -> dict[str, Any]:
    """A table of `cls` with its defaults, and "" where a value is needed."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
        else:
            out[f.name] = ""
    return out


@dataclass(frozen=True)
class _Voice:
    """What the comments say: a setting's doc (the template) or its source (the listing).
    The template shows each table of named entries as a commented example."""

    comment: Callable[[Key, Field], str]
    template: bool


def _sections(cls: type, table: Mapping[str, Any], at: Key, voice: _Voice) -> list[_Section]:
    own = _Section(_header(at) if at else None)
    below: list[_Section] = []
    for f in fields_of(cls):
        key = (*at, f.name)
        value = table[f.name]
        if _is_table(f.kind):
            subs = _sections(f.kind, value, key, voice)
            if voice.template:
                subs[0].note = f.rule.doc
            below += subs
        elif get_origin(f.kind) is dict:
            below += _named(f, value, key, voice)
        else:
            own.lines.append((_line(f.name, value), voice.comment(key, f)))
    return [own, *below]


def _named(f: Field, entries: Mapping[str, Any], key: Key, voice: _Voice) -> list[_Section]:
    """A table of named entries (`[keymap]`, `[hosts.NAME]`): each entry as it is, or in
    the template an example of one."""
    _, item = get_args(f.kind)
    if not _is_table(item):
        section = _Section(_header(key), f.rule.doc if voice.template else "")
        section.lines = [
            (_line(name, v), voice.comment((*key, name), f)) for name, v in entries.items()
        ]
        return [section] if entries or voice.template else []
    if voice.template:
        [example] = _sections(item, _example(item), (*key, "NAME"), voice)
        example.note, example.example = f.rule.doc, True
        return [example]
    return [s for name, v in entries.items() for s in _sections(item, v, (*key, name), voice)]


def _render(sections: list[_Section], head: tuple[str, ...] = ()) -> str:
    blocks = [s.render() for s in sections if s.lines or s.header is not None]
    if head:
        blocks[0] = [*head, *blocks[0]]
    return "\n\n".join("\n".join(block) for block in blocks) + "\n"


def template() -> str:
    """Every setting with its default and what it is for: a config.toml to start from."""
    voice = _Voice(lambda _key, f: f.rule.doc, template=True)
    return _render(_sections(Config, to_table(Config()), (), voice), TEMPLATE_HEAD)


def _get(table: Mapping[str, Any], key: Key) -> tuple[bool, Any]:
    for part in key:
        if not isinstance(table, Mapping) or part not in table:
            return False, None
        table = table[part]
    return True, table


def listing(config: Config, raw: Mapping[str, Any] | None) -> str:
    """The settings in force, each with its source: `default`, `file` (`raw`, the file's
    table as read), or `environment` naming the variable that overrides it here."""
    table = to_table(config)
    for dotted in ENVIRONMENT:
        var = overriding(dotted)
        if var is not None:
            *above, name = dotted.split(".")
            _get(table, tuple(above))[1][name] = os.environ[var]

    def source(key: Key, _f: Field) -> str:
        in_file, value = _get(raw or {}, key)
        var = overriding(".".join(key))
        if var is not None:
            return (
                f"environment ({var}; the file says {show(value)})"
                if in_file
                else (f"environment ({var})")
            )
        return "file" if in_file else "default"

    return _render(_sections(Config, table, (), _Voice(source, template=False)))
