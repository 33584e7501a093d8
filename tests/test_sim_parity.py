"""The simulator against the real smolvm 1.32.2: same JSON shapes, same error codes and texts.

Only operations the real engine can do without booting a guest are compared.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.sim, pytest.mark.real_engine]


class Engine:
    def __init__(self, binary: str, state_dir: Path) -> None:
        self.binary = binary
        self.state_dir = state_dir
        self.made: set[str] = set()

    def run(self, *args: str) -> subprocess.CompletedProcess:
        argv = [self.binary, "--error-format", "json", "--state-dir", str(self.state_dir), *args]
        env = {k: v for k, v in os.environ.items() if k != "SMOLVM_MACHINE_NAME"}
        return subprocess.run(
            argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env
        )

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, (self.binary, args, done.stderr)
        return done.stdout

    def error(self, *args: str) -> dict:
        done = self.run(*args)
        assert done.returncode == 1, (self.binary, args, done.returncode, done.stdout, done.stderr)
        lines = [ln for ln in done.stderr.splitlines() if ln.startswith("{")]
        return json.loads(lines[-1])["error"]

    def create(self, name: str, *args: str) -> subprocess.CompletedProcess:
        self.made.add(name)
        return self.run("machine", "create", "--name", name, *args)

    def cleanup(self) -> None:
        for name in sorted(self.made):
            self.run("machine", "delete", "--name", name, "--force")


@pytest.fixture
def engines(real_smolvm: str, sim_smolvm: str, tmp_path: Path):
    pair = []
    for label, binary in (("real", real_smolvm), ("sim", sim_smolvm)):
        d = tmp_path / label
        d.mkdir()
        pair.append(Engine(binary, d))
    try:
        yield pair
    finally:
        for e in pair:
            e.cleanup()


CREATE = (
    "--image",
    "alpine",
    "--cpus",
    "2",
    "--mem",
    "1024",
    "--net",
    "-p",
    "18080:8080",
    "-p",
    "18081:8081",
    "--label",
    "hbtui=1",
    "--label",
    "hbtui.port=18080",
    "--",
    "/bin/sh",
    "-c",
    "sleep 100",
)


def shape(d: dict) -> dict:
    return {k: type(v).__name__ for k, v in d.items()}


def test_ls_and_status_json_match(engines) -> None:
    real, sim = engines
    for e in engines:
        e.create("b1", *CREATE)
        e.create("b2")
    r_ls, s_ls = (json.loads(e.ok("machine", "ls", "--json")) for e in engines)
    assert [m["name"] for m in r_ls] == [m["name"] for m in s_ls] == ["b1", "b2"]
    for r, s in zip(r_ls, s_ls, strict=False):
        assert list(s) == list(r)  # same keys, same order
        assert shape(s) == shape(r)
        assert {k: v for k, v in s.items() if k != "created_at"} == {
            k: v for k, v in r.items() if k != "created_at"
        }
        assert abs(s["created_at"] - r["created_at"]) < 120
    r_st, s_st = (json.loads(e.ok("machine", "status", "--name", "b1", "--json")) for e in engines)
    assert shape(s_st) == shape(r_st)
    assert s_st == s_ls[0] and r_st == r_ls[0]
    # Text forms: the same table layout and the same status line.
    assert sim.ok("machine", "ls").splitlines()[:2] == real.ok("machine", "ls").splitlines()[:2]
    assert sim.ok("machine", "status", "--name", "b1") == real.ok(
        "machine", "status", "--name", "b1"
    )
    assert sim.ok("machine", "ls", "-q") == real.ok("machine", "ls", "-q")


def test_update_matches(engines) -> None:
    for e in engines:
        e.create("u1", *CREATE)
    args = (
        "machine",
        "update",
        "--name",
        "u1",
        "--cpus",
        "3",
        "--mem",
        "2048",
        "-p",
        "19000:9000",
        "--remove-port",
        "18080:8080",
    )
    real_out, sim_out = (e.ok(*args) for e in engines)
    assert sim_out == real_out
    r, s = (json.loads(e.ok("machine", "status", "--name", "u1", "--json")) for e in engines)
    for key in ("cpus", "memory_mib", "ports"):
        assert s[key] == r[key]
    again = [e.ok("machine", "update", "--name", "u1", "-p", "19000:9000") for e in engines]
    assert again[0] == again[1] == "No changes specified.\n"
    for bad in (("--cpus", "0"), ("--mem", "1")):
        errs = [e.error("machine", "update", "--name", "u1", *bad) for e in engines]
        assert errs[0] == errs[1]
    errs = [e.error("machine", "update", "--name", "ghost", "--cpus", "1") for e in engines]
    assert errs[0] == errs[1]


def test_delete_and_not_found_match(engines) -> None:
    for e in engines:
        e.create("d1")
    outs = [e.ok("machine", "delete", "--name", "d1", "--force") for e in engines]
    assert outs[0] == outs[1]
    for args in (
        ("machine", "status", "--name", "d1"),
        ("machine", "delete", "--name", "d1", "-f"),
        ("machine", "stop", "--name", "d1"),
        ("machine", "start", "--name", "d1"),
        ("machine", "exec", "--name", "d1", "--", "true"),
        ("machine", "logs", "--name", "d1"),
        ("machine", "data-dir", "--name", "d1"),
        ("machine", "cp", "/etc/hostname", "d1:/tmp/x"),
    ):
        errs = [e.error(*args) for e in engines]
        assert errs[0] == errs[1] == {"code": "NOT_FOUND", "message": "vm not found: d1"}, args
    for e in engines:
        e.create("d2")
    errs = [e.error("machine", "delete", "--name", "d2") for e in engines]  # no tty, no --force
    assert errs[0] == errs[1]


def test_duplicate_and_bad_names_match(engines) -> None:
    for e in engines:
        assert e.create("b1").returncode == 0
    errs = [e.error("machine", "create", "--name", "b1") for e in engines]
    assert (
        errs[0]
        == errs[1]
        == {
            "code": "CONFIG_ERROR",
            "message": "config operation failed: "
            "create machine: machine 'b1' already exists or is being created",
        }
    )
    # One name per rule, plus names that break two rules (the order the engine checks in).
    for name in ("a;b", "a--b", "a-", "_a", "a/b", "aé", "a;--", "a/--b", "x" * 129, "", "a\tb"):
        errs = [e.error("machine", "create", f"--name={name}") for e in engines]
        assert errs[0] == errs[1], name
    errs = [e.error("machine", "status", "--name", "a;b") for e in engines]
    assert errs[0] == errs[1]
    for ok_name in ("A1_b", "x" * 128):
        results = [e.create(ok_name).returncode for e in engines]
        assert results == [0, 0], ok_name


def test_not_running_errors_match(engines) -> None:
    for e in engines:
        e.create("n1")
    for args in (
        ("machine", "exec", "--name", "n1", "--", "true"),
        ("machine", "cp", "/etc/hostname", "n1:/tmp/x"),
        ("machine", "cp", "n1:/etc/hostname", "/tmp/never-written"),
        ("machine", "stats", "--name", "n1", "--json"),
    ):
        errs = [e.error(*args) for e in engines]
        assert errs[0] == errs[1], args
        assert errs[0]["code"] == "SMOLVM_ERROR" and "is not running" in errs[0]["message"]
    outs = [e.run("machine", "stop", "--name", "n1") for e in engines]
    assert [o.returncode for o in outs] == [0, 0] and outs[0].stdout == outs[1].stdout
    texts = [e.ok("machine", "logs", "--name", "n1") for e in engines]
    assert texts == ["", ""]


def test_version_line_matches(engines) -> None:
    real, sim = engines
    assert sim.ok("--version") == real.ok("--version")
