"""Shared fixtures. Each area keeps its fixtures in its own marked block."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import PACKAGE, REMOTE_SSHD, SIM_SMOLVM, SIM_SOURCE, sim_usable

# ---- parallel workers: bytecode, and a network of their own --------------------------------


def compile_once() -> None:
    """Under PYTHONDONTWRITEBYTECODE (set here, and in many containers) nothing is cached:
    every `hbtui` child compiled the package from source (a third of its start-up CPU) and
    every worker rewrote and compiled each test module again (~12 s of CPU per worker).
    The first process compiles the package (as tests/bench/cli.py does) and the simulator
    (which tests run through tests/sim/bin/smolvm, a module load that reads this cache),
    and pytest processes keep their rewritten test modules; all of it lands in the
    git-ignored __pycache__ folders, and a child still only reads them."""
    import compileall
    import contextlib
    import importlib.util
    import py_compile
    import sys

    if not os.environ.get("PYTEST_XDIST_WORKER"):
        compileall.compile_dir(PACKAGE, quiet=1)
        with contextlib.suppress(OSError):  # a read-only checkout: the calls compile as before
            py_compile.compile(str(SIM_SOURCE), importlib.util.cache_from_source(str(SIM_SOURCE)))
    sys.dont_write_bytecode = False


CLONE_NEWNET = 0x40000000


def pytest_configure(config: pytest.Config) -> None:
    """Bytecode first (see `compile_once`); then each pytest-xdist worker runs in a network
    namespace of its own (root only), so
    boxes made by tests in two workers never contend for one host port: a stopped box
    holds its port in its own test's registry only, and another worker's box could
    otherwise take it before it starts again. Workers run tests in their main thread,
    which is the one moved; every process and thread it starts follows."""
    compile_once()
    if not os.environ.get("PYTEST_XDIST_WORKER") or os.geteuid() != 0:
        return
    import ctypes
    import subprocess

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        raise pytest.UsageError(
            f"cannot give the test worker its own network: {os.strerror(ctypes.get_errno())}"
        )
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def paint_when_looked_at() -> None:
    """A Pilot dashboard repaints on its own 5 times a second, not Textual's 60: Pilot
    paints the screen anyway on every key, click and pause, which is when a test looks,
    so every view a test waits on is still drawn (and a crash in drawing box text still
    fails it). The frames in between cost a fourth of the Pilot tests' CPU and no test
    looked at them. In-process only: the pytest plugin of Textual's snapshots imports it
    before this file, so TEXTUAL_FPS is read too early, and a child (the installed `hbtui`
    in tmux) must run as a user's does."""
    import textual.screen

    assert isinstance(textual.screen.UPDATE_PERIOD, float)  # a rename must not pass unseen
    textual.screen.UPDATE_PERIOD = 1 / 5  # type: ignore[misc]


paint_when_looked_at()


def parse_css_once() -> None:
    """Each widget's CSS is parsed once per test process, not once per App: Textual keeps
    what it parsed in the App's own stylesheet, and a run starts some 600 of them (the
    parse was a tenth of a Pilot test's CPU). Keyed by everything the parse reads (the
    CSS, where it is from, its place in the cascade, the theme's variables); an error
    is never kept, so bad CSS fails every test that loads it. The rules are read, never
    changed, once parsed."""
    from textual.css.stylesheet import Stylesheet

    parse = Stylesheet._parse_rules
    parsed: dict[tuple[object, ...], list[object]] = {}

    def once(self, css, read_from, is_default_rules=False, tie_breaker=0, scope=""):
        key = (css, read_from, is_default_rules, tie_breaker, scope, *self._variables.items())
        rules = parsed.get(key)
        if rules is None:
            rules = parsed[key] = parse(self, css, read_from, is_default_rules, tie_breaker, scope)
        return list(rules)

    Stylesheet._parse_rules = once  # type: ignore[method-assign]


parse_css_once()


def idle_in_5_ms() -> None:
    """Pilot knows the app has done with a key when the test process has used almost no
    CPU over a short sleep: 20 ms, twice a key, was half of a Pilot test's time, with the
    CPU doing nothing. Over 5 ms the rule is the same (under a twentieth of it spent),
    and a key takes 10 ms of waiting. Every test still waits for the state it checks."""
    import textual._wait as wait

    assert (wait.SLEEP_GRANULARITY, wait.wait_for_idle.__defaults__) == (1 / 50, (1 / 50, 1))
    wait.SLEEP_GRANULARITY = 1 / 200
    wait.SLEEP_IDLE = wait.SLEEP_GRANULARITY / 20
    wait.wait_for_idle.__defaults__ = (wait.SLEEP_GRANULARITY, 1)


idle_in_5_ms()


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (the test modules, their imports, the items) lives as long as
    the session: frozen, the garbage collector's full passes no longer walk it again in
    every test (a Pilot test's took a fifth of its CPU; frozen, half as long)."""
    import gc

    gc.collect()
    gc.freeze()


def weight(item: pytest.Item) -> int:
    """How long a test runs, roughly: the real agents' (a minute or more), then the ones that
    make boxes (simulator or remote host: tens of seconds), then the rest (under a second)."""
    if item.get_closest_marker("real_agent"):
        return 2
    fixtures = getattr(item, "fixturenames", ())
    boxes = item.get_closest_marker("sim") or "sim_env" in fixtures or "remote_env" in fixtures
    return 1 if boxes else 0


# A fixture that runs an engine, and the markers one of which a test using it must carry: the
# fast tier selects by marker (tests/README.md), so an unmarked one would boot boxes there.
ENGINES = {"sim_smolvm": ("sim", "remote"), "real_smolvm": ("real_engine",)}


def unmarked(items: list[pytest.Item]) -> list[str]:
    return [
        f"{item.nodeid} uses {fixture} but is not marked {' or '.join(marks)}"
        for item in items
        for fixture, marks in ENGINES.items()
        if fixture in getattr(item, "fixturenames", ())
        and not any(item.get_closest_marker(mark) for mark in marks)
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test that runs an engine says so by its marker (`unmarked`). Then, with N
    workers, --dist worksteal hands out the collection in N contiguous runs and an
    idle worker steals from the end of another's. Dealt heaviest first, one per run in turn,
    each run starts with its share of the long tests and ends with short ones, so no worker
    is left at the end with a minute-long test while the others wait."""
    if wrong := unmarked(items):
        raise pytest.UsageError("\n".join(wrong))
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    if workers < 2:
        return
    ranked = sorted(range(len(items)), key=lambda i: -weight(items[i]))  # stable
    runs: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for turn, index in enumerate(ranked):
        runs[turn % workers].append(items[index])
    items[:] = [item for run in runs for item in run]


# ---- core: isolated state and the real engine -------------------------------------------


@pytest.fixture
def hbtui_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HBTUI_HOME for one test, so no test sees the developer's boxes."""
    home = tmp_path / "hbtui-home"
    home.mkdir()
    monkeypatch.setenv("HBTUI_HOME", str(home))
    for var in ("HBTUI_SMOLVM", "HBTUI_SMOLVM_STATE_DIR", "HBTUI_PASSPHRASE", "BOX_PASSPHRASE"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(scope="session")
def real_smolvm() -> str:
    """The smolvm CLI bundled in the smolmachines wheel (no boot needed for these tests)."""
    from hbtui.engine.locate import bundled_engine

    path = bundled_engine()
    if path is None:
        pytest.skip("smolmachines is not installed, so the real engine is missing")
    expand_engine_templates(path)
    return path


def expand_engine_templates(engine: str) -> None:
    """The engine expands its disk templates (`*.ext4.zst` beside it, 10 and 20 GiB sparse)
    on first use: ~35 s of CPU on a fresh install, inside whichever test came first and
    counted against that test's hang guard (CI timed one out). Done here once, under a
    lock the workers share: `machine start` expands the overlay template (and fails here,
    where guests cannot boot), `pack create` the storage one."""
    import fcntl
    import subprocess
    import tempfile

    folder = Path(engine).parent
    if all(z.with_suffix("").exists() for z in folder.glob("*.ext4.zst")):
        return
    lock = Path(tempfile.gettempdir()) / "hbtui-tests-engine-templates.lock"
    with lock.open("a") as held, tempfile.TemporaryDirectory() as state:
        fcntl.flock(held, fcntl.LOCK_EX)
        if all(z.with_suffix("").exists() for z in folder.glob("*.ext4.zst")):
            return

        def engine_run(*args: str) -> None:
            subprocess.run(
                [engine, "--state-dir", state, *args],
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=900,
                check=False,
            )

        engine_run("machine", "create", "--name", "warm", "--", "/bin/sh", "-c", "sleep 1")
        engine_run("machine", "start", "--name", "warm")
        engine_run("machine", "stop", "--name", "warm")
        engine_run("pack", "create", "--from-vm", "warm", "-o", f"{state}/pack")
        engine_run("machine", "delete", "--name", "warm", "--force")


@pytest.fixture
def real_state_dir(tmp_path: Path) -> Path:
    d = tmp_path / "smolvm-state"
    d.mkdir()
    return d


@pytest.fixture
def sim_env(
    hbtui_home: Path, sim_smolvm: str, sim_state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    """hbtui pointed at the simulator with private state; also the env for `hbtui` children."""
    monkeypatch.setenv("HBTUI_SMOLVM", sim_smolvm)
    monkeypatch.setenv("HBTUI_SMOLVM_STATE_DIR", str(sim_state_dir))
    yield dict(os.environ)
    # Whatever a test left running in the simulator is stopped with it.
    import json
    import subprocess

    listed = subprocess.run(
        [sim_smolvm, "--state-dir", str(sim_state_dir), "machine", "ls", "--json"],
        capture_output=True,
        text=True,
    )
    for machine in json.loads(listed.stdout or "[]"):
        subprocess.run(
            [
                sim_smolvm,
                "--state-dir",
                str(sim_state_dir),
                "machine",
                "delete",
                "--name",
                machine["name"],
                "-f",
            ],
            capture_output=True,
        )


@pytest.fixture
def sim_service(sim_env: dict[str, str]):
    """The Service over the simulator, as the CLI and the dashboard get it."""
    from hbtui.wiring import build_service

    return build_service()


@pytest.fixture
async def sim_host(sim_env: dict[str, str]):
    """The local Host (engine, probes) the sim service uses, for checks below the door."""
    from hbtui.config import load_config
    from hbtui.core.foundation.hosts import HostPool
    from hbtui.paths import resolve_paths

    paths = resolve_paths()
    return await HostPool(paths, load_config(paths)).get()


# ---- end core ---------------------------------------------------------------------------

# ---- sim: the smolvm simulator (tests/sim/smolvm) ----------------------------------------


@pytest.fixture(scope="session")
def sim_smolvm() -> str:
    """Path of the simulator; skips the test where it cannot run (not root, no bwrap)."""
    why = sim_usable()
    if why:
        pytest.skip(why)
    return str(SIM_SMOLVM)


@pytest.fixture
def sim_state_dir(tmp_path: Path) -> Path:
    """A fresh, empty --state-dir for one test."""
    d = tmp_path / "smolsim-state"
    d.mkdir()
    return d


def pick_free_ports(count: int = 1) -> list[int]:
    """Host TCP ports free on 127.0.0.1 right now (all distinct)."""
    import socket

    socks, ports = [], []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


@pytest.fixture
def free_port():
    """Call it to get N free host ports: `h1, h2 = free_port(2)`."""
    return pick_free_ports


# ---- end sim ------------------------------------------------------------------------------

# ---- remote: SSH servers on loopback for the remote-host tests (hbtui/remote) -----------------


class SshdHandle:
    """A running test SSH server: its port, host key and the way to break it."""

    def __init__(self, proc, port: int, host_key_pub: str, fingerprint: str) -> None:
        self.proc = proc
        self.port = port
        self.host_key_pub = host_key_pub
        self.fingerprint = fingerprint

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def drop_connections(self) -> None:
        """Every open SSH connection dies at once (asyncssh server only)."""
        import signal as _signal

        self.signal(_signal.SIGUSR1)

    def toggle_listening(self) -> None:
        """Stop accepting connections (dropping the open ones), or resume (asyncssh only)."""
        import signal as _signal

        self.signal(_signal.SIGUSR2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except Exception:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def ssh_client_key(tmp_path: Path) -> Path:
    """A passphrase-less ed25519 client key (FILE and FILE.pub)."""
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    path = tmp_path / "client" / "id_ed25519"
    path.parent.mkdir(mode=0o700)
    key.write_private_key(str(path))
    path.chmod(0o600)
    key.write_public_key(str(path) + ".pub")
    return path


def _host_key(folder: Path) -> tuple[Path, str, str]:
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    path = folder / "ssh_host_ed25519_key"
    key.write_private_key(str(path))
    path.chmod(0o600)
    key.write_public_key(str(path) + ".pub")
    return path, (folder / "ssh_host_ed25519_key.pub").read_text(), key.get_fingerprint("sha256")


@pytest.fixture
def asyncssh_server(tmp_path: Path, ssh_client_key: Path):
    """tests/support/remote_sshd.py on 127.0.0.1:<free port>, trusting `ssh_client_key`."""
    import subprocess
    import sys
    import time

    folder = tmp_path / "sshd"
    folder.mkdir()
    host_key, pub, fp = _host_key(folder)
    auth = folder / "authorized_keys"
    auth.write_text(Path(str(ssh_client_key) + ".pub").read_text())
    port_file = folder / "port"
    proc = subprocess.Popen(
        [
            sys.executable,
            str(REMOTE_SSHD),
            "--host-key",
            str(host_key),
            "--authorized-keys",
            str(auth),
            "--port-file",
            str(port_file),
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(folder / "log", "wb"),
    )
    deadline = time.monotonic() + 20
    while not port_file.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("test SSH server did not start: " + (folder / "log").read_text())
        time.sleep(0.05)
    handle = SshdHandle(proc, int(port_file.read_text()), pub, fp)
    yield handle
    handle.stop()


@pytest.fixture
def openssh_server(tmp_path: Path, ssh_client_key: Path):
    """A real OpenSSH sshd on 127.0.0.1:<free port> (root login by key, temp host key),
    whose PATH starts with a folder holding `smolvm` = the simulator."""
    import shutil
    import socket
    import subprocess
    import time

    sshd = shutil.which("sshd") or "/usr/sbin/sshd"
    if not os.path.exists(sshd) or os.geteuid() != 0:
        pytest.skip("needs root and OpenSSH's sshd")
    folder = tmp_path / "openssh"
    folder.mkdir()
    host_key, pub, fp = _host_key(folder)
    auth = folder / "authorized_keys"
    auth.write_text(Path(str(ssh_client_key) + ".pub").read_text())
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    (bin_dir / "smolvm").symlink_to(SIM_SMOLVM)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)
    for _attempt in range(5):
        port = pick_free_ports(1)[0]
        config = folder / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    f"Port {port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {host_key}",
                    f"AuthorizedKeysFile {auth}",
                    "PermitRootLogin yes",
                    "StrictModes no",
                    f"PidFile {folder / 'sshd.pid'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "AllowTcpForwarding yes",
                    "Subsystem sftp internal-sftp",
                    "LogLevel ERROR",
                    f"SetEnv PATH={bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "",
                ]
            )
        )
        proc = subprocess.Popen(
            [sshd, "-D", "-e", "-f", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=open(folder / "log", "ab"),
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        if proc.poll() is None:
            break
    else:
        pytest.fail("sshd did not start: " + (folder / "log").read_text())
    handle = SshdHandle(proc, port, pub, fp)
    yield handle
    handle.stop()


@pytest.fixture
def remote_env(hbtui_home: Path, sim_smolvm: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """hbtui with private state and known_hosts, for talking to a loopback "remote" host
    whose engine (the simulator) keeps its machines in its own state dir. Yields
    (env for `hbtui` children, the remote state dir); removes the remote machines after."""
    import json
    import subprocess

    known = tmp_path / "known_hosts"
    monkeypatch.setenv("HBTUI_KNOWN_HOSTS", str(known))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    state = tmp_path / "remote-state"
    state.mkdir()
    yield dict(os.environ), state
    listed = subprocess.run(
        [sim_smolvm, "--state-dir", str(state), "machine", "ls", "--json"],
        capture_output=True,
        text=True,
    )
    for machine in json.loads(listed.stdout or "[]"):
        subprocess.run(
            [
                sim_smolvm,
                "--state-dir",
                str(state),
                "machine",
                "delete",
                "--name",
                machine["name"],
                "-f",
            ],
            capture_output=True,
        )


# ---- end remote ---------------------------------------------------------------------------

# ---- tui: the dashboard (tests/tui/) ---------------------------------------------


@pytest.fixture
def static_service():
    """A FakeService: fixed boxes, scripted progress (snapshots, quick Pilot tests)."""
    from support.tui_fakes import FakeService

    return FakeService()


@pytest.fixture
def short_tmp_path():
    """A fresh folder right under the system's temporary folder, for a path a Pilot test
    types key by key: tmp_path's runs to ~90 characters, and each key typed into a dialog
    lays it out and paints it again (tens of milliseconds of CPU a key)."""
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="hb"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# ---- end tui ------------------------------------------------------------------------------


# ---- dashboard: the fake Service of the Pilot tests ----------------------------------------


@pytest.fixture
def service():
    """The fake Service with four boxes and three archives on its shelf."""
    from support.tui_fakes import FakeService, shelf

    fake = FakeService()
    fake.archive_list = shelf()
    return fake


# ---- remote: a host added and trusted --------------------------------------------------------


@pytest.fixture
def trusted_host(remote_env, asyncssh_server, ssh_client_key):
    """Host `r1` added and trusted; yields (env, remote state dir, server)."""
    from support.cli import add_host, hbtui, ok

    env, state = remote_env
    add_host(env, "r1", asyncssh_server, ssh_client_key, state)
    ok(hbtui("hosts", "trust", "r1", "--fingerprint", asyncssh_server.fingerprint, env=env))
    return env, state, asyncssh_server
