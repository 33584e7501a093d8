"""The smolvm simulator (tests/sim/smolvm): lifecycle, exec, ports, cp, errors, concurrency."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.sim

NOT_RUNNING = (
    "agent operation failed: connect: machine '{0}' is not running. Start it with "
    "'smolvm machine start --name {0}'; if a start is already in progress, retry "
    "once it finishes."
)


class Sim:
    """Runs the simulator against one state dir and deletes every machine it made."""

    def __init__(self, binary: str, state_dir: Path) -> None:
        self.binary = binary
        self.state_dir = state_dir
        self.made: set[str] = set()

    def run(
        self, *args: str, input: bytes | None = None, env: dict | None = None, timeout: float = 30
    ) -> subprocess.CompletedProcess:
        argv = [self.binary, "--error-format", "json", "--state-dir", str(self.state_dir), *args]
        return subprocess.run(
            argv,
            input=input,
            capture_output=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            stdin=None if input is not None else subprocess.DEVNULL,
        )

    def ok(self, *args: str, **kw) -> str:
        done = self.run(*args, **kw)
        assert done.returncode == 0, (args, done.returncode, done.stderr.decode())
        return done.stdout.decode()

    def error(self, *args: str, **kw) -> dict:
        done = self.run(*args, **kw)
        assert done.returncode == 1, (args, done.returncode, done.stdout, done.stderr)
        return json.loads(done.stderr.decode().strip().splitlines()[-1])["error"]

    def create(self, name: str, *flags: str, workload: tuple[str, ...] = ()) -> None:
        self.made.add(name)
        args = ["machine", "create", "--name", name, *flags]
        if workload:
            args += ["--", *workload]
        self.ok(*args)

    def sh(self, name: str, script: str, *flags: str, **kw) -> subprocess.CompletedProcess:
        return self.run(
            "machine", "exec", "--name", name, *flags, "--", "/bin/sh", "-c", script, **kw
        )

    def status(self, name: str) -> dict:
        return json.loads(self.ok("machine", "status", "--name", name, "--json"))

    def cleanup(self) -> None:
        for name in sorted(self.made):
            self.run("machine", "delete", "--name", name, "--force")


@pytest.fixture
def sim(sim_smolvm: str, sim_state_dir: Path):
    s = Sim(sim_smolvm, sim_state_dir)
    try:
        yield s
    finally:
        s.cleanup()


def wait_for(predicate, timeout: float = 5.0, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(step)


def http_get(port: int, host: str = "127.0.0.1") -> int | str:
    """HTTP status, or the name of the failure."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/", timeout=3) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        return type(reason).__name__


def test_version_and_help(sim: Sim) -> None:
    assert sim.ok("--version").strip() == "smolvm 1.32.2"
    help_text = subprocess.run(
        ["/usr/bin/python3", sim.binary, "--help"], capture_output=True, text=True
    ).stdout
    assert "not pulled" in help_text and "/usr read-only" in help_text


def test_it_starts_with_the_system_python_whatever_python3_path_finds(
    sim: Sim, tmp_path: Path
) -> None:
    """hbtui starts the simulator for every engine call: a `python3` found first on PATH
    (pyenv's shim, a virtualenv) is not what runs it."""
    shim = tmp_path / "python3"
    used = tmp_path / "used"
    shim.write_text(f"#!/bin/sh\ntouch {used}\nexit 1\n")
    shim.chmod(0o755)
    path = f"{tmp_path}:{os.environ['PATH']}"
    assert sim.ok("--version", env={"PATH": path}).strip() == "smolvm 1.32.2"
    assert not used.exists()


def test_persistent_root_tmp_emptied_workload_every_start(sim: Sim) -> None:
    sim.create(
        "b1",
        workload=("/bin/sh", "-c", "echo boot >> /data/boots; echo workload-up; exec sleep 1000"),
    )
    assert sim.status("b1")["state"] == "created"
    sim.ok("machine", "start", "--name", "b1")
    st = sim.status("b1")
    assert st["state"] == "running" and isinstance(st["pid"], int)
    done = sim.sh(
        "b1",
        "id -u; hostname; echo keep > /data/keep; echo scratch > /tmp/scratch; "
        "echo mine > /usr/local/mine; touch /usr/nope 2>/dev/null || echo usr-ro",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split() == ["0", "b1", "usr-ro"]
    sim.ok("machine", "stop", "--name", "b1", "--timeout", "2")
    assert sim.status("b1") | {} and sim.status("b1")["state"] == "stopped"
    assert sim.status("b1")["pid"] is None
    again = sim.run("machine", "stop", "--name", "b1")
    assert again.returncode == 0 and b"is not running (state: stopped)" in again.stdout

    sim.ok("machine", "start", "--name", "b1")
    out = (
        sim.sh("b1", "cat /data/keep /usr/local/mine; ls -A /tmp | wc -l; wc -l < /data/boots")
        .stdout.decode()
        .split()
    )
    assert out == ["keep", "mine", "0", "2"]  # /data and /usr/local kept, /tmp empty, 2 boots
    assert sim.ok("machine", "start", "--name", "b1").strip() == "Machine 'b1' already running"
    assert sim.ok("machine", "logs", "--name", "b1").count("workload-up") == 2
    assert sim.ok("machine", "logs", "--name", "b1", "--tail", "1").strip() == "workload-up"
    # The machine's /etc is its own copy.
    sim.sh("b1", "echo guest-only >> /etc/motd")
    assert (
        "guest-only" not in Path("/etc/motd").read_text(errors="replace")
        if Path("/etc/motd").exists()
        else True
    )
    data_dir = sim.ok("machine", "data-dir", "--name", "b1").strip()
    assert Path(data_dir).is_dir()


def test_killed_workload_reads_stopped(sim: Sim) -> None:
    sim.create("k1", workload=("sleep", "1000"))
    sim.ok("machine", "start", "--name", "k1")
    init_pid = sim.status("k1")["pid"]
    kids = Path(f"/proc/{init_pid}/task/{init_pid}/children").read_text().split()
    os.kill(int(kids[0]), signal.SIGKILL)
    assert wait_for(lambda: sim.status("k1")["state"] == "stopped", 5)
    assert sim.error("machine", "exec", "--name", "k1", "--", "true")[
        "message"
    ] == NOT_RUNNING.format("k1")
    sim.ok("machine", "start", "--name", "k1")
    assert sim.status("k1")["state"] == "running"


def test_exec_status_stdin_env_user_workdir_timeout(sim: Sim) -> None:
    sim.create("e1")
    sim.ok("machine", "start", "--name", "e1")
    assert sim.sh("e1", "exit 7").returncode == 7
    done = sim.run("machine", "exec", "--name", "e1", "-i", "--", "cat", input=b"through stdin")
    assert done.returncode == 0 and done.stdout == b"through stdin"
    without_i = sim.run("machine", "exec", "--name", "e1", "--", "cat", input=b"ignored")
    assert without_i.returncode == 0 and without_i.stdout == b""
    done = sim.sh(
        "e1",
        'echo "$FOO|$(pwd)|$(id -un)|$HOME"',
        "-e",
        "FOO=bar baz",
        "-w",
        "/etc",
        "-u",
        "nobody",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().strip() == "bar baz|/etc|nobody|" + next(
        ln.split(":")[5]
        for ln in Path("/etc/passwd").read_text().splitlines()
        if ln.startswith("nobody:")
    )
    streamed = sim.run(
        "machine",
        "exec",
        "--name",
        "e1",
        "--stream",
        "--",
        "/bin/sh",
        "-c",
        "echo one; echo two >&2; echo three",
    )
    assert streamed.stdout == b"one\nthree\n" and streamed.stderr == b"two\n"
    t0 = time.monotonic()
    err = sim.error("machine", "exec", "--name", "e1", "--timeout", "1s", "--", "sleep", "20")
    assert time.monotonic() - t0 < 10 and "timed out" in err["message"]
    assert (
        sim.error("machine", "exec", "--name", "e1", "-u", "ghost", "--", "true")["code"]
        == "SMOLVM_ERROR"
    )
    stats = json.loads(sim.ok("machine", "stats", "--name", "e1", "--json"))
    assert stats["memory_mib"] > 0 and stats["cpus"] == 4 and "cpu_percent" in stats


def test_ports_reach_guest_interface_not_guest_loopback(sim: Sim, free_port) -> None:
    open_port, local_port = free_port(2)
    sim.create("p1", "-p", f"{open_port}:8000", "-p", f"{local_port}:8001")
    sim.ok("machine", "start", "--name", "p1")
    serve = (
        "cd /tmp && (/usr/bin/python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &) "
        "&& (/usr/bin/python3 -m http.server 8001 --bind 127.0.0.1 >/dev/null 2>&1 &)"
    )
    assert sim.sh("p1", serve).returncode == 0
    probe = (
        "/usr/bin/python3 -c 'import urllib.request as u; "
        'print(u.urlopen("http://127.0.0.1:8001/").status)\''
    )
    assert wait_for(lambda: sim.sh("p1", probe).stdout.strip() == b"200", 5)  # up in the guest
    assert wait_for(lambda: http_get(open_port) == 200, 5)
    assert http_get(local_port) != 200  # bound to guest loopback only: unreachable from host
    sim.ok("machine", "stop", "--name", "p1", "--timeout", "1")
    assert http_get(open_port) == "ConnectionRefusedError"  # the forwarder died with the machine


def test_port_in_use_at_start(sim: Sim, free_port) -> None:
    (port,) = free_port(1)
    sim.create("busy", "-p", f"{port}:80")
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen(1)
    try:
        err = sim.error("machine", "start", "--name", "busy")
    finally:
        holder.close()
    assert err["code"] == "PORT_IN_USE" and str(port) in err["message"]
    assert sim.status("busy")["state"] == "created"
    sim.ok("machine", "start", "--name", "busy")


def test_cp_in_out_mode_and_size_cap(sim: Sim, tmp_path: Path) -> None:
    tmp_path = tmp_path / "files"
    tmp_path.mkdir()
    sim.create("c1")
    sim.ok("machine", "start", "--name", "c1")
    src = tmp_path / "in.bin"
    payload = os.urandom(10_000)
    src.write_bytes(payload)
    sim.ok("machine", "cp", str(src), "c1:/root/in.bin", "--mode", "640")
    assert sim.sh(
        "c1", "stat -c %a /root/in.bin; ls -A /root | grep -c smolsim || true"
    ).stdout.decode().split() == ["640", "0"]
    sim.ok("machine", "cp", str(src), "c1:/tmp/in.bin")  # the tmpfs is reached too
    out = tmp_path / "out.bin"
    sim.ok("machine", "cp", "c1:/tmp/in.bin", str(out))
    assert out.read_bytes() == payload
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.bin", "out.bin"]

    cap = {"SMOLSIM_CP_MAX_BYTES": "4096"}
    err = sim.error("machine", "cp", str(src), "c1:/root/big.bin", env=cap)
    assert err["code"] == "PAYLOAD_TOO_LARGE" and "4096" in err["message"]
    err = sim.error("machine", "cp", "c1:/root/in.bin", str(tmp_path / "big.out"), env=cap)
    assert err["code"] == "PAYLOAD_TOO_LARGE"
    assert not (tmp_path / "big.out").exists()
    # Larger than one transfer still moves in parts.
    for i in range(0, len(payload), 4096):
        part = tmp_path / f"part{i}"
        part.write_bytes(payload[i : i + 4096])
        sim.ok("machine", "cp", str(part), f"c1:/root/part.{i:06d}", env=cap)
    assert (
        sim.sh("c1", "cat /root/part.* > /root/joined && cmp /root/joined /root/in.bin").returncode
        == 0
    )
    err = sim.error("machine", "cp", "c1:/root/missing", str(tmp_path / "x"))
    assert err["code"] == "SMOLVM_ERROR" and "No such file" in err["message"]


def test_errors_on_stopped_and_missing_machines(sim: Sim, tmp_path: Path) -> None:
    sim.create("s1")
    msg = NOT_RUNNING.format("s1")
    (tmp_path / "f").write_text("x")
    for args in (
        ("machine", "exec", "--name", "s1", "--", "true"),
        ("machine", "cp", str(tmp_path / "f"), "s1:/root/f"),
        ("machine", "cp", "s1:/etc/hostname", str(tmp_path / "g")),
        ("machine", "stats", "--name", "s1", "--json"),
    ):
        assert sim.error(*args) == {"code": "SMOLVM_ERROR", "message": msg}
    for args in (
        ("machine", "status", "--name", "nope"),
        ("machine", "start", "--name", "nope"),
        ("machine", "exec", "--name", "nope", "--", "true"),
        ("machine", "delete", "--name", "nope", "-f"),
    ):
        assert sim.error(*args) == {"code": "NOT_FOUND", "message": "vm not found: nope"}
    sim.ok("machine", "start", "--name", "s1")
    err = sim.error("machine", "update", "--name", "s1", "--cpus", "2")
    assert err["code"] == "CONFIG_ERROR" and "is running" in err["message"]
    text = subprocess.run(
        [sim.binary, "--state-dir", str(sim.state_dir), "machine", "status", "--name", "nope"],
        capture_output=True,
        text=True,
    )
    assert text.returncode == 1 and text.stderr.strip() == "Error: vm not found: nope"


def test_delete_stops_running_machine(sim: Sim, free_port) -> None:
    (port,) = free_port(1)
    sim.create("d1", "-p", f"{port}:80")
    sim.ok("machine", "start", "--name", "d1")
    init_pid = sim.status("d1")["pid"]
    sim.ok("machine", "delete", "--name", "d1", "--force")
    assert (
        not Path(f"/proc/{init_pid}").exists()
        or Path(f"/proc/{init_pid}/stat").read_text().split(") ")[1][0] == "Z"
    )
    assert json.loads(sim.ok("machine", "ls", "--json")) == []
    probe = socket.socket()
    probe.bind(("127.0.0.1", port))  # the forwarder released the host port
    probe.close()


PAUSED = "machine is paused; use resume to preserve its execution state"


def machine_pids(init_pid: int) -> set[int]:
    """Every process in the machine: those in its PID namespace, seen from the host."""
    ns = os.stat(f"/proc/{init_pid}/ns/pid").st_ino
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}/ns/pid").st_ino == ns:
                    pids.add(int(entry))
            except OSError:
                continue
    return pids


def cpu_ticks(pids: set[int]) -> dict[int, int]:
    """Each live process's CPU time so far (user + system, in clock ticks)."""
    ticks = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks[pid] = int(fields[11]) + int(fields[12])
    return ticks


def burn_host_cpu(ticks: int) -> None:
    """A while, measured in work a host process got done rather than in time: what stayed
    still meanwhile had its chance to run."""
    spinner = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"])
    try:
        assert wait_for(lambda: cpu_ticks({spinner.pid}).get(spinner.pid, 0) >= ticks, 60)
    finally:
        spinner.kill()
        spinner.wait()


def test_pause_freezes_every_process_and_resume_thaws_them(sim: Sim, free_port) -> None:
    (port,) = free_port(1)
    spin = "while :; do :; done"
    sim.create("z1", "-p", f"{port}:8000", workload=("/bin/sh", "-c", spin))
    sim.ok("machine", "start", "--name", "z1")
    serve = "cd /tmp && (/usr/bin/python3 -m http.server 8000 >/dev/null 2>&1 &)"
    assert sim.sh("z1", serve).returncode == 0
    assert sim.sh("z1", f"tmux new-session -d -s main '{spin}'").returncode == 0
    assert wait_for(lambda: http_get(port) == 200, 10)
    init_pid = sim.status("z1")["pid"]
    before = machine_pids(init_pid)
    assert len(before) >= 5  # init, workload, the server, tmux and its spinning pane

    assert sim.ok("machine", "pause", "--name", "z1") == "Machine 'z1' paused\n"
    status = sim.status("z1")
    assert (status["state"], status["pid"]) == ("paused", None)
    assert sim.ok("machine", "status", "--name", "z1") == "Machine 'z1': paused\n"
    frozen = cpu_ticks(before)
    burn_host_cpu(30)
    assert cpu_ticks(before) == frozen  # not one tick: every process is frozen
    assert machine_pids(init_pid) == before  # and none ended
    for args, context in (
        (("machine", "exec", "--name", "z1", "--", "true"), "connect"),
        (("machine", "stats", "--name", "z1", "--json"), "connect"),
        (("machine", "start", "--name", "z1"), "start machine"),
        (("machine", "stop", "--name", "z1"), "stop machine"),
        (("machine", "update", "--name", "z1", "--cpus", "2"), "update"),
    ):
        err = sim.error(*args)
        assert err == {
            "code": "CONFLICT",
            "message": f"agent operation failed: {context}: {PAUSED}",
        }
    assert http_get(port) == "ConnectionResetError"  # nothing answers a paused machine's ports
    err = sim.error("machine", "pause", "--name", "z1")
    assert err["message"].endswith("machine 'z1' must be running")

    assert sim.ok("machine", "resume", "--name", "z1") == "Machine 'z1' resumed\n"
    assert sim.status("z1")["state"] == "running" and sim.status("z1")["pid"] == init_pid
    spent = sum(frozen.values())
    assert wait_for(lambda: sum(cpu_ticks(before).values()) > spent + 10, 30)  # they run again
    assert machine_pids(init_pid) >= before  # the same processes, not new ones
    assert sim.sh("z1", "tmux has-session -t main").returncode == 0
    assert http_get(port) == 200
    err = sim.error("machine", "resume", "--name", "z1")
    assert err["message"].endswith("machine is not paused; use start for a fresh boot")


def test_a_paused_machine_is_deleted_and_a_stopped_one_is_not_paused(sim: Sim) -> None:
    sim.create("z2", workload=("sleep", "1000"))
    sim.ok("machine", "start", "--name", "z2")
    sim.ok("machine", "stop", "--name", "z2", "--timeout", "1")
    assert sim.status("z2")["state"] == "stopped"
    assert sim.error("machine", "pause", "--name", "z2") == {
        "code": "CONFLICT",
        "message": "agent operation failed: checkpoint machine: machine 'z2' must be running",
    }
    assert sim.error("machine", "resume", "--name", "z2") == {
        "code": "CONFLICT",
        "message": "agent operation failed: resume machine: machine is not paused; use start "
        "for a fresh boot",
    }
    sim.ok("machine", "start", "--name", "z2")
    init_pid = sim.status("z2")["pid"]
    sim.ok("machine", "pause", "--name", "z2")
    freezer = json.loads((sim.state_dir / "smolsim/machines/z2/runtime.json").read_text())
    assert Path(freezer["freezer"]).is_dir()
    sim.ok("machine", "delete", "--name", "z2", "--force")
    assert (
        not Path(f"/proc/{init_pid}").exists()
        or Path(f"/proc/{init_pid}/stat").read_text().split(") ")[1][0] == "Z"
    )
    assert json.loads(sim.ok("machine", "ls", "--json")) == []
    assert not Path(freezer["freezer"]).exists()  # its freezer went with it


def test_eight_concurrent_creates(sim: Sim) -> None:
    names = [f"cc{i}" for i in range(8)]
    sim.made.update(names)
    results: dict[str, subprocess.CompletedProcess] = {}

    def make(name: str) -> None:
        results[name] = sim.run("machine", "create", "--name", name, "--label", f"n={name}")

    threads = [threading.Thread(target=make, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r.returncode == 0 for r in results.values()), {
        n: r.stderr for n, r in results.items() if r.returncode
    }
    listed = json.loads(sim.ok("machine", "ls", "--json"))
    assert sorted(m["name"] for m in listed) == names
    assert all(m["labels"] == {"n": m["name"]} for m in listed)

    dup: list[subprocess.CompletedProcess] = []
    racers = [
        threading.Thread(target=lambda: dup.append(sim.run("machine", "create", "--name", "race")))
        for _ in range(4)
    ]
    sim.made.add("race")
    for t in racers:
        t.start()
    for t in racers:
        t.join()
    assert sorted(r.returncode for r in dup) == [0, 1, 1, 1]
    loser = next(r for r in dup if r.returncode)
    assert b"machine 'race' already exists or is being created" in loser.stderr


# ---- packs and branches -------------------------------------------------------------


def test_pack_then_create_from_has_the_packed_files(sim: Sim, tmp_path: Path) -> None:
    out = tmp_path / "packs"
    out.mkdir()
    sim.create("src", "--cpus", "2", workload=("/bin/sh", "-c", "exec sleep 1000"))
    err = sim.error("pack", "create", "--from-vm", "src", "-o", str(out / "pk"))
    assert err["code"] == "SMOLVM_ERROR" and "may not have been started yet" in err["message"]
    sim.ok("machine", "start", "--name", "src")
    script = (
        "echo packed > /data/marker && mkdir -p /opt/app && echo tool > /usr/local/bin/tool "
        "&& chmod 4755 /usr/local/bin/tool && echo scratch > /tmp/scratch"
    )
    assert sim.sh("src", script).returncode == 0
    err = sim.error("pack", "create", "--from-vm", "src", "-o", str(out / "pk"))
    assert err["code"] == "SMOLVM_ERROR" and "is running" in err["message"]
    sim.ok("machine", "stop", "--name", "src", "--timeout", "1")
    printed = sim.ok("pack", "create", "--from-vm", "src", "-o", str(out / "pk"))
    assert printed.startswith("Packing VM 'src' snapshot...\n")
    assert sorted(p.name for p in out.iterdir()) == ["pk", "pk.smolmachine"]
    assert os.access(out / "pk", os.X_OK)  # the stub
    side = (out / "pk.smolmachine").read_bytes()
    assert side[-64:].startswith(b"SMOLPACK") and side.startswith(b"\x28\xb5\x2f\xfd")

    sim.create("copy", "--from", str(out / "pk.smolmachine"))
    listed = sim.status("copy")
    assert listed["cmd"] == ["/bin/sh", "-c", "exec sleep 1000"] and listed["cpus"] == 2
    assert listed["state"] == "created" and listed["image"] == ""
    sim.ok("machine", "start", "--name", "copy")
    done = sim.sh("copy", "cat /data/marker /usr/local/bin/tool; stat -c %a /usr/local/bin/tool; "
                  "hostname; cat /etc/hostname; ls -A /tmp | wc -l")  # fmt: skip
    assert done.stdout.decode().split() == ["packed", "tool", "4755", "copy", "copy", "0"]
    # The copy is its own disk: the source does not see the copy's writes.
    sim.sh("copy", "echo changed > /data/marker")
    sim.ok("machine", "start", "--name", "src")
    assert sim.sh("src", "cat /data/marker").stdout == b"packed\n"
    # A workload after `--` replaces the pack's.
    sim.create("copy2", "--from", str(out / "pk.smolmachine"), workload=("sleep", "5"))
    assert sim.status("copy2")["cmd"] == ["sleep", "5"]
    err = sim.error("machine", "create", "--name", "x", "--from", str(out / "nope.smolmachine"))
    assert err == {
        "code": "CONFIG_ERROR",
        "message": "config operation failed: create from .smolmachine: file not found: "
        f"{out}/nope.smolmachine",
    }


def test_forkable_branch_child_gets_the_source_files(sim: Sim, free_port) -> None:
    src_port, pinned = free_port(2)
    sim.create(
        "src",
        "-p",
        f"{src_port}:8000",
        "--label",
        "team=a",
        workload=("/bin/sh", "-c", "echo boot >> /data/boots; exec sleep 1000"),
    )
    sim.ok("machine", "start", "--name", "src")
    assert sim.status("src")["branchable"] is False
    err = sim.error("machine", "branch", "--from", "src", "--name", "kid")
    assert err["code"] == "SMOLVM_ERROR" and "is not running forkable" in err["message"]
    sim.ok("machine", "stop", "--name", "src", "--timeout", "1")
    sim.ok("machine", "start", "--name", "src", "--forkable")
    st = sim.status("src")
    assert st["branchable"] is True and st["forkable"] is True
    assert sim.sh("src", "echo from-source > /root/f").returncode == 0

    sim.made.update({"kid", "kid2"})
    out = sim.ok("machine", "branch", "--from", "src", "-n", "kid", "--label", "role=kid")
    assert out.strip() == "Branched 'src' -> 'kid'. Source continues running."
    kid = sim.status("kid")
    assert kid["state"] == "running" and kid["parent_machine"] == "src"
    assert kid["labels"] == {"role": "kid", "team": "a"} and kid["branchable"] is False
    done = sim.sh("kid", "cat /root/f; wc -l < /data/boots; hostname")
    # The disk is copied, RAM is not: the child's workload started fresh (a third boot line).
    assert done.stdout.decode().split() == ["from-source", "3", "kid"]
    assert sim.status("src")["state"] == "running"  # the source keeps running

    sim.ok("machine", "branch", "--from", "src", "-n", "kid2", "-p", f"{pinned}:8000",
           "--branchable", "--no-wait-ready")  # fmt: skip
    assert sim.status("kid2")["branchable"] is True
    records = {
        n: json.loads((sim.state_dir / "smolsim/machines" / n / "machine.json").read_text())
        for n in ("src", "kid", "kid2")
    }
    assert records["kid2"]["ports"][0]["host"] == pinned
    fresh = records["kid"]["ports"][0]["host"]
    assert fresh not in (src_port, pinned) and records["kid"]["ports"][0]["guest"] == 8000
    # A stopped child takes its own port like any machine.
    sim.ok("machine", "stop", "--name", "kid", "--timeout", "1")
    (own,) = free_port(1)
    sim.ok("machine", "update", "--name", "kid", "--remove-port", f"{fresh}:8000",
           "-p", f"{own}:8000")  # fmt: skip
    sim.ok("machine", "start", "--name", "kid")
    assert sim.status("kid")["parent_machine"] == "src" and sim.status("kid")["ports"] == 1
    listing = sim.ok("machine", "ls").splitlines()
    assert any(line.startswith("kid ") and line.rstrip().endswith("src") for line in listing)
    err = sim.error("machine", "branch", "--from", "src", "-n", "kid")
    assert err == {
        "code": "SMOLVM_ERROR",
        "message": "agent operation failed: fork: machine 'kid' already exists",
    }


# ---- credentials, secrets and egress policy ---------------------------------------


def test_credentials_give_placeholders_and_secrets_stay_out_of_state(
    sim: Sim, tmp_path: Path
) -> None:
    token, db_url, file_secret = (
        "tok-" + os.urandom(8).hex(),
        "postgres://user:" + os.urandom(8).hex() + "@db/x",
        "file-" + os.urandom(8).hex(),
    )
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(file_secret + "\n")
    workload = (
        "/bin/sh",
        "-c",
        'echo "token=$GH_TOKEN"; printf %s "$DB_URL" | sha256sum; '
        'printf %s "$FILE_SECRET" | sha256sum; exec sleep 1000',
    )
    sim.create(
        "cred",
        "--credential",
        "gh=GH_TOKEN@api.github.com",
        "--secret-env",
        "DB_URL=HOST_DB_URL",
        "--secret-file",
        f"FILE_SECRET={secret_file}",
        workload=workload,
    )
    assert sim.status("cred")["network"] is True  # a credential implies --net
    record = json.loads((sim.state_dir / "smolsim/machines/cred/machine.json").read_text())
    placeholder = record["credential_placeholders"]["gh"]
    assert placeholder.startswith("SMOL_PLACEHOLDER_GH_")
    assert record["secret_refs"] == {
        "DB_URL": {"from_env": "HOST_DB_URL"},
        "FILE_SECRET": {"from_file": str(secret_file)},
    }
    # A ref resolves at every start: without its host variable the start fails.
    err = sim.error("machine", "start", "--name", "cred")
    assert err == {
        "code": "CONFIG_ERROR",
        "message": "config operation failed: resolve secret 'DB_URL': env_unset",
    }
    assert sim.status("cred")["state"] == "created"
    host_env = {"GH_TOKEN": token, "HOST_DB_URL": db_url}
    sim.ok("machine", "start", "--name", "cred", env=host_env)

    def digest(value: str) -> str:
        return hashlib.sha256(value.encode()).hexdigest()

    log = wait_for(lambda: sim.ok("machine", "logs", "--name", "cred").count("-\n") == 2 and
                   sim.ok("machine", "logs", "--name", "cred"))  # fmt: skip
    assert log.splitlines()[0] == f"token={placeholder}"  # the guest holds the placeholder
    assert [ln.split()[0] for ln in log.splitlines()[1:]] == [digest(db_url), digest(file_secret)]
    # exec gets the placeholder too, and resolves refs from its own environment.
    done = sim.sh("cred", 'echo "$GH_TOKEN"; printf %s "$DB_URL" | sha256sum', env=host_env)
    assert done.stdout.decode().split()[:2] == [placeholder, digest(db_url)]
    assert sim.sh("cred", "true").returncode == 1  # HOST_DB_URL unset for this exec
    # No value in any file the simulator keeps (records, logs, runtime, locks).
    for path in sim.state_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            for value in (token, db_url, file_secret):
                assert value.encode() not in data, (path, value)
    assert sim.ok("machine", "egress-events", "--name", "cred").strip() == (
        "No egress denials recorded for 'cred'."
    )
    assert json.loads(sim.ok("machine", "egress-events", "--name", "cred", "--json")) == []


def test_egress_policy_is_recorded_and_listed(sim: Sim) -> None:
    sim.create(
        "pol",
        "--allow-host",
        "localhost",
        "--allow-host-pattern",
        "*.example.com",
        "--block-private",
        "--outbound-localhost-only",
    )
    st = sim.status("pol")
    assert st["allowed_hosts"] == ["localhost", "*.example.com"]
    assert st["allowed_cidrs"] == ["127.0.0.1/32", "127.0.0.0/8", "::1/128"]
    assert list(st)[:3] == ["allowed_cidrs", "allowed_hosts", "block_io"]
    record = json.loads((sim.state_dir / "smolsim/machines/pol/machine.json").read_text())
    assert record["block_private"] == [] and record["network"] is True
    err = sim.error("machine", "create", "--name", "off", "--allow-host", "nowhere.invalid")
    assert err["code"] == "CONFIG_ERROR" and "failed to resolve 'nowhere.invalid'" in err["message"]
    # Allow-list changes alone may reach a machine that runs with an allow list.
    sim.ok("machine", "start", "--name", "pol")
    out = sim.ok("machine", "update", "--name", "pol", "--allow-host", "pypi.org")
    assert "allowed hosts: localhost, *.example.com, pypi.org" in out
    err = sim.error("machine", "update", "--name", "pol", "--cpus", "2")
    assert err["code"] == "CONFIG_ERROR" and "is running" in err["message"]
