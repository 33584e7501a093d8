"""`hbtui doctor`: can this host run boxes, and if not, why and how to fix it.

Each check is a small function returning a Check. `needed` checks decide the
exit status; the rest are advice. The boot check explains the usual causes
without booting anything; `probe_boot` tries a real boot when asked.
"""

from __future__ import annotations

import contextlib
import grp
import os
import platform
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hbtui.checks import Check, all_needed_pass
from hbtui.config import Config
from hbtui.engine import Engine, EngineError, MachineSpec, locate_engine
from hbtui.engine.locate import MIN_VERSION, format_version
from hbtui.paths import Paths

VM_UID = 2000000  # smolvm drops each VM to this uid when run as root
MIN_FREE_GIB = 10


@dataclass
class DoctorReport:
    checks: list[Check] = field(default_factory=list)
    engine_path: str | None = None
    engine_version: str | None = None
    can_boot: bool | None = None
    boot_problem: str | None = None

    @property
    def ok(self) -> bool:
        return all_needed_pass(self.checks)

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "engine": {"path": self.engine_path, "version": self.engine_version},
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


async def probe_boot(engine: Engine, timeout: float = 60.0) -> str | None:
    """Boot a throwaway machine in a private state dir; None when it booted."""
    state = tempfile.mkdtemp(prefix="hbtui-probe-")
    probe = Engine(engine.binary, state_dir=state, runner=engine.runner, timeout=timeout)
    try:
        await probe.create(
            MachineSpec(name="hbtui-probe", image="alpine", cpus=1, memory_mib=256, network=False)
        )
        await probe.start("hbtui-probe", timeout=timeout)
        return None
    except EngineError as exc:
        return f"a test boot failed: {exc}"
    finally:
        with contextlib.suppress(EngineError):
            await probe.delete("hbtui-probe")
        shutil.rmtree(state, ignore_errors=True)


async def run_doctor(paths: Paths, config: Config, *, probe: bool = False) -> DoctorReport:
    report = DoctorReport()
    engine: Engine | None = None
    try:
        located = locate_engine(config.engine_path_setting())
        engine = Engine(located.path, state_dir=config.engine_state_dir(), timeout=30)
        version = await engine.version()
        report.engine_path = located.path
        report.engine_version = format_version(version)
        ok = version >= MIN_VERSION
        report.checks.append(
            Check(
                "engine",
                ok,
                f"smolvm {report.engine_version} at {located.path} ({located.source})",
                fix=""
                if ok
                else f"pip install -U smolmachines (hbtui needs {format_version(MIN_VERSION)})",
            )
        )
    except EngineError as exc:
        report.checks.append(
            Check("engine", False, str(exc), fix="pip install smolmachines, or set HBTUI_SMOLVM")
        )

    problems = boot_problems()
    if not problems and probe and engine is not None:
        failed = await probe_boot(engine)
        if failed:
            problems.append((failed, "see the message; hbtui doctor explains the usual causes"))
    problem = "; ".join(p for p, _ in problems) or None
    fix = "; ".join(f for _, f in problems)
    report.can_boot = problem is None if (problem is not None or probe) else None
    report.boot_problem = problem
    if problem is not None:
        report.checks.append(Check("boot", False, f"guests cannot boot here: {problem}", fix=fix))
    elif probe:
        report.checks.append(Check("boot", True, "a test guest booted"))
    else:
        report.checks.append(
            Check("boot", True, "no known obstacle (run with --probe to try a real boot)")
        )

    state_dir = Path(config.engine_state_dir() or paths.data_dir)
    probe_dir = state_dir
    while not probe_dir.exists() and probe_dir != probe_dir.parent:
        probe_dir = probe_dir.parent
    free_gib = shutil.disk_usage(probe_dir).free / 2**30
    report.checks.append(
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
        report.checks.append(
            Check(
                tool,
                where is not None,
                f"{where}" if where else f"not found (needed for {why})",
                needed=needed,
                fix="" if where else f"install {tool} (apt install {tool} / brew install {tool})",
            )
        )
    return report
