"""The user's settings: `config.toml` in the state home.

Read with tomllib, written with tomli-w. Every key has a default, so a
missing file is a valid config; a bad value is a one-line error naming the
key. Remote hosts (`[hosts.NAME]`) and key remaps (`[keymap]`) live here too.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

import tomli_w

from hbtui.errors import UsageError
from hbtui.paths import Paths

DEFAULT_IMAGE = "ubuntu:24.04"
PORT_RANGE = (4790, 4999)


@dataclass
class Defaults:
    image: str = DEFAULT_IMAGE
    cpus: int = 2
    memory_mib: int = 4096
    recipe: str = ""  # a recipe folder; empty: the one shipped with hbtui


@dataclass
class Ports:
    low: int = PORT_RANGE[0]
    high: int = PORT_RANGE[1]


@dataclass
class EngineSettings:
    path: str = ""  # empty: HBTUI_SMOLVM, then smolvm on PATH, then the bundled smol-vmm
    state_dir: str = ""  # empty: the engine's own default
    timeout: float = 120.0  # seconds for one ordinary engine call


@dataclass
class ArchiveSettings:
    part_size_mib: int = 512  # largest single machine-cp transfer during save/load
    backups_dir: str = ""  # empty: <state home>/backups


@dataclass
class HostSettings:
    """A remote machine reached over SSH (see `hbtui hosts`)."""

    ssh: str
    identity: str = ""
    smolvm: str = ""
    state_dir: str = ""
    ports: str = ""  # "LO-HI"; empty: the global range


@dataclass
class Config:
    defaults: Defaults = field(default_factory=Defaults)
    ports: Ports = field(default_factory=Ports)
    engine: EngineSettings = field(default_factory=EngineSettings)
    archive: ArchiveSettings = field(default_factory=ArchiveSettings)
    refresh_seconds: float = 2.0
    keymap: dict[str, str] = field(default_factory=dict)
    hosts: dict[str, HostSettings] = field(default_factory=dict)

    def backups_dir(self, paths: Paths) -> Path:
        if self.archive.backups_dir:
            return Path(self.archive.backups_dir).expanduser()
        return paths.default_backups_dir

    def engine_path_setting(self) -> str:
        return os.environ.get("HBTUI_SMOLVM") or self.engine.path

    def recipe_setting(self) -> str:
        """The recipe folder for new boxes: HBTUI_RECIPE, then [defaults] recipe."""
        return os.environ.get("HBTUI_RECIPE") or self.defaults.recipe

    def engine_state_dir(self) -> str:
        return os.environ.get("HBTUI_SMOLVM_STATE_DIR") or self.engine.state_dir

    def validate(self) -> None:
        lo, hi = self.ports.low, self.ports.high
        if not (1024 <= lo <= hi <= 65535):
            raise UsageError(f"config: ports: need 1024 <= low <= high <= 65535, got {lo}-{hi}")
        if self.defaults.cpus < 1:
            raise UsageError(f"config: defaults.cpus must be at least 1, got {self.defaults.cpus}")
        if self.defaults.memory_mib < 256:
            raise UsageError(
                f"config: defaults.memory_mib must be at least 256, got {self.defaults.memory_mib}"
            )
        if self.archive.part_size_mib < 1:
            raise UsageError("config: archive.part_size_mib must be at least 1")
        if self.refresh_seconds < 0.5:
            raise UsageError("config: refresh_seconds must be at least 0.5")


_TYPES: dict[str, type] = {"str": str, "int": int, "float": float}
T = TypeVar("T")


def _section(cls: type[T], raw: Any, where: str) -> T:
    if not isinstance(raw, dict):
        raise UsageError(f"config: [{where}] must be a table")
    known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]  # cls is a dataclass
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise UsageError(f"config: unknown key {where}.{unknown[0]}")
    values = {}
    for key, value in raw.items():
        expected = _TYPES[str(known[key].type)]
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, expected) or isinstance(value, bool):
            raise UsageError(f"config: {where}.{key} must be {expected.__name__}, got {value!r}")
        values[key] = value
    return cls(**values)


def parse_config(raw: dict[str, Any]) -> Config:
    cfg = Config()
    for key, value in raw.items():
        if key == "defaults":
            cfg.defaults = _section(Defaults, value, key)
        elif key == "ports":
            cfg.ports = _section(Ports, value, key)
        elif key == "engine":
            cfg.engine = _section(EngineSettings, value, key)
        elif key == "archive":
            cfg.archive = _section(ArchiveSettings, value, key)
        elif key == "refresh_seconds":
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise UsageError(f"config: refresh_seconds must be a number, got {value!r}")
            cfg.refresh_seconds = float(value)
        elif key == "keymap":
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise UsageError("config: [keymap] maps action names to keys, both strings")
            cfg.keymap = dict(value)
        elif key == "hosts":
            if not isinstance(value, dict):
                raise UsageError("config: [hosts] must be a table")
            for name, host in value.items():
                if not isinstance(host, dict) or "ssh" not in host:
                    raise UsageError(f'config: hosts.{name} needs an ssh = "USER@HOST" key')
                cfg.hosts[name] = _section(HostSettings, host, f"hosts.{name}")
        else:
            raise UsageError(f"config: unknown key {key}")
    cfg.validate()
    return cfg


def load_config(paths: Paths) -> Config:
    path = paths.config_file
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        return Config()
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config: {path}: {exc}") from None
    return parse_config(raw)


def config_to_dict(cfg: Config) -> dict[str, Any]:
    data = asdict(cfg)
    data["hosts"] = {name: {k: v for k, v in h.items() if v} for name, h in data["hosts"].items()}
    return data


def save_config(paths: Paths, cfg: Config) -> None:
    """Write atomically, so a crash never leaves half a config."""
    cfg.validate()
    paths.ensure()
    target = paths.config_file
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(tomli_w.dumps(config_to_dict(cfg)))
    os.replace(tmp, target)
