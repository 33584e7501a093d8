"""The user's settings: `config.toml` in the state home.

Read with tomllib, written with tomli-w. Every key has a default, so a
missing file is a valid config; anything else wrong with the file (bytes
that are not UTF-8, TOML of the wrong shape, a value of the wrong type or
out of range) is a one-line ConfigError naming the file and the key. Remote
hosts (`[hosts.NAME]`) and key remaps (`[keymap]`) live here too.

The dataclasses below are the schema (hbtui.schema checks a table against them): a
field's type says what kind of TOML value it takes and its `rule(...)` metadata what
range, and `Config.validate` checks a Config built in code the same way before it is
saved. Adding a setting is adding one field.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hbtui.errors import UsageError
from hbtui.names import host_name_problem
from hbtui.paths import Paths
from hbtui.schema import (
    Invalid,
    Rule,
    from_table,
    plain,
    read_toml,
    rule,
    show,
    to_table,
)
from hbtui.statefile import locked, write_atomic
from hbtui.target import target_problem

DEFAULT_IMAGE = "ubuntu:24.04"
PORT_RANGE = (4790, 4999)
MAX_CPUS = 256
MAX_MEMORY_MIB = 4 * 2**20  # 4 TiB


class ConfigError(UsageError):
    """config.toml cannot be read, or says something hbtui cannot use."""


# ---------------------------------------------------------------------------
# Checks for single values. Names and SSH targets have their own homes
# (hbtui.names, hbtui.target); a port range is a config value, so its
# parser lives here and the core uses it too.


def parse_port_range(text: str) -> tuple[int, int]:
    """`LOW-HIGH` within 1024-65535, as [ports] or a host's `ports` say it."""
    try:
        lo_s, hi_s = text.split("-", 1)
        lo, hi = int(lo_s), int(hi_s)
    except ValueError:
        raise UsageError(f"a port range is LOW-HIGH, like 4790-4999 (got {text!r})") from None
    if not (1024 <= lo <= hi <= 65535):
        raise UsageError(f"port range {text} must lie within 1024-65535, low <= high")
    return lo, hi


def port_range_problem(text: str) -> str | None:
    """Why `text` is not a port range (empty is fine: the global one), or None."""
    if not text:
        return None
    try:
        parse_port_range(text)
    except UsageError as exc:
        return exc.message
    return None


IMAGE_MAX = 512  # registry/repository (255) :tag (128) @sha256:digest (71), and some room


def image_problem(text: str) -> str | None:
    if any(c.isspace() or not c.isprintable() for c in text):
        return "it has spaces or control characters"
    if len(text) > IMAGE_MAX:
        return f"it is {len(text)} characters; an image reference has at most {IMAGE_MAX}"
    return None


def _remote_path_problem(text: str) -> str | None:
    return "it has a NUL character" if "\0" in text else None


def _path_problem(text: str) -> str | None:
    if "\0" in text:
        return "it has a NUL character"
    try:
        Path(text).expanduser()
    except RuntimeError:
        return "its ~user has no home directory here"
    return None


def _key_problem(key: str) -> str | None:
    return "an empty key" if not key else None


def _keys_problem(text: str) -> str | None:
    return "not printable" if not text.isprintable() else None


def path_rule(doc: str) -> dict[str, Rule]:
    return rule(desc="a path", check=_path_problem, doc=doc)


# ---------------------------------------------------------------------------
# The schema of config.toml.


_ENV_VAR = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HOST_PATTERN = re.compile(
    r"^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$"
)
_HEADER = re.compile(r"^[a-z0-9!#$%&'*+.^_`|~-]+$")
EGRESS_MODES = ("open", "private-blocked", "allow-list")


# Variables the box itself lives by: a credential bound to one would replace it with a
# placeholder in every process of the box (and hbtui's HB_*, the engine's SMOL_*).
BOX_VARIABLES = frozenset(
    [
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "TERM",
        "LANG",
        "LANGUAGE",
        "PWD",
        "OLDPWD",
        "HOSTNAME",
        "TMPDIR",
        "TZ",
        "IFS",
        "ENV",
        "BASH_ENV",
        "PS1",
        "PS2",
        "PS4",
        "MAIL",
        "SHLVL",
        "DISPLAY",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONPATH",
        "PYTHONHOME",
    ]
)
BOX_VARIABLE_PREFIXES = ("LC_", "LD_", "XDG_", "HB_", "SMOL_", "BASH_FUNC_")


def env_var_problem(text: str) -> str | None:
    if not _ENV_VAR.fullmatch(text):
        return "letters, digits and _, not starting with a digit"
    if text in BOX_VARIABLES or text.startswith(BOX_VARIABLE_PREFIXES):
        return (
            f"{text} is a variable the box itself needs; a credential takes a variable of "
            "its own, like MY_TOKEN"
        )
    return None


HOST_NAME_MAX = 253  # a DNS name; each label at most 63


def host_pattern_problem(text: str) -> str | None:
    """A lower-case DNS name with a dot, or `*.` and one: what the engine's egress and
    credential rules take (no scheme, port or IP address, labels of at most 63)."""
    if not _HOST_PATTERN.fullmatch(text):
        return "a lower-case host name like api.example.com"
    labels = text.removeprefix("*.").split(".")
    if labels[-1].isdigit():
        return "an IP address; the allow list takes host names like api.example.com"
    if len(text) > HOST_NAME_MAX or any(len(label) > 63 for label in labels):
        return f"a host name has at most {HOST_NAME_MAX} characters, 63 between dots"
    return None


def port_problem(port: int) -> str | None:
    """A port asked for by number (`--port`): 0 is no port, not "any"."""
    if not 1 <= port <= 65535:
        return "a port number is 1-65535; leave it out for a free one"
    return None


def split_list(text: str) -> list[str]:
    """A comma-separated setting as its items (TOML arrays are not in the schema)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def _hosts_problem(text: str) -> str | None:
    hosts = split_list(text)
    if not hosts:
        return "at least one host"
    return next(
        (f"{h!r}: {host_pattern_problem(h)}" for h in hosts if host_pattern_problem(h)), None
    )


def _allow_problem(text: str) -> str | None:
    return _hosts_problem(text) if text else None


def _header_problem(text: str) -> str | None:
    return None if not text or _HEADER.fullmatch(text) else "a lower-case HTTP header name"


# Each field's `doc` is its comment in the template `hbtui config show --template` prints
# (and docs/boxes.md shows): what it is for, in a line.


@dataclass
class Defaults:
    image: str = field(
        default=DEFAULT_IMAGE,
        metadata=rule(
            nonempty=True,
            desc="an image name like ubuntu:24.04",
            check=image_problem,
            doc="the OCI image of new boxes",
        ),
    )
    cpus: int = field(default=2, metadata=rule(low=1, high=MAX_CPUS, doc="CPUs of a new box"))
    memory_mib: int = field(
        default=4096,
        metadata=rule(
            low=256, high=MAX_MEMORY_MIB, note="MiB, at most 4 TiB", doc="its memory in MiB"
        ),
    )
    recipe: str = field(
        default="",
        metadata=path_rule(
            "a recipe folder for new boxes (HBTUI_RECIPE wins); empty: the one shipped"
        ),
    )
    branchable: bool = field(
        default=False,
        metadata=rule(doc="start new boxes so that `hbtui branch` branches them at once"),
    )
    use_bases: bool = field(
        default=True,
        metadata=rule(doc="make new boxes from a base of their recipe when there is one"),
    )
    credentials: str = field(
        default="",
        metadata=rule(
            desc="preset names separated by commas, like anthropic,github",
            doc='credential presets for new boxes, like "anthropic,github" (keys.md)',
        ),
    )
    # What a new box may reach: everything, the internet but not private networks, or
    # only the hosts in `allow` (and its credentials' hosts).
    egress: str = field(
        default="private-blocked",
        metadata=rule(choices=EGRESS_MODES, doc=" | ".join(EGRESS_MODES) + " (keys.md)"),
    )
    allow: str = field(
        default="",
        metadata=rule(
            desc="host names separated by commas",
            check=_allow_problem,
            doc="the allow list's hosts, separated by commas",
        ),
    )


@dataclass
class Ports:
    low: int = field(default=PORT_RANGE[0], metadata=rule(low=1024, high=65535))
    high: int = field(default=PORT_RANGE[1], metadata=rule(low=1024, high=65535))

    def problem(self) -> str | None:
        if self.low > self.high:
            return f"need 1024 <= low <= high <= 65535, got {self.low}-{self.high}"
        return None


@dataclass
class EngineSettings:
    path: str = field(
        default="",
        metadata=path_rule("the smolvm binary; empty: smolvm on PATH, else smolmachines' own"),
    )
    state_dir: str = field(
        default="",
        metadata=path_rule("passed as --state-dir to every engine call; empty: its own"),
    )
    timeout: float = field(
        default=120.0,
        metadata=rule(
            low=0,
            above=True,
            high=86400,
            note="seconds",
            doc="seconds for one engine call; start, branch and pack get at least 180 / 1800",
        ),
    )


@dataclass
class ArchiveSettings:
    part_size_mib: int = field(  # the largest single machine cp of a save or load
        default=512,
        metadata=rule(
            low=1, high=65536, note="MiB", doc="the largest single transfer in or out of a box"
        ),
    )
    backups_dir: str = field(
        default="",
        metadata=path_rule("where save writes archives; empty: backups/ in hbtui's data folder"),
    )


@dataclass
class HostSettings:
    """A remote machine reached over SSH (see `hbtui hosts`)."""

    ssh: str = field(
        metadata=rule(
            desc="USER@HOST[:PORT], like root@build.example.com:2222",
            check=target_problem,
            missing='needs an ssh = "USER@HOST" key',
            doc="USER@HOST[:PORT] to log in as (needed)",
        )
    )
    identity: str = field(default="", metadata=path_rule("the private key to log in with"))
    smolvm: str = field(
        default="",
        metadata=rule(
            desc="a path",
            check=_remote_path_problem,
            doc="the engine there; empty: on PATH or in its python's smolmachines",
        ),
    )
    state_dir: str = field(
        default="",
        metadata=rule(desc="a path", check=_remote_path_problem, doc="the engine's --state-dir"),
    )
    ports: str = field(
        default="",
        metadata=rule(
            desc="a port range LOW-HIGH like 4790-4999",
            check=port_range_problem,
            doc="LOW-HIGH host ports for its boxes; empty: [ports]",
        ),
    )


@dataclass
class CredentialSettings:
    """A credential preset of your own (`[credentials.NAME]`), like the built-in ones."""

    env_var: str = field(
        metadata=rule(
            desc="an environment variable name like MY_TOKEN",
            check=env_var_problem,
            missing='needs an env_var = "VARIABLE" key',
            doc="the variable that holds a placeholder in the box (needed)",
        )
    )
    hosts: str = field(
        metadata=rule(
            desc="host names separated by commas, like api.example.com,*.example.org",
            check=_hosts_problem,
            missing='needs a hosts = "api.example.com" key',
            doc="where the engine puts the value in, like api.example.com,*.example.org (needed)",
        )
    )
    header: str = field(
        default="",
        metadata=rule(
            desc="an HTTP header name like x-api-key",
            check=_header_problem,
            doc="set this header to the whole value; empty: replace the placeholder",
        ),
    )
    body: bool = field(
        default=False,
        metadata=rule(doc="also replace the placeholder in form bodies (OAuth token requests)"),
    )


@dataclass
class SecretsSettings:
    store: str = field(
        default="auto",
        metadata=rule(
            choices=("auto", "keyring", "file"),
            doc="auto: the OS keyring when it has a usable backend, else an encrypted file",
        ),
    )


def _credential_name_problem(name: str) -> str | None:
    ok = 0 < len(name) <= 64 and re.fullmatch(r"[a-z0-9][a-z0-9_.-]*", name)
    return None if ok else "a credential name uses a-z, 0-9, '_', '-', '.'"


# Settings an environment variable overrides for one run; `config show` says which did.
ENVIRONMENT = {
    "engine.path": "HBTUI_SMOLVM",
    "engine.state_dir": "HBTUI_SMOLVM_STATE_DIR",
    "defaults.recipe": "HBTUI_RECIPE",
}


def overriding(key: str) -> str | None:
    """The variable that overrides the setting `key` (dotted) here and now, or None."""
    var = ENVIRONMENT.get(key)
    return var if var is not None and os.environ.get(var) else None


def _in_force(key: str, value: str) -> str:
    var = overriding(key)
    return os.path.expanduser(os.environ[var] if var is not None else value)


@dataclass
class Config:
    defaults: Defaults = field(
        default_factory=Defaults, metadata=rule(doc="what a new box is made with")
    )
    ports: Ports = field(
        default_factory=Ports,
        metadata=rule(doc="the host ports of the boxes' web UIs, low to high"),
    )
    engine: EngineSettings = field(
        default_factory=EngineSettings,
        metadata=rule(doc="the smolvm engine (HBTUI_SMOLVM and HBTUI_SMOLVM_STATE_DIR win)"),
    )
    archive: ArchiveSettings = field(
        default_factory=ArchiveSettings, metadata=rule(doc="save and load")
    )
    refresh_seconds: float = field(
        default=2.0,
        metadata=rule(
            low=0.5, high=3600, note="seconds", doc="the dashboard lists the boxes this often"
        ),
    )
    agent_alerts: bool = field(
        default=True,
        metadata=rule(
            doc="the dashboard rings, sends OSC 9 and runs notify-send when an agent needs you"
        ),
    )
    keymap: dict[str, str] = field(  # action name -> keys
        default_factory=dict,
        metadata=rule(
            nonempty=True,
            desc="keys like ctrl+n",
            check=_keys_problem,
            keys=_key_problem,
            doc='dashboard keys, e.g. new = "N" (dashboard.md)',
        ),
    )
    hosts: dict[str, HostSettings] = field(
        default_factory=dict,
        metadata=rule(keys=host_name_problem, doc="a remote host (hbtui hosts add)"),
    )
    credentials: dict[str, CredentialSettings] = field(
        default_factory=dict,
        metadata=rule(keys=_credential_name_problem, doc="a credential preset of your own"),
    )
    secrets: SecretsSettings = field(
        default_factory=SecretsSettings, metadata=rule(doc="where secret values are kept (keys.md)")
    )

    def backups_dir(self, paths: Paths) -> Path:
        if self.archive.backups_dir:
            return Path(self.archive.backups_dir).expanduser()
        return paths.default_backups_dir

    # A path setting's ~ is the user's home, as the config check reads it (the engine was
    # handed "~/vms" as written, and made a folder named ~ wherever hbtui ran).

    def engine_path_setting(self) -> str:
        return _in_force("engine.path", self.engine.path)

    def recipe_setting(self) -> str:
        """The recipe folder for new boxes: HBTUI_RECIPE, then [defaults] recipe."""
        return _in_force("defaults.recipe", self.defaults.recipe)

    def engine_state_dir(self) -> str:
        return _in_force("engine.state_dir", self.engine.state_dir)

    def validate(self, source: Path | None = None) -> None:
        """The same checks as reading the file: what is saved can be read back."""
        parse_config(to_table(self), source)


@dataclass(frozen=True)
class KeymapCheck:
    """What of `[keymap]` the dashboard can apply, and one line per entry it cannot."""

    keymap: dict[str, str]  # the entries kept (their ids get these keys)
    problems: list[str]  # the entries dropped (their ids keep their default keys)


def _keys(text: str) -> list[str]:
    return [k.strip() for k in text.split(",") if k.strip()]


def check_keymap(
    keymap: Mapping[str, str],
    defaults: Mapping[str, str],
    scopes: Mapping[str, str] | None = None,
) -> KeymapCheck:
    """`[keymap]` against the dashboard's action ids, their default keys and their scopes
    (keys clash only within one scope; none given: one scope for all).

    An unknown id is dropped. A key bound to two actions of one scope goes to one of
    them: the one for which it is the default, else the first remapped one (in the
    order of `defaults`); each other entry on it is dropped, bringing its default back,
    so the check repeats until nothing clashes. Each clash is one line: the key, the
    entries dropped, and which action keeps it.
    """
    problems = [
        f"[keymap] {plain(ident)}: no such action (known: {', '.join(defaults)})"
        for ident in keymap
        if ident not in defaults
    ]
    kept = {ident: keys for ident, keys in keymap.items() if ident in defaults}
    while True:
        owners: dict[tuple[str, str], list[str]] = {}
        for ident, default in defaults.items():
            scope = scopes.get(ident, "") if scopes else ""
            for key in dict.fromkeys(_keys(kept.get(ident, default))):
                owners.setdefault((scope, key), []).append(ident)
        clash = next(
            (
                (key, ids)
                for (_scope, key), ids in owners.items()
                if len(ids) > 1 and any(i in kept for i in ids)
            ),
            None,
        )
        if clash is None:  # no entry clashes (the defaults are the table's own)
            return KeymapCheck(kept, problems)
        key, ids = clash
        keeper = next((i for i in ids if i not in kept), ids[0])
        dropped = [i for i in ids if i != keeper and i in kept]
        entries = ", ".join(f"{plain(i)} = {show(kept.pop(i))}" for i in dropped)
        back = ", ".join(f"{i} ({defaults[i]})" for i in dropped)
        problems.append(
            f"[keymap] {entries}: {plain(key)} is also bound to {keeper}, which keeps it; "
            f"back to the default: {back}"
        )


def _where(source: Path | None) -> str:
    return f"config {plain(str(source))}" if source is not None else "config"


def parse_config(raw: dict[str, Any], source: Path | None = None) -> Config:
    """The Config a parsed config.toml describes; ConfigError naming `source` if it is bad."""
    try:
        return from_table(Config, raw)
    except Invalid as exc:
        raise ConfigError(f"{_where(source)}: {exc}") from None


def read_config_table(paths: Paths) -> dict[str, Any] | None:
    """config.toml as a plain table, unchecked (None: there is none); ConfigError naming
    the file when it is not TOML."""
    path = paths.config_file
    try:
        return read_toml(path)
    except Invalid as exc:
        raise ConfigError(f"{_where(path)}: {exc}") from None


def load_config(paths: Paths) -> Config:
    raw = read_config_table(paths)
    return Config() if raw is None else parse_config(raw, paths.config_file)


def config_to_dict(cfg: Config) -> dict[str, Any]:
    data = to_table(cfg)
    data["hosts"] = {name: {k: v for k, v in h.items() if v} for name, h in data["hosts"].items()}
    return data


def save_config(paths: Paths, cfg: Config) -> None:
    """Write atomically, so a crash never leaves half a config."""
    import tomli_w  # only a verb that writes the config pays for it

    target = paths.config_file
    cfg.validate(target)
    try:
        paths.ensure()
        write_atomic(target, tomli_w.dumps(config_to_dict(cfg)).encode())
    except OSError as exc:
        raise ConfigError(f"{_where(target)}: cannot write it: {exc.strerror or exc}") from None


@contextlib.contextmanager
def editing_config(paths: Paths) -> Iterator[Config]:
    """The config as it is on disk now, to change in the block and write back, with no
    other process's edit in between (the copy read at start-up may be stale)."""
    paths.ensure()
    with locked(paths.locks_dir / "config.lock"):
        cfg = load_config(paths)
        yield cfg
        save_config(paths, cfg)
