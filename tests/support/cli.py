"""Running `hbtui` as a user does, and looking at what it left: in the simulator's
boxes, on the remote test hosts, in files and in every process's argv."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import HBTUI_BIN, REMOTE_PORTS, SIM_SMOLVM

KEY = "sk-ant-api03-hbtuiTESTkey-0123456789abcdef"  # an agent key the box must never see
PASS = "secrets passphrase for tests"  # the encrypted secrets file's


def hbtui(
    *args: str,
    env: dict[str, str],
    input: str | None = None,
    passphrase: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`hbtui ARGS` in a child, its output as text; `passphrase` for the archive verbs."""
    if passphrase is not None:
        env = {**env, "HBTUI_PASSPHRASE": passphrase}
    return subprocess.run(
        [HBTUI_BIN, *args], env=env, input=input, capture_output=True, text=True, timeout=timeout
    )


def ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def run_ok(*args: str, env: dict[str, str], input: str | None = None) -> str:
    """What a successful `hbtui ARGS` prints."""
    return ok(hbtui(*args, env=env, input=input)).stdout


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as resp:
            return b"executor" in resp.read()
    except OSError:
        return False


def ls_json(env) -> list[dict]:
    done = hbtui("ls", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def in_box(name: str, *command: str, env: dict[str, str]) -> str:
    return run_ok("exec", name, "--", *command, env=env).strip()


def machines(env: dict[str, str]) -> list[str]:
    import subprocess

    done = subprocess.run(
        [
            env["HBTUI_SMOLVM"],
            "--state-dir",
            env["HBTUI_SMOLVM_STATE_DIR"],
            "machine",
            "ls",
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    return sorted(m["name"] for m in json.loads(done.stdout or "[]"))


def add_host(
    env,
    name: str,
    server,
    key: Path,
    state: Path,
    ports: str = REMOTE_PORTS,
    smolvm: str | None = str(SIM_SMOLVM),
) -> None:
    args = [
        "hosts",
        "add",
        name,
        "--ssh",
        f"root@127.0.0.1:{server.port}",
        "--identity",
        str(key),
        "--state-dir",
        str(state),
        "--ports",
        ports,
    ]
    if smolvm:
        args += ["--smolvm", smolvm]
    ok(hbtui(*args, env=env))


def remote_machines(state: Path) -> list[str]:
    listed = subprocess.run(
        [str(SIM_SMOLVM), "--state-dir", str(state), "machine", "ls", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [m["name"] for m in json.loads(listed.stdout or "[]")]


def background(*args: str, env: dict, passphrase: str | None = None) -> subprocess.Popen:
    env = dict(env)
    if passphrase is not None:
        env["HBTUI_PASSPHRASE"] = passphrase
    return subprocess.Popen(
        [HBTUI_BIN, *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def one_line_error(done: subprocess.CompletedProcess, *words: str) -> str:
    """The failure is `error: ...` on one line (plus an optional hint), no traceback."""
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for word in words:
        assert word in errors[0], errors[0]
    return errors[0]


def ls(env: dict) -> dict[str, dict]:
    done = hbtui("ls", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return {b["name"]: b for b in json.loads(done.stdout)}


def wait_for(what: str, check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@contextlib.contextmanager
def tmpfs(where: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0755" + (",ro" if read_only else "")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)])
    if done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)])


def as_root(env: dict[str, str], name: str, script: str, *, input: bytes | None = None) -> str:
    """What `sh -c script` prints run as root in the box, through the engine (`input`, if
    given, is its standard input)."""
    done = subprocess.run(
        [
            env["HBTUI_SMOLVM"],
            "--state-dir",
            env["HBTUI_SMOLVM_STATE_DIR"],
            "machine",
            "exec",
            "--name",
            name,
            *(["-i"] if input is not None else []),
            "--",
            "sh",
            "-c",
            script,
        ],
        input=input,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode(errors="replace")


def files_holding(needle: str, *roots: Path) -> list[Path]:
    """Every regular file under the roots whose bytes contain `needle`."""
    found = []
    for root in roots:
        for dirpath, _dirs, names in os.walk(root):
            for name in names:
                path = Path(dirpath, name)
                try:
                    if path.is_symlink() or not path.is_file():
                        continue
                    if needle.encode() in path.read_bytes():
                        found.append(path)
                except OSError:
                    continue
    return found


class ArgvWatch:
    """Reads every process's argv every few milliseconds while it runs; `hits` are the
    command lines that held one of the needles. With `environ`, the environment of every
    process hbtui started too (the hbtui the test started keeps the environment block the
    test gave it in /proc: that one is the user's)."""

    def __init__(self, *needles: str, environ: bool = False) -> None:
        self.needles = [n.encode() for n in needles]
        self.environ = environ
        self.hits: list[str] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _holds(self, pid: str) -> bytes | None:
        """The argv of a process that holds a needle, else None."""
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read()
            if any(n in argv for n in self.needles):
                return argv
            if not self.environ or argv.split(b"\0")[1:2] == [HBTUI_BIN.encode()]:
                return None
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
        except OSError:
            return None
        return argv if any(n in environ for n in self.needles) else None

    def _watch(self) -> None:
        me = str(os.getpid())
        while not self._stop.is_set():
            for pid in os.listdir("/proc"):
                if pid.isdigit() and pid != me and (argv := self._holds(pid)) is not None:
                    self.hits.append(argv.replace(b"\0", b" ").decode(errors="replace")[:200])
            self.samples += 1
            time.sleep(0.01)

    def __enter__(self) -> ArgvWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
