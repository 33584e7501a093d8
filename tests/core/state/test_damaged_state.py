"""Damaged state is a clear error, never a crash.

config.toml and registry.toml can hold any bytes a user or a crash leaves.
Reading either gives a valid result or exactly one HbtuiError: one line that
names the file (and the row and field where there is one). A transaction on
a damaged registry changes nothing, and nothing hbtui writes is a file it
would refuse to read back.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
from datetime import UTC, timedelta, timezone
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hbtui.config import (
    Config,
    ConfigError,
    Defaults,
    HostSettings,
    load_config,
    parse_config,
    port_range_problem,
    save_config,
)
from hbtui.core.foundation.registry import BoxRecord, Registry, RegistryError
from hbtui.errors import HbtuiError, UsageError
from hbtui.paths import Paths

from support import HBTUI_BIN

PROPERTY = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def paths_in(folder: Path) -> Paths:
    return Paths(config_dir=folder, data_dir=folder, log_dir=folder / "logs")


def one_clear_error(exc: HbtuiError, path: Path) -> str:
    message = str(exc)
    assert message.strip() and len(message.splitlines()) == 1, message
    assert message.isprintable(), message
    assert str(path) in message, message
    return message


def read_config(path: Path) -> Config | ConfigError:
    """The config at `path`, or the one error reading it gave; any other exception escapes."""
    try:
        return load_config(paths_in(path.parent))
    except ConfigError as exc:
        one_clear_error(exc, path)
        return exc


def read_registry(path: Path) -> Registry | RegistryError:
    reg = Registry(path)
    try:
        reg.read()
    except RegistryError as exc:
        one_clear_error(exc, path)
        return exc
    return reg


# ---------------------------------------------------------------------------
# Strategies: TOML documents, random and shaped like the real files.

CONFIG_KEYS = {
    "defaults": [f.name for f in dataclasses.fields(Defaults)],
    "ports": ["low", "high"],
    "engine": ["path", "state_dir", "timeout"],
    "archive": ["part_size_mib", "backups_dir"],
    "keymap": ["new", "quit", "help", ""],
    "hosts": ["mac", "local", "Mac", "build-1", ""],
}
HOST_KEYS = [f.name for f in dataclasses.fields(HostSettings)]
ROW_KEYS = [f.name for f in dataclasses.fields(BoxRecord)]
ALL_KEYS = sorted(
    {*CONFIG_KEYS, *(k for ks in CONFIG_KEYS.values() for k in ks), *HOST_KEYS, *ROW_KEYS}
    | {"refresh_seconds", "boxes", "version", "web", "b1"}
)

keys = st.sampled_from(ALL_KEYS) | st.text(max_size=8)
zones = st.sampled_from([None, UTC, timezone(timedelta(hours=-7, minutes=-30))])
scalars = st.one_of(
    st.text(max_size=20),
    st.integers(),
    st.integers(min_value=-(2**1100), max_value=2**1100),  # past what a float holds
    st.floats(),
    st.booleans(),
    st.datetimes(timezones=zones),
    st.dates(),
    st.times(),
)
# Strings and numbers near what the real fields take, so the checks past the type run too.
plausible = st.one_of(
    st.integers(min_value=-2, max_value=70000),
    st.sampled_from([0.0, 0.4, 0.5, 2, 86400.5, float("nan"), float("inf"), -1.0]),
    st.sampled_from(
        [
            "",
            "ubuntu:24.04",
            "a b",
            "me@mac.local",
            "me@mac:2222",
            "me@[::1]:22",
            "@x",
            "5000-5100",
            "9-1",
            "x-y",
            "~nosuchuser/x",
            "/tmp/x\0y",
            "ready",
            "provisioning",
            "failed",
            "done",
            "2026-01-31T12:00:00Z",
            "2026-02-31T12:00:00Z",
            "ctrl+n",
            "\n",
        ]
    ),
)
values = st.recursive(
    scalars | plausible,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)


def table_of(names: list[str], leaf: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.dictionaries(st.sampled_from(names) | st.text(max_size=6), leaf, max_size=6)


def one_field_changed(
    good: st.SearchStrategy[dict[str, object]], names: list[str]
) -> st.SearchStrategy[dict[str, object]]:
    """A valid table with one key (a real one, mostly) set to anything."""

    @st.composite
    def change(draw: st.DrawFn) -> dict[str, object]:
        table = dict(draw(good))
        table[draw(mostly(st.sampled_from(names), st.text(max_size=4)))] = draw(leaf)
        return table

    return change()


def mostly(
    shaped: st.SearchStrategy[object], odd: st.SearchStrategy[object], times: int = 3
) -> st.SearchStrategy[object]:
    """Shaped like the real thing, `times` times as often as odd."""
    return st.sampled_from([shaped] * times + [odd]).flatmap(lambda chosen: chosen)


leaf = plausible | values

good_host = st.fixed_dictionaries(
    {"ssh": st.sampled_from(["me@mac", "root@b.example.com:2222", "mac", "me@[::1]:22"])},
    optional={
        "ports": st.sampled_from(["", "5000-5100", "6000-6000"]),
        "identity": st.sampled_from(["", "~/.ssh/id", "/k"]),
        "smolvm": st.text(max_size=8).filter(lambda t: "\0" not in t),
    },
)
good_sections = {
    "defaults": st.fixed_dictionaries(
        {},
        optional={
            "image": st.sampled_from(["ubuntu:24.04", "alpine"]),
            "cpus": st.integers(min_value=1, max_value=256),
            "memory_mib": st.integers(min_value=256, max_value=4 * 2**20),
            "recipe": st.sampled_from(["", "/srv/recipe", "~/r"]),
        },
    ),
    "ports": st.fixed_dictionaries(
        {}, optional={"low": st.integers(1024, 4000), "high": st.integers(4000, 65535)}
    ),
    "engine": st.fixed_dictionaries(
        {},
        optional={
            "path": st.sampled_from(["", "/usr/bin/smolvm"]),
            "timeout": st.floats(min_value=0.01, max_value=86400) | st.integers(1, 86400),
        },
    ),
    "archive": st.fixed_dictionaries(
        {}, optional={"part_size_mib": st.integers(1, 65536), "backups_dir": st.just("/b")}
    ),
    "keymap": st.dictionaries(
        st.sampled_from(["new", "quit", "help"]), st.sampled_from(["N", "ctrl+q", "f1"])
    ),
    "hosts": st.dictionaries(
        st.sampled_from(["mac", "build-1", "b"]),
        mostly(good_host, one_field_changed(good_host, HOST_KEYS) | table_of(HOST_KEYS, leaf)),
        max_size=3,
    ),
}
config_docs = mostly(
    st.fixed_dictionaries(
        {},
        optional={
            **{
                name: mostly(
                    good,
                    one_field_changed(good, CONFIG_KEYS[name])
                    | table_of(CONFIG_KEYS[name], leaf)
                    | values,
                )
                for name, good in good_sections.items()
            },
            "refresh_seconds": mostly(st.floats(0.5, 3600), leaf),
        },
    ),
    st.dictionaries(keys, values, max_size=5),
)

good_row = st.fixed_dictionaries(
    {"port": st.integers(min_value=1024, max_value=65535)},
    optional={
        "image": st.text(max_size=10),
        "cpus": st.integers(min_value=0, max_value=256),
        "memory_mib": st.integers(min_value=0, max_value=4 * 2**20),
        "created": st.sampled_from(["", "2026-01-31T12:00:00Z"]),
        "status": st.sampled_from(["provisioning", "ready", "failed"]),
        "error": st.text(max_size=20),
        "owner_pid": st.integers(min_value=0, max_value=2**22),
    },
)
row = mostly(good_row, one_field_changed(good_row, ROW_KEYS) | table_of(ROW_KEYS, leaf) | values)
row_names = mostly(
    st.sampled_from(["web", "b1", "api", "db-2", "x", "cache", "dev-box"]),
    st.sampled_from(["Web", "", "a--b", "web\n", "a" * 41]) | st.text(max_size=6),
    times=12,
)
host_names = mostly(
    st.sampled_from(["local", "mac"]), st.sampled_from(["Mac", ""]) | st.text(), times=12
)
registry_docs = mostly(
    st.fixed_dictionaries(
        {"boxes": st.dictionaries(host_names, st.dictionaries(row_names, row, max_size=4))},
        optional={"version": st.just(1)},
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "version": st.just(1) | values,
            "boxes": st.dictionaries(
                host_names, st.dictionaries(row_names, row, max_size=4) | values, max_size=3
            )
            | values,
        },
    )
    | st.dictionaries(keys, values, max_size=5),
)


def mangled(doc: bytes) -> st.SearchStrategy[bytes]:
    """`doc` with a few bytes overwritten, dropped or added: nearly right TOML."""

    @st.composite
    def edit(draw: st.DrawFn) -> bytes:
        data = bytearray(doc)
        for _ in range(draw(st.integers(min_value=1, max_value=4))):
            at = draw(st.integers(min_value=0, max_value=max(len(data) - 1, 0)))
            byte = draw(st.integers(min_value=0, max_value=255) | st.sampled_from(b'"[]=\n.'))
            how = draw(st.sampled_from(["set", "drop", "add"]))
            if how == "add" or not data:
                data.insert(at, byte)
            elif how == "drop":
                del data[at]
            else:
                data[at] = byte
        return bytes(data)

    return edit()


SAMPLE_CONFIG = b"""\
refresh_seconds = 2.5
[defaults]
image = "ubuntu:24.04"
cpus = 4
memory_mib = 8192
[ports]
low = 5000
high = 5100
[engine]
timeout = 60
[keymap]
new = "N"
[hosts.mac]
ssh = "me@mac.local:2222"
ports = "6000-6100"
"""
SAMPLE_REGISTRY = b"""\
version = 1
[boxes.local.web]
port = 4800
image = "ubuntu:24.04"
cpus = 2
memory_mib = 4096
created = "2026-01-31T12:00:00Z"
status = "ready"
owner_pid = 0
[boxes.mac.b1]
port = 4801
status = "provisioning"
"""


# ---------------------------------------------------------------------------
# Properties: any bytes, any TOML document.


def check_config_file(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    got = read_config(path)
    if isinstance(got, Config):  # what reads cleanly saves and reads back the same
        save_config(paths_in(path.parent), got)
        assert load_config(paths_in(path.parent)) == got


def check_registry_file(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    got = read_registry(path)
    if isinstance(got, Registry):  # and rewriting a valid registry keeps every row
        rows = got.read().rows

        async def rewrite() -> None:
            async with got.transaction() as boxes:
                boxes.changed = True

        asyncio.run(rewrite())
        assert got.read().rows == rows


@PROPERTY
@given(data=st.binary(max_size=300))
def test_config_from_any_bytes(tmp_path, data):
    check_config_file(tmp_path / "config.toml", data)


@PROPERTY
@given(data=mangled(SAMPLE_CONFIG))
def test_config_from_nearly_right_bytes(tmp_path, data):
    check_config_file(tmp_path / "config.toml", data)


@PROPERTY
@given(doc=config_docs)
def test_config_from_any_toml_document(tmp_path, doc):
    check_config_file(tmp_path / "config.toml", tomli_w.dumps(doc).encode())


@PROPERTY
@given(doc=config_docs)
def test_parse_config_of_any_table_is_a_config_or_a_config_error(doc):
    try:
        assert isinstance(parse_config(doc), Config)
    except ConfigError as exc:
        assert len(str(exc).splitlines()) == 1 and str(exc).startswith("config: ")


@PROPERTY
@given(data=st.binary(max_size=300))
def test_registry_from_any_bytes(tmp_path, data):
    check_registry_file(tmp_path / "registry.toml", data)


@PROPERTY
@given(data=mangled(SAMPLE_REGISTRY))
def test_registry_from_nearly_right_bytes(tmp_path, data):
    check_registry_file(tmp_path / "registry.toml", data)


@PROPERTY
@given(doc=registry_docs)
def test_registry_from_any_toml_document(tmp_path, doc):
    check_registry_file(tmp_path / "registry.toml", tomli_w.dumps(doc).encode())


@PROPERTY
@given(doc=registry_docs)
def test_a_transaction_on_any_registry_writes_a_readable_one_or_nothing(tmp_path, doc):
    path = tmp_path / "registry.toml"
    before = tomli_w.dumps(doc).encode()
    path.write_bytes(before)
    reg = Registry(path)
    damaged = isinstance(read_registry(path), RegistryError)

    async def touch() -> None:
        async with reg.transaction() as boxes:
            boxes.put(BoxRecord(name="zz-new", host="local", port=1024))

    try:
        asyncio.run(touch())
    except RegistryError as exc:
        one_clear_error(exc, path)
        assert path.read_bytes() == before
    else:
        assert not damaged
        assert reg.read().get("zz-new") is not None


def test_the_samples_are_valid(tmp_path):
    """The seeds of the `nearly right` properties read cleanly as they are."""
    (tmp_path / "config.toml").write_bytes(SAMPLE_CONFIG)
    assert isinstance(read_config(tmp_path / "config.toml"), Config)
    (tmp_path / "registry.toml").write_bytes(SAMPLE_REGISTRY)
    assert isinstance(read_registry(tmp_path / "registry.toml"), Registry)


# ---------------------------------------------------------------------------
# The rules config.py checks with are the core's own (one home each).


def test_names_and_targets_refuse_what_they_must():
    from hbtui.names import check_name, host_name_problem
    from hbtui.target import target_problem

    for bad in ("mac\n", "web\n", "local"):
        assert host_name_problem(bad) is not None
    with pytest.raises(UsageError):
        check_name("web\n")  # `$` would have let a final line break through
    assert target_problem("me@host:\u00b2") is not None  # "²" is a digit to isdigit()
    assert target_problem("me@host:22") is None
    assert port_range_problem("9-1") is not None and port_range_problem("") is None


# ---------------------------------------------------------------------------
# Examples: the message names the file, the row or key, and what is wanted.

_REGISTRY_DAMAGE = [
    (b"\xff\xfeboxes", "not valid UTF-8 (byte 0xff at offset 0)"),
    (b"[boxes\n", "not valid TOML"),
    (b"boxes = 5", "boxes must be a table of hosts, got 5"),
    (b"[boxes]\nlocal = 3", "boxes.local must be a table of boxes, got 3"),
    (b"[boxes.local]\nweb = []", "row local/web must be a table, got an array"),
    (
        b'[boxes.local.web]\nport = "abc"',
        'row local/web: port must be an integer 1024-65535, got "abc"',
    ),
    (
        b"[boxes.local.web]\nport = 70000",
        "row local/web: port must be an integer 1024-65535, got 70000",
    ),
    (b"[boxes.local.web]\nport = 80", "port must be an integer 1024-65535, got 80"),
    (b"[boxes.local.web]\nport = true", "port must be an integer 1024-65535, got true"),
    (b"[boxes.local.web]\nport = 4800.0", "port must be an integer 1024-65535, got 4800.0"),
    (b"[boxes.local.web]\nimage = 'x'", "row local/web: needs a port key"),
    (b"[boxes.local.web]\nport = 4800\ncreated = 12", "row local/web: created must be a UTC time"),
    (
        b"[boxes.local.web]\nport = 4800\ncreated = 2026-01-31T12:00:00Z",
        "created must be a UTC time",
    ),
    (b'[boxes.local.web]\nport = 4800\nlast_save = "yesterday"', "last_save must be a UTC time"),
    (
        b'[boxes.local.web]\nport = 4800\nowner_pid = "x"',
        'owner_pid must be an integer 0-4194304 (0: none), got "x"',
    ),
    (b"[boxes.local.web]\nport = 4800\nowner_pid = -1", "owner_pid must be an integer 0-4194304"),
    (b"[boxes.local.web]\nport = 4800\nowner_pid = 99999999999999999999999", "owner_pid must be"),
    (
        b"[boxes.local.web]\nport = 4800\nstatus = 7",
        'status must be one of "provisioning", "ready", "failed", got 7',
    ),
    (b'[boxes.local.web]\nport = 4800\nstatus = "done"', "status must be one of"),
    (b"[boxes.local.web]\nport = 4800\ncpus = 257", "row local/web: cpus must be an integer 0-256"),
    (
        b"[boxes.local.web]\nport = 4800\nmemory_mib = 4194305",
        "memory_mib must be an integer 0-4194304 (MiB, at most 4 TiB",
    ),
    (b'[boxes.local.web]\nport = 4800\nimage = ["x"]', "image must be a string, got an array"),
    (b"[boxes.local.web]\nport = 4800\ncolour = 1", "row local/web: unknown key colour"),
    (b"[boxes.local.web]\nport = 4800\nname = 'web'", "row local/web: unknown key name"),
    (b"[boxes.local.Web]\nport = 4800", 'row local/Web: name must be a box name, got "Web"'),
    (b'[boxes.local."web\\n"]\nport = 4800', "row local/web\\n: name must be a box name"),
    (b"[boxes.Mac.web]\nport = 4800", "row Mac/web: host must be"),
    (
        b"[boxes.local.a]\nport = 4800\n[boxes.local.b]\nport = 4800",
        "row local/b: port 4800 is also the port of row local/a",
    ),
    (b"version = 2", "version must be 1, got 2"),
    (b"version = true", "version must be 1, got true"),
    (b"colour = 1", "unknown key colour"),
    pytest.param(b"a = " + b"[" * 5000, "not valid TOML", id="deep-nesting"),
    pytest.param(
        b"[boxes.local.web]\nport = " + b"1" * 5000,
        "not valid TOML: a number with too many digits",
        id="5000-digits",
    ),
]


def _versioned(case):
    """hbtui writes `version = 1` first; each damage above is to an otherwise real file."""
    values = case.values if hasattr(case, "values") else case
    text, message = values
    if text.startswith((b"[boxes", b"boxes", b"colour")):
        text = b"version = 1\n" + text
    return pytest.param(text, message, id=getattr(case, "id", None))


REGISTRY_CASES = [_versioned(c) for c in _REGISTRY_DAMAGE] + [
    pytest.param(b"", "it has no version = 1", id="empty"),
    pytest.param(b"# only a comment\n", "it has no version = 1", id="comment-only"),
    pytest.param(b"[boxes.local.web]\nport = 4800\n", "it has no version = 1", id="no-version"),
]


@pytest.mark.parametrize("text, message", REGISTRY_CASES)
def test_a_damaged_registry_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "registry.toml"
    path.write_bytes(text)
    with pytest.raises(RegistryError) as caught:
        Registry(path).read()
    assert message in one_clear_error(caught.value, path)
    assert str(caught.value).startswith(f"registry {path}: ")


@pytest.mark.parametrize("text, message", REGISTRY_CASES)
def test_a_transaction_on_a_damaged_registry_changes_nothing(tmp_path, text, message):
    path = tmp_path / "registry.toml"
    path.write_bytes(text)
    reg = Registry(path)
    ran = []

    async def go() -> None:
        async with reg.transaction() as boxes:
            ran.append(True)
            boxes.put(BoxRecord(name="new", port=4900))

    with pytest.raises(RegistryError, match="registry "):
        asyncio.run(go())
    with pytest.raises(RegistryError):
        asyncio.run(reg.update("web", status="ready"))
    assert not ran and path.read_bytes() == text
    assert not list(tmp_path.glob(".*.tmp"))


CONFIG_CASES = [
    (b"\xff", "not valid UTF-8 (byte 0xff at offset 0)"),
    (b"[defaults\n", "not valid TOML"),
    (b"defaults = 1", "defaults must be a table, got 1"),
    (
        b"[engine]\ntimeout = 0",
        "engine.timeout must be a number above 0 and at most 86400 (seconds), got 0",
    ),
    (b"[engine]\ntimeout = -5", "engine.timeout must be a number above 0"),
    (b"[engine]\ntimeout = inf", "engine.timeout must be a number above 0 and at most 86400"),
    (b"[engine]\ntimeout = '5'", "engine.timeout must be a number"),
    (b"refresh_seconds = nan", "refresh_seconds must be a number 0.5-3600 (seconds), got nan"),
    (b"refresh_seconds = 0.1", "refresh_seconds must be a number 0.5-3600"),
    pytest.param(
        b"refresh_seconds = 1" + b"0" * 400,
        "refresh_seconds must be a number 0.5-3600 (seconds), got an integer of 1329 bits",
        id="400-digits",
    ),
    (b"refresh_seconds = true", "refresh_seconds must be a number 0.5-3600 (seconds), got true"),
    (b'[defaults]\nimage = ""', 'defaults.image must be an image name like ubuntu:24.04, got ""'),
    (b'[defaults]\nimage = "a b"', "defaults.image must be an image name"),
    (b"[defaults]\ncpus = 0", "defaults.cpus must be an integer 1-256, got 0"),
    (b"[defaults]\ncpus = 1000", "defaults.cpus must be an integer 1-256, got 1000"),
    (
        b"[defaults]\nmemory_mib = 128",
        "defaults.memory_mib must be an integer 256-4194304 (MiB, at most 4 TiB)",
    ),
    (b"[defaults]\nmemory_mib = 4194305", "defaults.memory_mib must be an integer 256-4194304"),
    (b"[defaults]\nrecipe = 5", "defaults.recipe must be a path, got 5"),
    (b'[defaults]\nrecipe = "a\\u0000b"', "defaults.recipe must be a path"),
    (b"[ports]\nlow = 80", "ports.low must be an integer 1024-65535, got 80"),
    (
        b"[ports]\nlow = 5000\nhigh = 4000",
        "ports: need 1024 <= low <= high <= 65535, got 5000-4000",
    ),
    (
        b"[archive]\npart_size_mib = 0",
        "archive.part_size_mib must be an integer 1-65536 (MiB), got 0",
    ),
    (b'[archive]\nbackups_dir = "~nosuchuser-hbtui/x"', "archive.backups_dir must be a path"),
    (b"[keymap]\nnew = 5", "keymap.new must be keys like ctrl+n, got 5"),
    (b'[keymap]\nnew = ""', 'keymap.new must be keys like ctrl+n, got ""'),
    (b"keymap = []", "keymap must be a table, got an array"),
    (b"hosts = 3", "hosts must be a table, got 3"),
    (b"[hosts]\nmac = 3", "hosts.mac must be a table, got 3"),
    (b'[hosts.mac]\nidentity = "x"', 'hosts.mac needs an ssh = "USER@HOST" key'),
    (
        b'[hosts.mac]\nssh = "a b"',
        'hosts.mac.ssh must be USER@HOST[:PORT], like root@build.example.com:2222, got "a b"',
    ),
    (b'[hosts.mac]\nssh = "me@mac:99999"', "hosts.mac.ssh must be USER@HOST[:PORT]"),
    (b"[hosts.mac]\nssh = 22", "hosts.mac.ssh must be USER@HOST[:PORT]"),
    (
        b'[hosts.mac]\nssh = "me@mac"\nports = "9-1"',
        'hosts.mac.ports must be a port range LOW-HIGH like 4790-4999, got "9-1"',
    ),
    (b'[hosts.mac]\nssh = "me@mac"\nports = 5000', "hosts.mac.ports must be a port range"),
    (b'[hosts.mac]\nssh = "me@mac"\ncolour = 1', "unknown key hosts.mac.colour"),
    (b'[hosts.Mac]\nssh = "me@mac"', "hosts.Mac: a host name starts with a lower-case letter"),
    (b'[hosts.local]\nssh = "me@mac"', "hosts.local: 'local' means this machine"),
    (b"nonsense = 1", "unknown key nonsense"),
]


@pytest.mark.parametrize("text, message", CONFIG_CASES)
def test_a_damaged_config_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "config.toml"
    path.write_bytes(text)
    with pytest.raises(ConfigError) as caught:
        load_config(paths_in(tmp_path))
    assert isinstance(caught.value, UsageError)
    assert message in one_clear_error(caught.value, path)
    assert str(caught.value).startswith(f"config {path}: ")


def test_a_value_with_a_line_break_stays_on_one_line(tmp_path):
    path = tmp_path / "config.toml"
    path.write_bytes(b'[hosts.mac]\nssh = "me@mac\\nrm -rf"')
    with pytest.raises(ConfigError) as caught:
        load_config(paths_in(tmp_path))
    assert 'got "me@mac\\nrm -rf"' in one_clear_error(caught.value, path)


@pytest.mark.parametrize("what", ["config.toml", "registry.toml"])
def test_a_folder_where_the_file_should_be(tmp_path, what):
    path = tmp_path / what
    path.mkdir()
    with pytest.raises(HbtuiError) as caught:
        if what == "config.toml":
            load_config(paths_in(tmp_path))
        else:
            Registry(path).read()
    assert "it is a folder, not a file" in one_clear_error(caught.value, path)


def test_a_file_where_the_folder_should_be(tmp_path):
    (tmp_path / "home").write_text("")
    path = tmp_path / "home" / "registry.toml"
    with pytest.raises(RegistryError) as caught:
        Registry(path).read()
    assert "cannot read it: Not a directory" in one_clear_error(caught.value, path)
    with pytest.raises(RegistryError, match="cannot open its lock"):
        asyncio.run(Registry(path).update("web", status="ready"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
@pytest.mark.parametrize("what", ["config.toml", "registry.toml"])
def test_an_unreadable_file(tmp_path, what):
    path = tmp_path / what
    path.write_text("")
    path.chmod(0)
    with pytest.raises(HbtuiError) as caught:
        if what == "config.toml":
            load_config(paths_in(tmp_path))
        else:
            Registry(path).read()
    assert "cannot read it: Permission denied" in one_clear_error(caught.value, path)


@pytest.mark.parametrize("what", ["config.toml", "registry.toml"])
def test_a_file_that_cannot_be_read(tmp_path, what, monkeypatch):
    """The same as test_an_unreadable_file, for root too (which reads any file)."""
    path = tmp_path / what
    path.write_text("")

    real_open = os.open

    def refuse(file, flags, *args, **kwargs):
        if Path(file) == path:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(HbtuiError) as caught:
        if what == "config.toml":
            load_config(paths_in(tmp_path))
        else:
            Registry(path).read()
    assert "cannot read it: Permission denied" in one_clear_error(caught.value, path)


def test_an_empty_or_missing_file_is_the_defaults(tmp_path):
    """No file is the defaults for both; an empty config too. An empty registry is not
    "no boxes": hbtui always writes its version, so an empty one was cut short."""
    assert load_config(paths_in(tmp_path)) == Config()
    assert Registry(tmp_path / "registry.toml").read().rows == {}
    (tmp_path / "config.toml").write_text("")
    (tmp_path / "registry.toml").write_text("")
    assert load_config(paths_in(tmp_path)) == Config()
    with pytest.raises(RegistryError, match="no version = 1"):
        Registry(tmp_path / "registry.toml").read()


def test_integers_stand_for_floats_and_old_rows_get_defaults(tmp_path):
    (tmp_path / "config.toml").write_text("refresh_seconds = 3\n[engine]\ntimeout = 30\n")
    cfg = load_config(paths_in(tmp_path))
    assert cfg.refresh_seconds == 3.0 and isinstance(cfg.engine.timeout, float)
    (tmp_path / "registry.toml").write_text("version = 1\n[boxes.local.web]\nport = 4800\n")
    rec = Registry(tmp_path / "registry.toml").read().get("web")
    assert rec is not None and (rec.status, rec.owner_pid, rec.last_save) == ("provisioning", 0, "")


# ---------------------------------------------------------------------------
# Writing: nothing is saved that reading would refuse.


@pytest.mark.parametrize(
    "record, message",
    [
        (BoxRecord(name="web", port=80), "row local/web: port must be an integer 1024-65535"),
        (BoxRecord(name="Web", port=4800), "row local/Web: name must be a box name"),
        (BoxRecord(name="web", port=4800, status="done"), "row local/web: status must be one of"),
        (BoxRecord(name="web", port=4800, owner_pid=2**40), "owner_pid must be"),
        (BoxRecord(name="web", port=4800, host="local\n"), "host must be"),
    ],
)
def test_a_bad_row_is_never_written(tmp_path, record, message):
    path = tmp_path / "registry.toml"
    path.write_bytes(SAMPLE_REGISTRY)
    reg = Registry(path)

    async def go() -> None:
        async with reg.transaction() as boxes:
            boxes.put(record)

    with pytest.raises(RegistryError) as caught:
        asyncio.run(go())
    text = one_clear_error(caught.value, path)
    assert "refusing to write" in text and message in text
    assert path.read_bytes() == SAMPLE_REGISTRY


def test_two_rows_on_one_port_are_never_written(tmp_path):
    path = tmp_path / "registry.toml"
    reg = Registry(path)

    async def go() -> None:
        async with reg.transaction() as boxes:
            boxes.put(BoxRecord(name="a", port=4800))
            boxes.put(BoxRecord(name="b", port=4800))

    with pytest.raises(RegistryError, match="port 4800 is also the port of row local/a"):
        asyncio.run(go())
    assert not path.exists()


def test_a_bad_config_is_never_saved(tmp_path):
    cfg = Config()
    cfg.defaults.cpus = 0
    with pytest.raises(ConfigError, match=r"defaults\.cpus must be an integer 1-256, got 0"):
        save_config(paths_in(tmp_path), cfg)
    cfg = Config(hosts={"mac": HostSettings(ssh="me@mac", ports="1-2")})
    with pytest.raises(ConfigError, match=r"hosts\.mac\.ports"):
        save_config(paths_in(tmp_path), cfg)
    assert not (tmp_path / "config.toml").exists()


# ---------------------------------------------------------------------------
# The CLI prints the error as one line, without a traceback.


def test_the_cli_says_what_is_wrong_with_the_config(hbtui_home):
    (hbtui_home / "config.toml").write_text('[hosts.mac]\nssh = "me@mac"\nports = "9-1"\n')
    done = subprocess.run([HBTUI_BIN, "config", "show"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: config ") and "hosts.mac.ports must be" in line
    assert str(hbtui_home / "config.toml") in line


def test_the_cli_says_what_is_wrong_with_the_registry(hbtui_home):
    (hbtui_home / "registry.toml").write_text('version = 1\n[boxes.local.web]\nport = "abc"\n')
    done = subprocess.run(
        [HBTUI_BIN, "ports", "--json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()
    assert line == (
        f"error: registry {hbtui_home / 'registry.toml'}: row local/web: "
        'port must be an integer 1024-65535, got "abc"'
    )


@pytest.mark.parametrize("kind", ["zero-device", "fifo"])
@pytest.mark.parametrize("what", ["config.toml", "registry.toml"])
def test_a_state_file_that_never_ends_is_refused_at_once(tmp_path, what, kind):
    """A link to /dev/zero would be read until memory runs out, a FIFO would hang."""
    path = tmp_path / what
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    with pytest.raises(HbtuiError) as caught:
        if what == "config.toml":
            load_config(paths_in(tmp_path))
        else:
            Registry(path).read()
    assert "not a regular file" in one_clear_error(caught.value, path)


def test_a_secrets_index_entry_that_is_not_an_object_is_one_error_not_dropped(tmp_path):
    """It was dropped without a word ("No secrets yet"), and the next `secrets set`
    wrote the index without it, orphaning its value in the store."""
    from hbtui.config import Config
    from hbtui.core.keys.secrets import SecretsError, SecretStore
    from hbtui.paths import resolve_paths

    secrets = SecretStore(resolve_paths({"HBTUI_HOME": str(tmp_path)}), Config(), lambda _: b"pw")
    secrets.index_path.parent.mkdir(parents=True, exist_ok=True)
    secrets.index_path.write_text('{"anthropic": 5, "openai": {"store": "file"}}')
    before = secrets.index_path.read_bytes()
    with pytest.raises(SecretsError, match="the entry 'anthropic' is not an object"):
        secrets.names()
    with pytest.raises(SecretsError):
        secrets.put("github", "value")
    assert secrets.index_path.read_bytes() == before
