"""The CLI's contract: version, doctor, JSON output, one-line errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from hbtui.core.doctor.checks import boot_problems, kvm_problems
from hbtui.environment import pid_alive

from support import HBTUI_BIN
from support.cli import background, wait_for


def hbtui(*args: str, env=None, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HBTUI_BIN, *args], env=env, capture_output=True, text=True, input=input, timeout=300
    )


def test_version():
    from hbtui import __version__

    done = hbtui("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"hbtui {__version__}")


def test_doctor_json_names_the_engine_and_the_boot_problem(hbtui_home):
    import os

    done = hbtui("doctor", "--json", env=dict(os.environ))
    report = json.loads(done.stdout)
    assert report["engine"]["version"].startswith("1.")
    assert report["engine"]["path"]
    problems = boot_problems()
    assert report["can_boot"] is (False if problems else None)
    assert done.returncode == (1 if problems else 0 if report["ok"] else 1)
    if problems:
        assert report["boot_problem"] and "guests cannot boot here" in str(report["checks"])


def checks_of(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


PROBE_STAGES = ["probe create", "probe start", "probe exec", "probe stop", "probe delete"]


@pytest.fixture
def short_tmp():
    """A TMPDIR short enough for the probe to keep its state in (the engine's sockets go
    below it; a pytest folder is too long, and the probe would use /tmp instead)."""
    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.sim
def test_doctor_with_the_simulator_says_so_and_passes(sim_env):
    """It said "FAIL boot: guests cannot boot here" (this host's KVM) and exited 1, while
    every simulator box booted: the host's virtualisation is no matter for the simulator."""
    done = hbtui("doctor", env=sim_env)
    assert done.returncode == 0, done.stdout + done.stderr
    engine, boot = done.stdout.splitlines()[:2]
    assert f"at {sim_env['HBTUI_SMOLVM']} (from HBTUI_SMOLVM)" in engine
    assert "the smolvm simulator, not a real engine" in engine
    assert boot.startswith("  ok  boot: the simulator runs each machine as namespaces")
    assert "KVM and Hypervisor.framework checks do not apply" in boot
    report = json.loads(hbtui("doctor", "--json", env=sim_env).stdout)
    assert report["engine"] == {
        "path": sim_env["HBTUI_SMOLVM"],
        "version": "1.32.2",
        "source": "environment",
        "simulator": True,
    }
    assert report["ok"] and report["can_boot"] is None and report["boot_problem"] is None


@pytest.mark.sim
def test_doctor_names_a_configured_engine_as_the_config_s(hbtui_home, sim_smolvm):
    (hbtui_home / "config.toml").write_text(f'[engine]\npath = "{sim_smolvm}"\n')
    report = json.loads(hbtui("doctor", "--json", env=dict(os.environ)).stdout)
    assert report["engine"]["source"] == "config" and report["engine"]["simulator"] is True
    assert "(from [engine] path in config.toml)" in checks_of(report)["engine"]["detail"]


@pytest.mark.real_engine
def test_doctor_names_the_bundled_engine(hbtui_home, real_smolvm):
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # no smolvm on PATH: the bundled one
    report = json.loads(hbtui("doctor", "--json", env=env).stdout)
    assert report["engine"]["source"] == "bundled" and report["engine"]["simulator"] is False
    assert report["engine"]["path"] == real_smolvm
    assert (
        "the bundled engine, from the smolmachines package"
        in (checks_of(report)["engine"]["detail"])
    )


@pytest.mark.sim
def test_doctor_probe_boots_a_throwaway_machine_on_the_simulator(sim_env, short_tmp):
    """`--probe` returned at once without trying anything; now each stage is a line with
    its time, and nothing of the machine is left (its state folder is in TMPDIR)."""
    scratch = short_tmp
    env = {**sim_env, "TMPDIR": str(scratch)}
    done = hbtui("doctor", "--probe", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    stages = [ln for ln in done.stdout.splitlines() if " probe " in ln]
    assert [ln.split(":")[0].split(None, 1)[1] for ln in stages] == PROBE_STAGES
    assert all(re.fullmatch(r"  ok  probe \w+: \d+\.\d+ s", ln) for ln in stages), stages
    assert list(scratch.iterdir()) == []
    report = json.loads(hbtui("doctor", "--probe", "--json", env=env).stdout)
    assert report["ok"] and report["can_boot"] is True
    assert [n for n in checks_of(report) if n.startswith("probe")] == PROBE_STAGES
    assert list(scratch.iterdir()) == []


@pytest.mark.sim
def test_doctor_probe_cleans_up_when_interrupted(sim_env, tmp_path, short_tmp):
    """Ctrl-C while the engine makes the machine: the stage says it was interrupted, the
    machine and its state folder go, and the exit status is Ctrl-C's."""
    scratch, gates = short_tmp, tmp_path / "gates"
    gates.mkdir()
    hold = gates / "create.hold"
    hold.touch()
    env = {**sim_env, "TMPDIR": str(scratch), "SMOLSIM_GATES": str(gates)}
    doctor = background("doctor", "--probe", env=env)
    waiting = gates / "create.waiting"
    wait_for("the probe's create", lambda: waiting.exists() or doctor.poll() is not None)
    engine = int(waiting.read_text())
    doctor.send_signal(signal.SIGINT)
    out, _ = doctor.communicate(timeout=60)
    hold.unlink()
    wait_for("the engine's create to end", lambda: not pid_alive(engine))
    assert doctor.returncode == 130, out
    assert "FAIL  probe create: interrupted after" in out
    assert "  ok  probe delete: " in out and "probe start" not in out
    assert "Traceback" not in out and out.rstrip().endswith("error: interrupted")
    assert list(scratch.iterdir()) == []


@pytest.mark.real_engine
def test_doctor_probe_with_the_real_engine_says_how_far_it_got(hbtui_home, real_smolvm, short_tmp):
    """Here the real engine makes the machine and cannot boot it: the start is the stage
    that fails, with the engine's own reason; the machine is deleted all the same."""
    scratch = short_tmp
    env = {**os.environ, "HBTUI_SMOLVM": real_smolvm, "TMPDIR": str(scratch)}
    done = hbtui("doctor", "--probe", "--json", env=env)
    report = json.loads(done.stdout)
    checks = checks_of(report)
    assert report["engine"]["simulator"] is False
    assert checks["probe create"]["ok"] and checks["probe delete"]["ok"]
    if report["can_boot"]:
        assert done.returncode == 0 and [n for n in checks if n.startswith("probe")] == PROBE_STAGES
        return
    start = checks["probe start"]
    assert done.returncode == 1 and not start["ok"] and start["needed"]
    assert start["detail"].startswith("failed after ") and "(exec not tried)" in start["detail"]
    assert "socket path" not in start["detail"]  # the boot's own reason, not the probe's folder
    assert report["boot_problem"] == f"probe start: {start['detail']}"
    assert "probe exec" not in checks and "probe stop" not in checks
    if boot_problems():  # the host check's reason is advice now; the probe decides
        assert not checks["boot"]["needed"] and start["fix"] == checks["boot"]["fix"]
    assert list(scratch.iterdir()) == []


def test_kvm_diagnosis_explains_the_missing_group(tmp_path):
    dev = tmp_path / "kvm"
    dev.write_text("")
    dev.chmod(0o600)
    sysmod = tmp_path / "sys"
    sysmod.mkdir()
    [(why, fix)] = kvm_problems(dev=dev, sysmod=sysmod, euid=0)
    assert "uid 2000000" in why and fix == "groupadd -r kvm; chgrp kvm /dev/kvm; chmod 660 /dev/kvm"
    (sysmod / "kvm_pvm").mkdir()
    assert any("PVM" in why for why, _ in kvm_problems(dev=dev, sysmod=sysmod, euid=0))
    [(why, _)] = kvm_problems(dev=tmp_path / "absent", sysmod=sysmod, euid=0)
    assert why.startswith("no /dev/kvm")


@pytest.mark.sim
def test_ls_json_with_the_simulator_is_a_list(sim_env):
    done = hbtui("ls", "--json", env=sim_env)
    assert done.returncode == 0 and json.loads(done.stdout) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["rm", "nope", "--force"], "no box named 'nope'"),
        (["start", "nope"], "no box named 'nope'"),
        (["new", "b1", "--cpus", "0"], "--cpus must be 1-256 (got 0)"),
        (["new", "b1", "--recipe", "/nonexistent"], "not a recipe"),
        (["load", "/nonexistent.hbx", "b1"], "no such archive"),
    ],
)
@pytest.mark.sim
def test_user_errors_are_one_line_without_traceback(sim_env, args, message):
    done = hbtui(*args, env=sim_env)
    assert done.returncode != 0
    assert done.stderr.startswith("error: ") and message in done.stderr.replace("\n", " ")
    assert "Traceback" not in done.stderr


@pytest.mark.real_engine
def test_new_with_the_real_engine_here_fails_cleanly(hbtui_home, real_smolvm, real_state_dir):
    """On this kind of host the real engine cannot boot: new must leave nothing behind."""
    import os

    if not boot_problems():
        pytest.skip("this host can boot guests; the clean-failure path is not reachable")
    env = dict(os.environ, HBTUI_SMOLVM=real_smolvm, HBTUI_SMOLVM_STATE_DIR=str(real_state_dir))
    done = hbtui("new", "b1", env=env)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "error:" in done.stderr and "hbtui doctor" in done.stderr
    assert json.loads(hbtui("ls", "--all", "--json", env=env).stdout) == []
    ports = json.loads(hbtui("ports", "--json", env=env).stdout)
    assert all(p["state"] != "used" for p in ports)


@pytest.mark.needs_boot
@pytest.mark.real_engine
def test_a_real_box_end_to_end(hbtui_home, real_smolvm, real_state_dir):
    """The whole flow on a host that boots guests (network needed for the recipe)."""
    import os
    import urllib.request

    problems = boot_problems()
    if problems:
        pytest.skip("guests cannot boot here: " + problems[0][0])
    env = dict(os.environ, HBTUI_SMOLVM=real_smolvm, HBTUI_SMOLVM_STATE_DIR=str(real_state_dir))
    done = hbtui("new", "real1", "-q", env=env)
    assert done.returncode == 0, done.stderr
    [box] = json.loads(hbtui("ls", "--json", env=env).stdout)
    assert box["state"] == "running"
    with urllib.request.urlopen(box["url"], timeout=10) as resp:
        assert resp.status < 500
    assert hbtui("exec", "real1", "--", "id", "-un", env=env).stdout.strip() == "agent"
    assert hbtui("stop", "real1", env=env).returncode == 0
    assert hbtui("start", "real1", env=env).returncode == 0
    assert hbtui("rm", "real1", "--force", env=env).returncode == 0


def test_a_file_where_the_state_home_should_be_is_one_line(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    for home in (blocker, blocker / "below"):
        env = dict(os.environ, HBTUI_HOME=str(home))
        done = hbtui("ls", env=env)
        assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith("error: ") and len(done.stderr.splitlines()) == 1
        assert str(home) in done.stderr


def test_errors_are_one_plain_line_whatever_the_name_holds(hbtui_home):
    """A name is printed as text, never read as markup, and never wrapped."""
    done = hbtui("rm", "x[/]y" + "-long" * 40, "--force")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and "x[/]y" in done.stderr


@pytest.mark.parametrize(
    "argv", [["new"], ["logs", "x", "--tail", "abc"], ["bogus"], ["new", "x", "--image", ""]]
)
def test_argument_errors_are_one_error_line(hbtui_home, argv):
    done = hbtui(*argv)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "--help" in line


@pytest.mark.parametrize(
    ("argv", "help_of"),
    [
        (["rm", "g1", "-y"], "hbtui rm --help"),
        (["secrets", "set", "x", "--zz"], "hbtui secrets set --help"),
        (["--zz"], "hbtui --help"),
    ],
)
def test_an_unknown_option_points_at_the_help_of_its_verb(hbtui_home, argv, help_of):
    """It pointed at `hbtui --help`, the list of verbs, whatever verb it was given to."""
    done = hbtui(*argv)
    assert done.returncode == 2
    assert done.stderr == f"error: unrecognized arguments: {argv[-1]} (see: {help_of})\n"


def test_a_check_without_a_count_says_what_it_needs(hbtui_home):
    """`branch SRC NAME --check CMD` answered with the verb's usage, not what was wrong."""
    done = hbtui("branch", "src", "dst", "--check", "true")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "error: --check runs in each box of a try: it needs --count N\n"


def test_ls_at_a_terminal_gives_a_long_image_s_room_to_the_state_and_port():
    """At a 100-column terminal a box of a 300-character image took every column but BOX,
    URL and IMAGE: STATE, PORT, CPUS, MEM, AGE and PROVISIONING were dropped whole."""
    from rich.console import Console

    from hbtui.cli.output import box_table
    from hbtui.core.foundation.views import BOX, BoxView

    rows = [
        BoxView("b1", "local", BOX, "running", 4937, "http://127.0.0.1:4937/", "x" * 300, 2, 4096,
                provisioning="ready"),
        BoxView("b2", "local", BOX, "stopped", 4938, "http://127.0.0.1:4938/", "ubuntu:24.04", 2,
                4096, provisioning="ready"),
    ]  # fmt: skip
    console = Console(width=100, color_system=None)
    with console.capture() as shown:
        console.print(box_table(rows, show_host=False, fit=True))
    header, first, second = shown.get().splitlines()
    assert header.split() == ["BOX", "STATE", "PORT", "URL", "IMAGE", "CPUS", "MEM", "AGE",
                              "PROVISIONING"]  # fmt: skip
    assert first.split()[:3] == ["b1", "running", "4937"] and "x…" in first
    assert second.split()[:3] == ["b2", "stopped", "4938"] and "ubuntu:24.04" in second
    assert max(len(line) for line in (header, first, second)) <= 100


def _work_rows():
    from hbtui.core.foundation.views import BOX, BoxView

    return [
        BoxView("b1", "local", BOX, "running", 4937, "http://127.0.0.1:4937/", "ubuntu:24.04", 2,
                4096, "2026-01-01T00:00:00Z", provisioning="ready", repo="/home/u/src/proj",
                branch="hb/b1", ahead=3),
        BoxView("b2", "local", BOX, "stopped", 4938, "http://127.0.0.1:4938/", "ubuntu:24.04", 2,
                4096, "2026-01-01T00:00:00Z", provisioning="ready"),
    ]  # fmt: skip


@pytest.mark.parametrize("width", [80, 160])
def test_ls_shows_where_each_box_s_work_is_first_when_narrow(width: int):
    from rich.console import Console

    from hbtui.cli.output import box_table

    console = Console(width=width, color_system=None)
    with console.capture() as shown:
        console.print(box_table(_work_rows(), show_host=False, fit=True, width=width))
    header, first, second = shown.get().splitlines()
    assert max(len(line) for line in (header, first, second)) <= width
    columns = header.split()
    # At 80 columns the end of the table is cut: WORK comes right after BOX there.
    assert columns.index("WORK") == (1 if width == 80 else len(columns) - 1), header
    assert "proj hb/b1 ↑3" in first and "hb/" not in second
    if width == 160:
        assert columns[-2] == "PROVISIONING"


def test_ls_json_carries_each_box_s_repository_branch_and_commits_ahead():
    row, bare = (b.to_json() for b in _work_rows())
    assert (row["repo"], row["branch"], row["ahead"]) == ("/home/u/src/proj", "hb/b1", 3)
    assert (bare["repo"], bare["branch"], bare["ahead"]) == ("", "", None)
