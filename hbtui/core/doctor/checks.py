"""`hbtui doctor`: can this host run boxes, and if not, why and how to fix it.

Each check is a small function returning a Check. `needed` checks decide the
exit status; the rest are advice. The boot check explains the usual causes
without booting anything (for the smolvm simulator, its own needs instead of
the host's virtualisation); `--probe` boots a throwaway machine (hbtui.core.doctor.probe).
"""

from __future__ import annotations

import grp
import os
import platform
import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hbtui.checks import Check, all_needed_pass
from hbtui.config import Config, overriding
from hbtui.core.doctor.probe import Probe
from hbtui.engine import Engine, EngineError, Located, locate_engine
from hbtui.engine.locate import MIN_VERSION, format_version
from hbtui.engine.runner import Command, RunTimeout
from hbtui.paths import Paths
from hbtui.schema import plain

VM_UID = 2000000  # smolvm drops each VM to this uid when run as root
MIN_FREE_GIB = 10
SIMULATOR_FIX = "run hbtui as root with bubblewrap, util-linux and iproute2 (tests/sim/README.md)"


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)
    engine_path: str | None = None
    engine_version: str | None = None
    engine_source: str | None = None  # environment, config, path or bundled
    simulator: list[str] | None = None  # the simulator's problems here; None: a real engine
    can_boot: bool | None = None  # None: not known without a probe
    boot_problem: str | None = None
    listener: Callable[[Check], None] | None = field(default=None, repr=False)

    def add(self, check: Check) -> None:
        self.checks.append(check)
        if self.listener is not None:
            self.listener(check)

    @property
    def ok(self) -> bool:
        return all_needed_pass(self.checks)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "engine": {
                "path": self.engine_path,
                "version": self.engine_version,
                "source": self.engine_source,
                "simulator": self.simulator is not None,
            },
            "can_boot": self.can_boot,
            "boot_problem": self.boot_problem,
            "checks": [c.to_json() for c in self.checks],
        }


def kvm_problems(
    dev: Path = Path("/dev/kvm"), sysmod: Path = Path("/sys/module"), euid: int | None = None
) -> list[tuple[str, str]]:
    """Every known reason a Linux host cannot boot smolvm guests, each with its fix."""
    euid = os.geteuid() if euid is None else euid
    if not dev.exists():
        return [
            (
                "no /dev/kvm: KVM is not enabled on this host (or this is a container "
                "without the device)",
                "enable virtualisation in the firmware and load kvm_intel or kvm_amd",
            )
        ]
    problems = []
    if (sysmod / "kvm_pvm").exists():
        problems.append(
            (
                "/dev/kvm is PVM, a paravirtual KVM nested inside another VM; smolvm's guest "
                "kernel cannot boot on it (start fails with 'agent did not become ready')",
                "run boxes on a host with hardware KVM or on a Mac, e.g. via hbtui hosts add",
            )
        )
    st = dev.stat()
    if euid == 0:
        try:
            group = grp.getgrgid(st.st_gid).gr_name
        except KeyError:
            group = str(st.st_gid)
        if group != "kvm" or not st.st_mode & stat.S_IRGRP or not st.st_mode & stat.S_IWGRP:
            problems.append(
                (
                    f"/dev/kvm is {stat.filemode(st.st_mode)} {group}: smolvm runs each VM as uid "
                    f"{VM_UID}, which needs read-write access through group kvm "
                    "(start fails with KvmOpen(Error(13)))",
                    "groupadd -r kvm; chgrp kvm /dev/kvm; chmod 660 /dev/kvm",
                )
            )
    elif not os.access(dev, os.R_OK | os.W_OK):
        problems.append(
            (
                "your user cannot read and write /dev/kvm",
                "sudo usermod -aG kvm $USER, then log out and back in",
            )
        )
    return problems


def mac_problems() -> list[tuple[str, str]]:
    if platform.machine() != "arm64":
        return [
            ("smolvm on macOS needs Apple Silicon", "use an Apple Silicon Mac or a Linux KVM host")
        ]
    try:
        out = subprocess.run(
            ["sysctl", "-n", "kern.hv_support"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return []
    if out != "1":
        return [
            ("Hypervisor.framework is not available (kern.hv_support=0)", "use macOS 11 or newer")
        ]
    return []


def boot_problems() -> list[tuple[str, str]]:
    system = platform.system()
    if system == "Linux":
        return kvm_problems()
    if system == "Darwin":
        return mac_problems()
    return [
        (f"smolvm does not run boxes on {system}", "use macOS on Apple Silicon or Linux with KVM")
    ]


async def simulator_problems(engine: Engine) -> list[str] | None:
    """None for a real engine; for the smolvm simulator (tests/sim/smolvm), why it cannot
    run machines here, one line each. The simulator names itself when asked with
    `--simulator`, a flag the real engine refuses; it answers `--version` as the real one."""
    try:
        done = await engine.runner.run(Command([engine.binary, "--simulator"], timeout=30))
    except (RunTimeout, OSError):
        return None
    lines = done.stdout.decode(errors="replace").splitlines()
    if done.returncode != 0 or not lines or not lines[0].startswith("smolsim "):
        return None
    return [plain(line) for line in lines[1:] if line.strip()]


def _engine_source(located: Located) -> tuple[str, str]:
    """Where the engine came from: a word for JSON, and words for people."""
    if located.source == "setting":
        if overriding("engine.path"):
            return "environment", "from HBTUI_SMOLVM"
        return "config", "from [engine] path in config.toml"
    if located.source == "PATH":
        return "path", "smolvm on PATH"
    return "bundled", "the bundled engine, from the smolmachines package"


async def _engine_check(config: Config, report: DoctorReport) -> Engine | None:
    try:
        located = locate_engine(config.engine_path_setting())
        engine = Engine(located.path, state_dir=config.engine_state_dir(), timeout=30)
        version = await engine.version()
    except EngineError as exc:
        report.add(
            Check("engine", False, str(exc), fix="pip install smolmachines, or set HBTUI_SMOLVM")
        )
        return None
    report.engine_path = located.path
    report.engine_version = format_version(version)
    report.engine_source, where = _engine_source(located)
    report.simulator = await simulator_problems(engine)
    what = "; the smolvm simulator, not a real engine" if report.simulator is not None else ""
    ok = version >= MIN_VERSION
    report.add(
        Check(
            "engine",
            ok,
            f"smolvm {report.engine_version} at {located.path} ({where}){what}",
            fix=""
            if ok
            else f"pip install -U smolmachines (hbtui needs {format_version(MIN_VERSION)})",
        )
    )
    return engine


def _boot_check(report: DoctorReport, *, probe: bool) -> str:
    """What the host says about booting, without booting; returns the fix for a failed
    boot. With --probe a host problem is advice: the probe's boot decides."""
    if report.simulator is not None:
        problems = [(p, SIMULATOR_FIX) for p in report.simulator]
        cause = "the simulator cannot run machines here"
        fine = (
            "the simulator runs each machine as namespaces on this host, so the KVM and "
            "Hypervisor.framework checks do not apply"
        )
    else:
        problems = boot_problems()
        cause = "guests cannot boot here"
        fine = "no known obstacle"
    problem = "; ".join(p for p, _ in problems) or None
    fix = "; ".join(dict.fromkeys(f for _, f in problems))
    report.boot_problem = problem
    if problem is not None:
        report.can_boot = False
        report.add(Check("boot", False, f"{cause}: {problem}", needed=not probe, fix=fix))
    else:
        later = "" if probe else " (--probe boots a throwaway machine)"
        report.add(Check("boot", True, fine + later))
    return fix


async def run_doctor(
    paths: Paths,
    config: Config,
    *,
    probe: bool = False,
    report: Callable[[Check], None] | None = None,
) -> DoctorReport:
    """Every check; `report` hears each as it is made (a probe's stages take seconds)."""
    doctor = DoctorReport(listener=report)
    engine = await _engine_check(config, doctor)
    boot_fix = _boot_check(doctor, probe=probe and engine is not None)
    state_dir = Path(config.engine_state_dir() or paths.data_dir)
    probe_dir = state_dir
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    free_gib = shutil.disk_usage(probe_dir).free / 2**30
    doctor.add(
        Check(
            "disk",
            free_gib >= MIN_FREE_GIB,
            f"{free_gib:.1f} GiB free at {probe_dir}",
            fix=""
            if free_gib >= MIN_FREE_GIB
            else f"a box needs several GiB; free at least {MIN_FREE_GIB} GiB",
        )
    )

    tools = [
        ("tar", True, "archives"),
        ("zstd", True, "save, load and extract"),
        ("gpg", False, "loading the old tool's .tar.gz.gpg backups"),
        ("ssh", False, "remote hosts (hbtui hosts)"),
    ]
    for tool, needed, why in tools:
        where = shutil.which(tool)
        doctor.add(
            Check(
                tool,
                where is not None,
                f"{where}" if where else f"not found (needed for {why})",
                needed=needed,
                fix="" if where else f"install {tool} (apt install {tool} / brew install {tool})",
            )
        )
    if probe and engine is None:
        doctor.add(Check("probe", False, "not tried: there is no engine to boot with"))
    elif probe and engine is not None:
        trial = Probe(engine, doctor.add)
        await trial.run(boot_fix)
        doctor.can_boot = trial.booted
        failed = next((c for c in trial.checks if not c.ok), None)
        doctor.boot_problem = f"{failed.name}: {failed.detail}" if failed else None
    return doctor
