"""save / load / extract / verify against the simulator."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from hbtui.core.boxes.guest import LEASE_SECONDS
from hbtui.core.foundation.registry import Registry
from hbtui.paths import resolve_paths

from support import HBTUI_BIN, SIM_RECIPE
from support.cli import ArgvWatch, as_root

pytestmark = pytest.mark.sim

PASS = "pass-9f1c-correct horse"


def hbtui(
    *args: str, env: dict, passphrase: str | None = None, timeout: float = 300, **kw
) -> subprocess.CompletedProcess:
    env = dict(env)
    env.pop("HBTUI_PASSPHRASE", None)
    if passphrase is not None:
        env["HBTUI_PASSPHRASE"] = passphrase
    return subprocess.run(
        [HBTUI_BIN, *args], env=env, capture_output=True, text=True, timeout=timeout, **kw
    )


def executor_answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
            return b"executor" in resp.read()
    except OSError:
        return False


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def ls(env) -> dict[str, dict]:
    done = hbtui("ls", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return {b["name"]: b for b in json.loads(done.stdout)}


def test_save_verify_load_extract_round_trip(sim_env, tmp_path, hbtui_home):
    # Small parts and a transfer cap: a 300 MB payload needs many machine-cp calls.
    (hbtui_home / "config.toml").write_text("[archive]\npart_size_mib = 64\n")
    env = dict(sim_env, SMOLSIM_CP_MAX_BYTES=str(65 * 2**20))
    assert hbtui("new", "src", "-q", "--recipe", str(SIM_RECIPE), env=env).returncode == 0
    fill = hbtui(
        "exec",
        "src",
        "--",
        "sh",
        "-c",
        "head -c 300000000 /dev/urandom > ~/workspace/big.bin && "
        "echo 'MARKER-plain-text-7731' > ~/workspace/marker.txt && "
        "ln -s workspace/marker.txt ~/link && "
        "cd ~ && sha256sum workspace/big.bin workspace/marker.txt",
        env=env,
    )
    assert fill.returncode == 0, fill.stderr
    archive = tmp_path / "src.hbx"
    with ArgvWatch(PASS, environ=True) as watch:
        saved = hbtui("save", "src", "-o", str(archive), "--json", env=env, passphrase=PASS)
    assert saved.returncode == 0, saved.stderr
    assert watch.samples > 5 and watch.hits == [], f"passphrase visible in {watch.hits}"
    assert json.loads(saved.stdout)["archive"] == str(archive)
    assert archive.stat().st_mode & 0o777 == 0o600
    assert archive.stat().st_size > 300_000_000
    with open(archive, "rb") as fh:
        assert not any(
            b"MARKER-plain-text" in block for block in iter(lambda: fh.read(1 << 20), b"")
        )
    assert ls(env)["src"]["last_save"]
    assert ls(env)["src"]["state"] == "running"  # services resumed

    assert hbtui("verify", str(archive), env=env, passphrase=PASS).returncode == 0
    info = hbtui("archive", "info", str(archive), "--json", env=env, passphrase=None)
    assert json.loads(info.stdout)["format_version"] == 1

    with ArgvWatch(PASS, environ=True) as watch:
        loaded = hbtui(
            "load", str(archive), "dst", "-q", "--recipe", str(SIM_RECIPE), env=env, passphrase=PASS
        )
    assert watch.hits == [], f"passphrase visible in {watch.hits}"
    assert loaded.returncode == 0, loaded.stdout + loaded.stderr
    boxes = ls(env)
    assert boxes["dst"]["state"] == "running" and boxes["dst"]["provisioning"] == "ready"
    assert boxes["dst"]["port"] != boxes["src"]["port"]
    check = hbtui(
        "exec",
        "dst",
        "--",
        "sh",
        "-c",
        "cd ~ && sha256sum workspace/big.bin "
        "workspace/marker.txt && readlink link && stat -c %U workspace/big.bin",
        env=env,
    )
    lines = check.stdout.splitlines()
    assert lines[:2] == fill.stdout.splitlines()
    assert lines[2:] == ["workspace/marker.txt", "agent"]

    out_dir = tmp_path / "files"
    assert hbtui("extract", str(archive), str(out_dir), env=env, passphrase=PASS).returncode == 0
    assert (out_dir / "home/agent/workspace/marker.txt").read_text() == "MARKER-plain-text-7731\n"
    assert (out_dir / "home/agent/workspace/big.bin").stat().st_size == 300_000_000


@pytest.fixture
def small_archive(sim_env, tmp_path):
    assert hbtui("new", "src", "-q", "--recipe", str(SIM_RECIPE), env=sim_env).returncode == 0
    hbtui("exec", "src", "--", "sh", "-c", "echo hello > ~/workspace/hello", env=sim_env)
    archive = tmp_path / "small.hbx"
    done = hbtui("save", "src", "-o", str(archive), env=sim_env, passphrase=PASS)
    assert done.returncode == 0, done.stderr
    return archive


def _damaged(archive: Path, how: str) -> Path:
    data = bytearray(archive.read_bytes())
    if how == "flipped":
        data[len(data) // 2] ^= 0x01
    else:
        data = data[: len(data) - 100]
    bad = archive.with_name(f"{how}.hbx")
    bad.write_bytes(bytes(data))
    return bad


@pytest.mark.parametrize("how", ["wrong-passphrase", "flipped", "truncated"])
def test_a_bad_archive_creates_nothing(sim_env, small_archive, tmp_path, how):
    archive = small_archive if how == "wrong-passphrase" else _damaged(small_archive, how)
    passphrase = "not the passphrase" if how == "wrong-passphrase" else PASS
    before = ls(sim_env)
    done = hbtui(
        "load", str(archive), "dst", "--recipe", str(SIM_RECIPE), env=sim_env, passphrase=passphrase
    )
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert done.stderr.count("error:") == 1
    assert ls(sim_env).keys() == before.keys()
    assert Registry(resolve_paths().registry_file).read().get("dst") is None
    dest = tmp_path / "out"
    assert (
        hbtui("extract", str(archive), str(dest), env=sim_env, passphrase=passphrase).returncode
        != 0
    )
    assert not dest.exists() and not list(tmp_path.glob(".out*"))
    if how != "wrong-passphrase":
        assert hbtui("verify", str(archive), env=sim_env, passphrase=PASS).returncode != 0


def test_an_old_gpg_backup_extracts_and_loads(sim_env, tmp_path):
    tree = tmp_path / "data" / "home" / "agent" / "workspace"
    tree.mkdir(parents=True)
    (tree / "notes.md").write_text("from the bash tool\n")
    tgz = tmp_path / "old.tar.gz"
    subprocess.run(["tar", "czf", str(tgz), "-C", str(tmp_path / "data"), "."], check=True)
    backup = tmp_path / "old-20260101-000000.tar.gz.gpg"
    (tmp_path / "gnupg").mkdir(mode=0o700)
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
            "--passphrase-fd",
            "0",
            "--symmetric",
            "--cipher-algo",
            "AES256",
            "-o",
            str(backup),
            str(tgz),
        ],
        input=PASS.encode(),
        check=True,
        capture_output=True,
        env=dict(os.environ, GNUPGHOME=str(tmp_path / "gnupg")),
    )
    out = tmp_path / "restored"
    done = hbtui("extract", str(backup), str(out), env=sim_env, passphrase=PASS)
    assert done.returncode == 0, done.stderr
    assert (out / "home/agent/workspace/notes.md").read_text() == "from the bash tool\n"
    loaded = hbtui(
        "load", str(backup), "old", "-q", "--recipe", str(SIM_RECIPE), env=sim_env, passphrase=PASS
    )
    assert loaded.returncode == 0, loaded.stderr
    cat = hbtui("exec", "old", "--", "cat", "notes.md", env=sim_env)  # cwd: ~/workspace
    assert cat.stdout == "from the bash tool\n"


def test_a_killed_save_leaves_no_file_and_the_box_heals_itself(sim_env, small_archive, tmp_path):
    """SIGKILL mid-save: no archive at the final path, its temporary file beside it is
    removed by the next hbtui run (it stayed for good, as large as the save had got), and
    since the save's quiesce is a lease only the live process renews, the box's services
    come back by themselves once it lapses, with nobody running `start`.
    The lease is checked to lapse within LEASE_SECONDS, then moved to its end (as the
    clock would) so the test need not wait for it."""
    target = tmp_path / "killed.hbx"
    hbtui("exec", "src", "--", "sh", "-c", "head -c 200000000 /dev/urandom > ~/pad", env=sim_env)
    env = dict(sim_env, HBTUI_PASSPHRASE=PASS)
    proc = subprocess.Popen(
        [HBTUI_BIN, "save", "src", "-o", str(target)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # The archive's temporary file once it has bytes: an empty one of the same name is
    # made and dropped before the quiesce, to learn early that the folder is writable.
    deadline = time.monotonic() + 60
    while not any(_size(p) for p in tmp_path.glob(".killed.hbx.*")):
        assert time.monotonic() < deadline, "the save wrote nothing within 60 s"
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    assert not target.exists()
    assert list(tmp_path.glob(".killed.hbx.*"))
    port = ls(sim_env)["src"]["port"]  # an hbtui run: it sweeps what the killed one left
    assert list(tmp_path.glob(".killed.hbx.*")) == []
    assert not executor_answers(port), "the box should still be quiesced right after the kill"
    marker = "/data/home/agent/.config/hermes-box/quiesced"
    kind, until = as_root(sim_env, "src", f"cat {marker}").split()
    assert kind == "lease" and 0 < int(until) - time.time() <= LEASE_SECONDS + 1
    as_root(sim_env, "src", f'echo "lease $(($(date +%s) - 1))" > {marker}')
    lapsed = time.monotonic()
    while not executor_answers(port):  # the supervisor's next pass, 5 s apart
        assert time.monotonic() - lapsed < 15, "services did not come back once the lease ran out"
        time.sleep(0.5)


def test_a_killed_load_leaves_a_failed_box_that_rm_removes(sim_env, small_archive):
    env = dict(sim_env, HBTUI_PASSPHRASE=PASS)
    proc = subprocess.Popen(
        [HBTUI_BIN, "load", str(small_archive), "half", "--recipe", str(SIM_RECIPE)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "step 3/" in line:
            break
    proc.kill()
    proc.wait()
    box = ls(sim_env)["half"]
    assert box["provisioning"] == "failed"
    assert hbtui("rm", "half", "--force", env=sim_env).returncode == 0
    assert "half" not in ls(sim_env)
