"""Fault injection against the simulator: full and read-only disks (small tmpfs mounts),
signals at points of new/save/load, concurrent operations on one box. Each case asserts
the one-line error (no traceback) and what is left: nothing half-made, no plaintext."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hbtui.paths import resolve_paths

from support import HBTUI_BIN, SIM_RECIPE
from support.cli import answers, background, hbtui, ls, one_line_error, tmpfs, wait_for

pytestmark = pytest.mark.sim

PASS = "faults-passphrase-31"


def scratch_left() -> list[Path]:
    top = resolve_paths().data_dir / "scratch"
    return sorted(top.iterdir()) if top.is_dir() else []


@pytest.fixture
def box(sim_env) -> str:
    """A ready box with ~120 MB of incompressible data, so a save takes a moment."""
    done = hbtui("new", "src", "-q", "--recipe", str(SIM_RECIPE), env=sim_env)
    assert done.returncode == 0, done.stderr
    pad = hbtui(
        "exec", "src", "--", "sh", "-c", "head -c 120000000 /dev/urandom > ~/pad", env=sim_env
    )
    assert pad.returncode == 0, pad.stderr
    return "src"


# -- one operation per box --------------------------------------------------------------


def test_a_second_operation_on_a_box_is_refused_while_a_save_runs(sim_env, box, tmp_path):
    first = tmp_path / "first.hbx"
    saving = background("save", box, "-o", str(first), env=sim_env, passphrase=PASS)
    wait_for("the save to start packing", lambda: list(tmp_path.glob(".first.hbx.*")))
    saving.send_signal(signal.SIGSTOP)  # it holds the box for as long as the checks take
    try:
        again = hbtui("save", box, "-o", str(tmp_path / "second.hbx"), env=sim_env, passphrase=PASS)
        one_line_error(again, f"box '{box}' is busy with save (pid {saving.pid})")
        for verb in (("stop", box), ("rm", box, "--force"), ("repair", box)):
            one_line_error(hbtui(*verb, env=sim_env), "busy with save")
        assert ls(sim_env)[box]["busy"] == f"save (pid {saving.pid})"
    finally:
        saving.send_signal(signal.SIGCONT)

    out = saving.communicate(timeout=300)[0]
    assert saving.returncode == 0, out
    assert first.is_file() and not (tmp_path / "second.hbx").exists()
    assert ls(sim_env)[box]["busy"] == ""
    assert hbtui("stop", box, env=sim_env).returncode == 0  # free again


def test_rm_of_a_box_being_created_is_refused(sim_env, tmp_path):
    gates = tmp_path / "gates"
    gates.mkdir()
    env = dict(sim_env, SMOLSIM_GATES=str(gates))
    hold = gates / "cp-.hbtui-recipe.tar.hold"  # the engine held as the recipe goes in
    hold.touch()
    making = background("new", "b2", "--recipe", str(SIM_RECIPE), env=env)
    waiting = hold.with_suffix(".waiting")
    wait_for("the recipe's copy", lambda: waiting.exists() or making.poll() is not None)
    assert making.poll() is None
    try:
        one_line_error(hbtui("rm", "b2", "--force", env=sim_env), "busy with new")
    finally:
        hold.unlink()
    making.communicate(timeout=240)
    assert making.returncode == 0
    assert hbtui("rm", "b2", "--force", env=sim_env).returncode == 0


# -- full and read-only disks -------------------------------------------------------------


def test_save_onto_a_full_disk_is_one_line_and_leaves_nothing(sim_env, box, tmp_path):
    with tmpfs(tmp_path / "small", "2m") as small:
        target = small / "box.hbx"
        done = hbtui("save", box, "-o", str(target), env=sim_env, passphrase=PASS)
        one_line_error(done, "No space left on device")
        assert list(small.iterdir()) == []
    assert scratch_left() == []
    port = ls(sim_env)[box]["port"]
    wait_for("the box to be resumed", lambda: answers(port), timeout=30)


def test_extract_into_a_read_only_disk_is_one_line(sim_env, box, tmp_path):
    archive = tmp_path / "box.hbx"
    assert hbtui("save", box, "-o", str(archive), env=sim_env, passphrase=PASS).returncode == 0
    with tmpfs(tmp_path / "ro", "1m", read_only=True) as ro:
        done = hbtui("extract", str(archive), str(ro / "files"), env=sim_env, passphrase=PASS)
        one_line_error(done, "Read-only file system")


def test_a_load_whose_state_disk_fills_up_rolls_back(sim_env, box, tmp_path):
    archive = tmp_path / "box.hbx"
    assert hbtui("save", box, "-o", str(archive), env=sim_env, passphrase=PASS).returncode == 0
    # The decrypted parts in flight live under hbtui's state home: put it on a small disk
    # (the registry and config fit; a part of /data does not).
    home = Path(sim_env["HBTUI_HOME"])
    saved = {p.name: p.read_bytes() for p in home.iterdir() if p.is_file()}
    with tmpfs(home, "3m"):
        for name, data in saved.items():
            (home / name).write_bytes(data)
        done = hbtui("load", str(archive), "copy", "--recipe", str(SIM_RECIPE), env=sim_env,
                     passphrase=PASS)  # fmt: skip
        one_line_error(done, "No space left on device")
        assert "copy" not in ls(sim_env)
        assert scratch_left() == []


# -- signals -----------------------------------------------------------------------------


def test_sigterm_during_save_resumes_the_box_and_leaves_no_archive(sim_env, box, tmp_path):
    target = tmp_path / "t.hbx"
    saving = background("save", box, "-o", str(target), env=sim_env, passphrase=PASS)
    wait_for("the save to start packing", lambda: list(tmp_path.glob(".t.hbx.*")))
    saving.send_signal(signal.SIGTERM)
    out = saving.communicate(timeout=120)[0]
    assert saving.returncode == 143, out
    assert "Traceback" not in out
    assert not target.exists() and not list(tmp_path.glob(".t.hbx.*"))
    port = ls(sim_env)[box]["port"]
    wait_for("the box to be resumed", lambda: answers(port), timeout=30)
    assert ls(sim_env)[box]["busy"] == ""


def test_a_killed_load_leaves_no_plaintext_once_hbtui_runs_again(sim_env, box, tmp_path):
    archive = tmp_path / "box.hbx"
    assert hbtui("save", box, "-o", str(archive), env=sim_env, passphrase=PASS).returncode == 0
    env = dict(sim_env, HBTUI_PASSPHRASE=PASS)
    # Parts of 1 MiB, so the restore is under way (parts in the scratch folder) for a while.
    home = Path(sim_env["HBTUI_HOME"])
    (home / "config.toml").write_text("[archive]\npart_size_mib = 1\n")
    loading = subprocess.Popen(
        [HBTUI_BIN, "load", str(archive), "half", "--recipe", str(SIM_RECIPE)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for("parts in flight", lambda: any(p.name.startswith("load-") for p in scratch_left()))
    os.kill(loading.pid, signal.SIGKILL)
    loading.wait()
    assert scratch_left(), "the killed load's parts are still there before any run"
    assert ls(sim_env)["half"]["provisioning"] == "failed"  # shown honestly...
    assert scratch_left() == []  # ...and that run swept the plaintext
    assert hbtui("rm", "half", "--force", env=sim_env).returncode == 0


# -- damaged state ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [b"\xff\xfe not utf-8", b"boxes = 5\n", b'[boxes.local.web]\nport = "abc"\n'],
)
def test_a_damaged_registry_is_an_error_not_an_unreachable_host(sim_env, damage):
    registry = resolve_paths().registry_file
    registry.parent.mkdir(parents=True, exist_ok=True)
    registry.write_bytes(damage)
    listed = hbtui("ls", env=sim_env)
    one_line_error(listed, str(registry))
    assert "unreachable" not in listed.stderr
    made = hbtui("new", "b3", "--recipe", str(SIM_RECIPE), env=sim_env)
    one_line_error(made, str(registry))
    assert registry.read_bytes() == damage  # never written back, never "repaired"


def test_a_wrong_engine_state_dir_is_an_error_not_an_unreachable_host(sim_env, tmp_path):
    not_a_folder = tmp_path / "state-file"
    not_a_folder.write_text("x")
    env = dict(sim_env, HBTUI_SMOLVM_STATE_DIR=str(not_a_folder))
    listed = hbtui("ls", env=env)
    one_line_error(listed)
    assert "unreachable" not in listed.stderr


def test_two_saves_racing_for_one_path_never_lose_an_archive(sim_env, box, tmp_path):
    other = hbtui("new", "other", "-q", "--recipe", str(SIM_RECIPE), env=sim_env)
    assert other.returncode == 0, other.stderr
    target = tmp_path / "same.hbx"
    saves = [
        background("save", name, "-o", str(target), env=sim_env, passphrase=PASS)
        for name in (box, "other")
    ]
    outs = [p.communicate(timeout=300)[0] for p in saves]
    codes = sorted(p.returncode for p in saves)
    assert codes[0] == 0 and codes[1] != 0, outs  # one wins, the other fails clearly
    lost = outs[[p.returncode for p in saves].index(codes[1])]
    assert "appeared while this save ran" in lost or "already exists" in lost, lost
    assert "Traceback" not in lost
    assert not list(tmp_path.glob(".same.hbx.*"))
    assert hbtui("verify", str(target), env=sim_env, passphrase=PASS).returncode == 0


def test_save_with_an_empty_output_is_an_error(sim_env):
    one_line_error(hbtui("save", "src", "-o", "", env=sim_env, passphrase=PASS), "-o needs")


# -- found by an adversarial pass -----------------------------------------------------------


def test_a_cancelled_extract_leaves_no_folder_and_no_staging(sim_env, box, tmp_path):
    archive = tmp_path / "box.hbx"
    done = hbtui("save", box, "-o", str(archive), "--no-verify", env=sim_env, passphrase=PASS)
    assert done.returncode == 0, done.stderr
    dest = tmp_path / "files"
    extracting = background("extract", str(archive), str(dest), env=sim_env, passphrase=PASS)
    wait_for("staging", lambda: list(tmp_path.glob(".files.extract-*")) or dest.exists())
    extracting.send_signal(signal.SIGTERM)
    out = extracting.communicate(timeout=120)[0]
    assert extracting.returncode == 143, out
    assert not dest.exists() and not list(tmp_path.glob(".files.extract-*"))


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15])
def test_a_signal_around_machine_creation_leaves_the_name_free(sim_env, delay):
    """Whenever the signal lands, nothing is left that blocks the name."""
    making = background("new", "n1", "--recipe", str(SIM_RECIPE), env=sim_env)
    assert making.stdout is not None
    for line in making.stdout:
        if "creating machine" in line:
            break
    time.sleep(delay)
    making.send_signal(signal.SIGTERM)
    making.communicate(timeout=120)
    assert making.returncode in (0, 143)
    if making.returncode == 143:
        assert "n1" not in ls(sim_env)
        again = hbtui("new", "n1", "-q", "--recipe", str(SIM_RECIPE), env=sim_env)
        assert again.returncode == 0, again.stderr
    assert hbtui("rm", "n1", "--force", env=sim_env).returncode == 0


def test_an_interrupted_repair_leaves_a_healthy_box_healthy(sim_env, box):
    repairing = background("repair", box, "--recipe", str(SIM_RECIPE), env=sim_env)
    assert repairing.stdout is not None
    for line in repairing.stdout:
        if "step 3/" in line:
            break
    repairing.send_signal(signal.SIGTERM)
    out = repairing.stdout.read()  # the rest (communicate() would miss what the loop buffered)
    repairing.wait(120)
    assert repairing.returncode == 143, out
    row = ls(sim_env)[box]
    assert row["provisioning"] == "ready" and row["busy"] == ""
    wait_for("the services", lambda: answers(row["port"]), timeout=30)


def test_a_box_that_failed_provisioning_stops_but_is_not_saved(sim_env, tmp_path):
    making = background("new", "k1", "--recipe", str(SIM_RECIPE), env=sim_env)
    assert making.stdout is not None
    for line in making.stdout:
        if "step 2/" in line:
            break
    making.kill()
    making.wait()
    assert ls(sim_env)["k1"]["provisioning"] == "failed"
    one_line_error(
        hbtui("save", "k1", "-o", str(tmp_path / "k.hbx"), env=sim_env, passphrase=PASS),
        "failed provisioning",
    )
    stopped = hbtui("stop", "k1", env=sim_env)
    assert stopped.returncode == 0, stopped.stderr
    assert hbtui("rm", "k1", "--force", env=sim_env).returncode == 0


def test_ls_with_stdout_closed_is_quiet(sim_env):
    done = subprocess.run(
        [HBTUI_BIN, "ls"], env=sim_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, pass_fds=(), close_fds=True,
    )  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr
    closed = subprocess.run(
        ["sh", "-c", f"{HBTUI_BIN} ls >&-"], env=sim_env, capture_output=True, text=True
    )
    assert closed.returncode == 0 and "Traceback" not in closed.stderr, closed.stderr
