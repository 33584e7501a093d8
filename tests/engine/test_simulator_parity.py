"""The simulator against the real smolvm 1.32.2: same JSON shapes, same error codes and texts.

Only operations the real engine can do without booting a guest are compared.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import tempfile
import zlib
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


def test_pause_and_resume_refusals_match(engines) -> None:
    """What both answer without a boot: a machine never started is not running (so not
    paused), a missing one is not found, a bad name is checked first, as a saved
    execution's."""
    for e in engines:
        e.create("p1", "--", "/bin/sh", "-c", "sleep 100")
    err = both_error(engines, "machine", "pause", "--name", "p1")
    assert err == {
        "code": "CONFLICT",
        "message": "agent operation failed: checkpoint machine: machine 'p1' must be running",
    }
    err = both_error(engines, "machine", "resume", "--name", "p1")
    assert err == {
        "code": "CONFLICT",
        "message": "agent operation failed: resume machine: machine is not paused; use start "
        "for a fresh boot",
    }
    for verb in ("pause", "resume"):
        err = both_error(engines, "machine", verb, "--name", "ghost")
        assert err == {"code": "NOT_FOUND", "message": "vm not found: ghost"}
        for name in ("", "_a", "a-", "a/b", "a--b", "a;b", "aé", "a;--", "x" * 129):
            err = both_error(engines, "machine", verb, f"--name={name}")
            assert err["message"].startswith("config operation failed: saved execution: "), name
        assert [e.run("machine", verb).returncode for e in engines] == [2, 2]  # --name required
    r_st, s_st = (json.loads(e.ok("machine", "status", "--name", "p1", "--json")) for e in engines)
    assert r_st["state"] == s_st["state"] == "created"


def test_version_line_matches(engines) -> None:
    real, sim = engines
    assert sim.ok("--version") == real.ok("--version")


def test_only_the_simulator_answers_its_marker(engines) -> None:
    """`--simulator` is how `hbtui doctor` tells the two apart: the real engine refuses
    the flag as any unknown one; the simulator names itself (and, as root with its
    tools, has no problem to add)."""
    real, sim = engines
    refused = real.run("--simulator")
    assert refused.returncode == 2 and "unexpected argument '--simulator'" in refused.stderr
    assert refused.stdout == ""
    assert sim.ok("--simulator").splitlines() == [
        "smolsim 1.32.2: the smolvm simulator (machines are namespaces, not VMs)"
    ]


# ---- packs, branches, credentials, secrets and egress policy ------------


def stderr_lines(done: subprocess.CompletedProcess) -> list[str]:
    """What a command printed on stderr, without the real binary's packed-assets note."""
    return [ln for ln in done.stderr.splitlines() if ln.strip() and not ln.startswith("note:")]


def both_error(engines, *args: str) -> dict:
    """Run one failing command on both engines; assert the same code and message."""
    errs = [e.error(*args) for e in engines]
    assert errs[0] == errs[1], args
    return errs[0]


def footer(
    assets: int, manifest_off: int, manifest: int, crc: int, magic=b"SMOLPACK", version=1
) -> bytes:
    return struct.pack("<8sIQQQQQI8x", magic, version, 0, 0, assets, manifest_off, manifest, crc)


def test_pack_create_errors_match(engines, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for e in engines:
        e.create("bare", "--", "/bin/sh", "-c", "sleep 100")
        e.create("img", "--image", "alpine")
    # Never started: the real engine names a disk path inside the machine's data dir.
    for name, disk in (("bare", "overlay.raw"), ("img", "storage.raw")):
        dones = [e.run("pack", "create", "--from-vm", name, "-o", str(out / "pk")) for e in engines]
        errs = []
        for e, done in zip(engines, dones, strict=True):
            assert done.returncode == 1, done.stderr
            data_dir = e.ok("machine", "data-dir", "--name", name).strip()
            err = json.loads(stderr_lines(done)[-1])["error"]
            errs.append({**err, "message": err["message"].replace(data_dir, "<DATA>")})
        assert errs[0] == errs[1]
        assert errs[0]["code"] == "SMOLVM_ERROR" and f"<DATA>/{disk}" in errs[0]["message"]
        assert dones[0].stdout == dones[1].stdout  # the same four progress lines
        assert dones[0].stdout.startswith(f"Packing VM '{name}' snapshot...\n")
    err = both_error(engines, "pack", "create", "--from-vm", "img", "-o", f"{out}/pk.smolmachine")
    assert err["code"] == "CONFIG_ERROR" and f"Use --output {out}/pk instead." in err["message"]
    for ghost in ("ghost", "a;b"):
        err = both_error(engines, "pack", "create", "--from-vm", ghost, "-o", str(out / "pk"))
        assert err == {
            "code": "SMOLVM_ERROR",
            "message": f"agent operation failed: pack from VM: VM '{ghost}' not found",
        }
    for args in (("-o", str(out / "pk")), ("--from-vm", "img", "-I", "alpine", "-o", "x"), ()):
        codes = [e.run("pack", "create", *args).returncode for e in engines]
        assert codes == [2, 2], args
    assert sorted(p.name for p in out.iterdir()) == []  # nothing written on any failure


def test_create_from_errors_match(engines, tmp_path: Path) -> None:
    def junk(name: str, data: bytes) -> str:
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)

    manifest = b"{}"
    cases = {
        "missing": str(tmp_path / "missing.smolmachine"),
        "relative": "not-here.smolmachine",
        "folder": str(tmp_path),
        "tiny": junk("tiny.smolmachine", b"tiny"),
        "zeros": junk("zeros.smolmachine", bytes(100)),
        "version": junk("version.smolmachine", bytes(64) + footer(0, 0, 0, 0, version=7)),
        "crc": junk("crc.smolmachine", manifest + footer(0, 0, 2, 12345)),
        "huge": junk("huge.smolmachine", bytes(64) + footer(0, 0, 1 << 33, 0)),
        "exceeds": junk("exceeds.smolmachine", bytes(64) + footer(1 << 33, 1 << 33, 0, 0)),
        "offset": junk("offset.smolmachine", bytes(64) + footer(2, 0, 0, 0)),
    }
    for label, path in cases.items():
        err = both_error(engines, "machine", "create", "--name", "f1", "--from", path)
        assert err["code"] in ("CONFIG_ERROR", "SMOLVM_ERROR"), label
    # A manifest that is not JSON: the same code and prefix (serde's wording is its own).
    not_json = junk("nj.smolmachine", b"{x" + footer(0, 0, 2, zlib.crc32(b"{x")))
    for e in engines:
        err = e.error("machine", "create", "--name", "f1", "--from", not_json)
        assert err["code"] == "SMOLVM_ERROR"
        assert err["message"].startswith("agent operation failed: read .smolmachine: JSON error: ")
        assert err["message"].endswith(" at line 1 column 2")
    # The file is checked before anything else the command line carries.
    missing = cases["missing"]
    for extra in (("--cpus", "0"), ("--credential", "a=X"), ("--allow-host", "nowhere.invalid")):
        err = both_error(engines, "machine", "create", "--name", "a;b", "--from", missing, *extra)
        assert err["message"].endswith(f"file not found: {missing}")
    err = both_error(
        engines, "machine", "create", "--name", "f1", "--from", cases["tiny"], "--cpus", "0"
    )
    assert "too small to contain footer" in err["message"]
    codes = [
        e.run("machine", "create", "--from", missing, "--image", "alpine").returncode
        for e in engines
    ]
    assert codes == [2, 2]


def test_create_from_a_simulator_pack_matches(engines, tmp_path: Path) -> None:
    """The simulator's sidecar has the real layout: the real engine creates from it too."""
    _real, sim = engines
    sim.create("src", "--image", "alpine", "--cpus", "2", "--mem", "512", "--", "sleep", "1000")
    sim.ok("machine", "start", "--name", "src")
    sim.ok("machine", "exec", "--name", "src", "--", "/bin/sh", "-c", "echo packed > /data/m")
    sim.ok("machine", "stop", "--name", "src", "--timeout", "1")
    out = sim.ok("pack", "create", "--from-vm", "src", "-o", str(tmp_path / "pk"))
    assert out.splitlines()[-1] == "Note: Keep the .smolmachine file alongside the binary"
    side = str(tmp_path / "pk.smolmachine")
    assert (tmp_path / "pk").stat().st_mode & 0o111  # the stub is an executable
    for e in engines:
        out = e.ok("machine", "create", "--name", "f1", "--from", side)
        assert out.startswith("Extracting .smolmachine assets...\nCreated machine: f1\n")
        e.create("f2", "--from", side, "--cpus", "3", "-p", "18080:80", "--label", "k=v",
                 "--", "/bin/sh", "-c", "x")  # fmt: skip
    listed = [{m["name"]: m for m in json.loads(e.ok("machine", "ls", "--json"))} for e in engines]
    for name in ("f1", "f2"):
        r, s = listed[0][name], listed[1][name]
        assert list(s) == list(r) and shape(s) == shape(r)
        assert {k: v for k, v in s.items() if k != "created_at"} == {
            k: v for k, v in r.items() if k != "created_at"
        }
    assert listed[1]["f1"]["cmd"] == ["sleep", "1000"] and listed[1]["f1"]["cpus"] == 2
    assert listed[1]["f2"]["cmd"] == ["/bin/sh", "-c", "x"] and listed[1]["f2"]["cpus"] == 3


CREDENTIAL_CASES = (
    "gh=GH_TOKEN",
    "gh@api.github.com",
    "=GH_TOKEN@api.github.com",
    "gh=@a.com",
    "gh=GH_TOKEN@",
    "gh=GH_TOKEN@,",
    "g h=GH_TOKEN@api.github.com",
    "x" * 65 + "=GH_TOKEN@a.com",
    "gh=1GH@api.github.com",
    "gh=GH-TOKEN@api.github.com",
    "a=X=Y@a.com",
    "gh=GH_TOKEN@1.2.3.4",
    "gh=GH_TOKEN@api.github.com:443",
    "gh=GH_TOKEN@https://api.github.com",
    "gh=GH_TOKEN@*.com",
    "a=X@api.*.com",
    "a=X@a..com",
    "a=X@-a.com",
    "a=X@b@a.com",
    "gh=GH_TOKEN@a.com:bogus",
    "a=X@a.com:BODY",
    "a=X@a.com:body:body",
    "a=X@a.com:bogus:body",
    "a=X@a.com::body",
    "a=X@a.com:set-header=x:",
    "a=X@a.com:set-header=a:set-header=b",
    "gh=GH_TOKEN@a.com:set-header=",
    "gh=GH_TOKEN@a.com:set-header=host",
    "a=X@a.com:set-header=Cookie",
    "a=X@a.com:set-header=X Y",
    "",
)

SECRET_CASES = (
    ("--secret-env", "A"),
    ("--secret-env", "=B"),
    ("--secret-file", "A"),
    ("--secret-file", "=/x"),
    ("--secret-file", "A=rel/p"),
    ("--secret-file", "A="),
    ("--secret-keychain", "A"),
    ("--secret-keychain", "=x"),
    ("--secret-keychain", "A="),
    ("--secret-keychain", "A=/x"),
    ("--secret-keychain", "A=svc/"),
)


def test_credential_and_secret_errors_match(engines) -> None:
    for spec in CREDENTIAL_CASES:
        err = both_error(engines, "machine", "create", "--name", "c1", "--credential", spec)
        assert err["code"] == "CONFIG_ERROR", spec
    for flag, value in SECRET_CASES:
        err = both_error(engines, "machine", "create", "--name", "c1", flag, value)
        assert err["code"] == "CONFIG_ERROR" and err["message"].startswith(
            f"config operation failed: {flag}: "
        ), (flag, value)
    for combo in (
        ("--credential", "a=X@a.com", "--credential", "a=Y@b.com"),
        ("--credential", "a=X@a.com", "--credential", "b=X@b.com"),
        (
            "--credential",
            "a=X@a.com:set-header=authorization",
            "--credential",
            "b=Y@a.com:set-header=authorization",
        ),
        ("--secret-env", "A=B", "--secret-env", "A=C"),
        ("--secret-file", "A=/abs", "--secret-env", "A=B"),
        ("--secret-keychain", "A=x", "--secret-env", "A=B"),
        ("--secret-env", "A=B", "--secret-file", "A=rel"),
        ("--credential", "a=X@a.com", "--trust-host-certs", "--cpus", "0"),
        ("--label", "x"),
        ("--label", "=x"),
    ):
        both_error(engines, "machine", "create", "--name", "c1", *combo)


def test_create_check_order_matches(engines) -> None:
    """Which error wins when a command line has several (the real engine's order)."""
    for e in engines:
        e.create("taken")
    for args in (
        ("--name", "a;b", "--cpus", "0"),
        ("--name", "a;b", "--mem", "10"),
        ("--name", "a;b", "--secret-env", "A"),
        ("--name", "a;b", "--credential", "a=1X@a.com"),
        ("--name", "t1", "--cpus", "0", "--credential", "a=1X@a.com"),
        ("--name", "t1", "--cpus", "0", "--secret-env", "B"),
        ("--name", "t1", "--credential", "a=X", "--secret-env", "A"),
        ("--name", "t1", "--secret-file", "A=rel", "--secret-env", "B"),
        ("--name", "t1", "--secret-file", "A=rel", "--secret-keychain", "B"),
        ("--name", "t1", "--label", "=x", "--credential", "a=X"),
        ("--name", "t1", "--label", "=x", "--allow-host-pattern", "=x"),
        ("--name", "t1", "--label", "=x", "--allow-host", "nowhere.invalid"),
        ("--name", "t1", "--allow-host-pattern", "=x", "--allow-host", "nowhere.invalid"),
        ("--name", "t1", "--credential", "a=1X@a.com", "--allow-host-pattern", "=x"),
        ("--name", "t1", "--credential", "a=X@a.com", "--trust-host-certs", "--secret-env", "B"),
        ("--name", "taken", "--credential", "a=1X@a.com"),
        ("--name", "taken", "--cpus", "0"),
        ("--name", "taken", "--allow-host", "nowhere.invalid"),
    ):
        both_error(engines, "machine", "create", *args)


def test_egress_flag_errors_match(engines) -> None:
    err = both_error(
        engines, "machine", "create", "--name", "n1", "--allow-host", "nowhere.invalid"
    )
    # The resolver's own reason depends on this machine's DNS ("Name or service not known";
    # "Temporary failure in name resolution" without a reachable server, as in a test
    # worker's private network): the engine's wording around it does not.
    assert err["code"] == "CONFIG_ERROR"
    assert err["message"].startswith(
        "config operation failed: --allow-host: failed to resolve 'nowhere.invalid': "
        "failed to lookup address information: "
    )
    for pattern in ("=a.com", "a b", "**.a.com"):
        both_error(engines, "machine", "create", "--name", "n1", "--allow-host-pattern", pattern)
    for combo in (
        ("--credential", "a=X@a.com", "--allow-host", "localhost"),
        ("--credential", "a=X@a.com", "--allow-host-pattern", "*.b.com"),
        ("--credential", "a=X@*.a.com", "--allow-host-pattern", "a.com"),
        ("--credential", "a=X@x.a.com", "--allow-host-pattern", "a.com"),
    ):
        err = both_error(engines, "machine", "create", "--name", "n1", *combo)
        assert "is not reachable under the machine's network allow_hosts" in err["message"]


POLICY_MACHINES = {
    "p-cred": ("--credential", "gh=GH_TOKEN@API.github.com,*.githubusercontent.com,"),
    "p-body": ("--credential", "a.b-1=X@a.com:set-header=X-Api-Key:body"),
    "p-secrets": (
        "--secret-env",
        "DB=PROD_DB",
        "--secret-file",
        "CERT=/abs/c.pem",
        "--secret-keychain",
        "K=svc/acct",
    ),
    "p-feed": ("--credential", "a=X@a.com", "--secret-env", "X=HOST_X"),
    "p-hosts": (
        "--allow-host",
        "localhost",
        "--allow-host-pattern",
        "*.a.com",
        "--allow-host-pattern",
        "B.com.",
    ),
    "p-private": ("--block-private",),
    "p-local": ("--outbound-localhost-only", "--block-private"),
    "p-covered": ("--credential", "a=X@x.a.com", "--allow-host-pattern", "*.a.com"),
}
RECORD_KEYS = (
    "allowed_cidrs",
    "dns_filter_hosts",
    "block_private",
    "credential_policy",
    "secret_refs",
    "network",
)


def real_records(state_dir: Path) -> dict[str, dict]:
    """The real engine's machine records (its database), to compare what is stored."""
    db = state_dir / ".local" / "share" / "smolvm" / "server" / "smolvm.db"
    if not db.is_file():
        pytest.skip(f"the real engine keeps its records elsewhere than {db}")
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT name, data FROM vms").fetchall()
    return {name: json.loads(data) for name, data in rows}


def test_policy_flags_are_stored_and_listed_like_the_real_engine(engines) -> None:
    real, sim = engines
    for name, flags in POLICY_MACHINES.items():
        for e in engines:
            assert e.create(name, *flags).returncode == 0, (e.binary, name)
    r_ls, s_ls = (
        {m["name"]: m for m in json.loads(e.ok("machine", "ls", "--json"))} for e in engines
    )
    for name in POLICY_MACHINES:
        r, s = r_ls[name], s_ls[name]
        assert list(s) == list(r), name  # allowed_cidrs/allowed_hosts only when set
        assert {k: v for k, v in s.items() if k != "created_at"} == {
            k: v for k, v in r.items() if k != "created_at"
        }, name
    records = real_records(real.state_dir)
    for name in POLICY_MACHINES:
        mine = json.loads((sim.state_dir / "smolsim/machines" / name / "machine.json").read_text())
        theirs = records[name]
        for key in RECORD_KEYS:
            assert mine.get(key) == theirs.get(key), (name, key)
        placeholders = [rec.get("credential_placeholders") or {} for rec in (mine, theirs)]
        assert placeholders[0].keys() == placeholders[1].keys()
        for binding, value in placeholders[0].items():
            tag = re.sub(r"[^A-Z0-9]", "_", binding.upper())
            for p in (value, placeholders[1][binding]):
                assert re.fullmatch(rf"SMOL_PLACEHOLDER_{tag}_[0-9A-F]{{32}}", p), p


def test_update_allow_list_matches(engines) -> None:
    for e in engines:
        e.create("u1")
        e.create("u2", "--allow-host", "localhost")
        e.create("u3", "--outbound-localhost-only")
    for args in (
        ("u1", "--allow-host", "nowhere.invalid"),  # update does not resolve
        ("u1", "--allow-host", "nowhere.invalid"),
        ("u1", "--allow-host-pattern", "A.com", "--cpus", "2", "-p", "18090:90", "--net"),
        ("u1", "--outbound-localhost-only"),
        ("u1", "--remove-allow-host", "nowhere.invalid"),
        ("u1", "--remove-allow-cidr", "127.0.0.0/8"),
        ("u1", "--net"),
        ("u1", "--no-net"),
        ("u2", "--remove-allow-host", "localhost"),
        ("u3", "--remove-allow-cidr", "127.0.0.0/8"),
    ):
        outs = [e.ok("machine", "update", "--name", *args) for e in engines]
        assert outs[0] == outs[1], args
    for args in (
        ("u1", "--remove-allow-host", "nothere"),
        ("u1", "--remove-allow-cidr", "10.0.0.0/8"),
        ("u1", "--allow-host-pattern", "=x"),
        ("u1", "--allow-host", "a b"),
        ("u2", "--remove-allow-cidr", "127.0.0.1/32"),
        ("u3", "--remove-allow-cidr", "::1/128"),
        ("ghost", "--allow-host-pattern", "=x"),
    ):
        both_error(engines, "machine", "update", "--name", *args)
    codes = [
        e.run("machine", "update", "--name", "u1", "--allow-host", "x", "--no-net").returncode
        for e in engines
    ]
    assert codes == [2, 2]
    r_ls, s_ls = (json.loads(e.ok("machine", "ls", "--json")) for e in engines)
    for r, s in zip(r_ls, s_ls, strict=True):
        assert {k: v for k, v in s.items() if k != "created_at"} == {
            k: v for k, v in r.items() if k != "created_at"
        }


@pytest.fixture
def short_engines(real_smolvm: str, sim_smolvm: str):
    """Like `engines`, under a short /tmp folder: the real engine's control socket lives in
    its data dir, and under pytest's long tmp_path its path passes the 108-byte socket
    limit (then it says `connect control socket: path must be shorter than SUN_LEN`)."""
    root = Path(tempfile.mkdtemp(prefix="sp-", dir="/tmp"))
    pair = []
    for label, binary in (("real", real_smolvm), ("sim", sim_smolvm)):
        (root / label).mkdir()
        pair.append(Engine(binary, root / label))
    try:
        yield pair
    finally:
        for e in pair:
            e.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def test_branch_errors_match(short_engines) -> None:
    engines = short_engines
    for e in engines:
        e.create("src")  # created, never started: not a branch source
        e.create("netsrc", "--net", "-p", "18082:80")
        e.create("taken")
    cases = (
        ("--from", "src", "-n", "kid"),
        ("--from", "src", "--name", "kid", "--no-wait-ready"),
        ("--from", "src", "--name", "kid", "--wait-ready"),
        ("--from", "src", "--name", "kid", "--branchable"),
        ("--from", "ghost", "-n", "kid"),
        ("--from", "ghost", "-n", "kid", "--wait-ready"),
        ("--from", "ghost", "-n", "taken"),
        ("--from", "ghost", "-n", "a;b"),
        ("--from", "a;b", "-n", "kid"),
        ("--from", "src", "-n", "a--b"),
        ("--from", "src", "-n", "taken"),
        ("--from", "src", "-n", "src"),
        ("--from", "src"),
        ("--from", "src", "-n", "kid", "-p", "18083:80"),  # no network, no ports to pin
        ("--from", "netsrc", "-n", "kid", "-p", "18083:80"),
        ("--from", "netsrc", "-n", "kid", "-p", "18083:80/udp"),
        ("--from", "netsrc", "-n", "kid", "--label", "x"),
        ("--from", "netsrc", "-n", "kid", "--label", "=x"),
        ("--golden", "src", "-n", "kid"),
    )
    for args in cases:
        for verb in ("branch", "fork") if args[0] == "--from" and args[1] == "src" else ("branch",):
            dones = [e.run("machine", verb, *args) for e in engines]
            assert [d.returncode for d in dones] == [1, 1], (args, dones[0].stderr)
            assert stderr_lines(dones[0]) == stderr_lines(dones[1]), args
    err = both_error(engines, "machine", "branch", "--from", "src", "-n", "kid")
    assert err == {
        "code": "SMOLVM_ERROR",
        "message": "agent operation failed: fork: golden 'src' is not running forkable; start "
        "it with `machine start --forkable --name src`",
    }
    for args in (("-n", "kid"), ("--from", "src", "-n", "k", "--wait-ready", "--no-wait-ready")):
        assert [e.run("machine", "branch", *args).returncode for e in engines] == [2, 2]
    both_error(engines, "machine", "start", "--name", "ghost", "--forkable")
    for r, s in zip(*(json.loads(e.ok("machine", "ls", "--json")) for e in engines), strict=True):
        assert (s["name"], s["branchable"], s["forkable"], s["parent_machine"]) == (
            r["name"],
            r["branchable"],
            r["forkable"],
            r["parent_machine"],
        )


def test_egress_events_match(engines) -> None:
    for e in engines:
        e.create("g1", "--allow-host", "localhost")
    for args in (("--name", "g1"), ("--name", "ghost"), ("--name", "g1", "--limit", "5"), ()):
        for fmt in ((), ("--json",)):
            outs = [e.ok("machine", "egress-events", *args, *fmt) for e in engines]
            assert outs[0] == outs[1], args
