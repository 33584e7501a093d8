"""Remote hosts over SSH (hbtui/remote), against SSH servers on 127.0.0.1.

Most tests use tests/support/remote_sshd.py (asyncssh, can drop connections on a
signal); one runs the same story against a real OpenSSH sshd. The "remote"
engine is the simulator with its own state dir and port range, so the remote
boxes never meet the local ones.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import asyncssh
import pytest

from hbtui.core.foundation.registry import FAILED, Registry
from hbtui.core.foundation.specs import NewSpec
from hbtui.engine.capture import ERR_MAX, Bound, OutputTooLong
from hbtui.engine.runner import Command, RunTimeout
from hbtui.events import Step
from hbtui.paths import resolve_paths
from hbtui.remote.connection import HostConnection
from hbtui.remote.errors import HostKeyUnknown, HostUnreachable
from hbtui.remote.hosts import parse_listening
from hbtui.remote.runner import SshRunner
from hbtui.target import SshTarget, parse_target

from support import HBTUI_BIN, OPENSSH_PORTS, REMOTE_PORTS, SIM_RECIPE, SIM_SMOLVM
from support.cli import add_host, hbtui, ok, remote_machines

pytestmark = pytest.mark.remote

PASSPHRASE = "correct horse battery staple"


def fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read()


def service():
    from hbtui.wiring import build_service

    return build_service()


async def remote_host(name: str):
    """A remote Host as the core gets it, for checks below the service's door."""
    from hbtui.config import load_config
    from hbtui.core.foundation.hosts import HostPool
    from hbtui.remote.hosts import SshHosts

    paths = resolve_paths()
    config = load_config(paths)
    return await HostPool(paths, config, lambda: SshHosts(paths, config)).get(name)


# -- units ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("root@example.com", SshTarget("root", "example.com", 22)),
        ("me@10.0.0.5:2222", SshTarget("me", "10.0.0.5", 2222)),
        ("me@[::1]:2200", SshTarget("me", "::1", 2200)),
        ("ops@build-1.internal", SshTarget("ops", "build-1.internal", 22)),
    ],
)
def test_ssh_targets_parse(text, expected):
    assert parse_target(text) == expected
    assert parse_target(str(expected)) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "root@",
        "root@host:0",
        "root@host:x",
        "a b@host",
        "root@-oProxyCommand=x",
        "root@[::1",
        "root@ho st",
    ],
)
def test_bad_ssh_targets_are_one_line_errors(text):
    from hbtui.errors import UsageError

    with pytest.raises(UsageError, match="USER@HOST"):
        parse_target(text)


def test_listening_ports_parse_from_ss_proc_and_netstat():
    ss = (
        "#ss\nLISTEN 0 4096 127.0.0.1:5701 0.0.0.0:*\nLISTEN 0 128 [::]:22 [::]:*\n"
        "LISTEN 0 10 *:5702 *:*\n"
    )
    assert parse_listening(ss) == ("ss", {5701, 22, 5702})
    proc = (
        "#proc\n  sl  local_address rem_address   st\n"
        "   0: 0100007F:1645 00000000:0000 0A 00000000:00000000\n"
        "   1: 0100007F:1646 0100007F:9999 01 00000000:00000000\n"
    )
    assert parse_listening(proc) == ("proc", {0x1645})
    netstat = "#netstat\ntcp4 0 0 127.0.0.1.5703 *.* LISTEN\ntcp4 0 0 10.0.0.1.22 10.0.0.2.5 ESTABLISHED\n"
    assert parse_listening(netstat) == ("netstat", {5703})


def test_interactive_argv_is_strict_openssh_with_quoting(tmp_path, monkeypatch):
    monkeypatch.setenv("HBTUI_KNOWN_HOSTS", str(tmp_path / "kh"))
    key = tmp_path / "id"
    conn = HostConnection("r1", SshTarget("root", "10.1.2.3", 2201), str(key))
    argv = SshRunner(conn).interactive_argv(
        [
            "/opt/smolvm",
            "machine",
            "exec",
            "--name",
            "b1",
            "-i",
            "-t",
            "--",
            "sh",
            "-c",
            "echo 'hi'; rm -rf $HOME",
        ]
    )
    assert argv[:2] == ["ssh", "-t"]
    assert "StrictHostKeyChecking=yes" in argv and f"UserKnownHostsFile={tmp_path / 'kh'}" in argv
    assert argv[argv.index("-p") + 1] == "2201" and argv[argv.index("-i") + 1] == str(key)
    assert argv[-3:-1] == ["--", "10.1.2.3"]
    import shlex

    assert shlex.split(argv[-1])[-1] == "echo 'hi'; rm -rf $HOME"
    no_tty = SshRunner(conn).interactive_argv(["smolvm", "machine", "exec", "-i", "--", "id"])
    assert no_tty[1] == "-T"


# -- hosts add / trust / check ---------------------------------------------------------------


def test_add_trust_check_ls_rm(remote_env, asyncssh_server, ssh_client_key, tmp_path):
    env, state = remote_env
    known = Path(env["HBTUI_KNOWN_HOSTS"])
    add_host(env, "r1", asyncssh_server, ssh_client_key, state)
    [row] = json.loads(ok(hbtui("hosts", "ls", "--json", env=env)).stdout)
    assert row["name"] == "r1" and row["ssh"] == f"root@127.0.0.1:{asyncssh_server.port}"
    assert row["ports"] == REMOTE_PORTS and row["identity"] == str(ssh_client_key)
    assert hbtui("hosts", "add", "r1", "--ssh", "root@x", env=env).returncode == 2

    # An unknown key is refused, with its fingerprint and the command that trusts it.
    refused = hbtui("hosts", "check", "r1", env=env)
    assert refused.returncode == 1
    assert asyncssh_server.fingerprint in refused.stdout
    assert (
        f"hbtui hosts trust r1 --fingerprint {asyncssh_server.fingerprint}"
        in refused.stdout.replace("\n", "")
    )
    assert not known.exists()

    # Trusting without a terminal or with the wrong fingerprint changes nothing.
    assert hbtui("hosts", "trust", "r1", env=env).returncode == 2
    wrong = hbtui("hosts", "trust", "r1", "--fingerprint", "SHA256:" + "A" * 43, env=env)
    assert wrong.returncode != 0 and "nothing was trusted" in wrong.stderr
    assert not known.exists()

    trusted = ok(
        hbtui("hosts", "trust", "r1", "--fingerprint", asyncssh_server.fingerprint, env=env)
    )
    assert asyncssh_server.fingerprint in trusted.stdout
    assert known.read_text().split()[0] == f"[127.0.0.1]:{asyncssh_server.port}"
    again = ok(hbtui("hosts", "trust", "r1", env=env))
    assert "already trusted" in again.stdout and len(known.read_text().splitlines()) == 1

    check = ok(hbtui("hosts", "check", "r1", "--json", env=env))
    report = json.loads(check.stdout)
    assert report["ok"] and report["version"] == "1.32.2" and report["engine"] == str(SIM_SMOLVM)
    assert {c["name"] for c in report["checks"]} >= {"ssh", "engine", "sftp", "ports", "forwarding"}

    ok(hbtui("hosts", "rm", "r1", env=env))
    assert json.loads(ok(hbtui("hosts", "ls", "--json", env=env)).stdout) == []


def test_check_reports_a_missing_engine(trusted_host, tmp_path):
    env, state, server = trusted_host
    ok(hbtui("hosts", "rm", "r1", env=env))
    add_host(
        env,
        "r1",
        server,
        Path(env["HBTUI_KNOWN_HOSTS"]).parent / "client" / "id_ed25519",
        state,
        smolvm=str(tmp_path / "no-such-smolvm"),
    )
    done = hbtui("hosts", "check", "r1", env=env)
    assert done.returncode == 1
    assert "smolvm not found at" in done.stdout and "no-such-smolvm" in done.stdout


def test_a_changed_host_key_is_refused_loudly(remote_env, asyncssh_server, ssh_client_key):
    env, state = remote_env
    known = Path(env["HBTUI_KNOWN_HOSTS"])
    add_host(env, "r1", asyncssh_server, ssh_client_key, state)
    impostor = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()
    known.write_text(f"[127.0.0.1]:{asyncssh_server.port} {impostor[0]} {impostor[1]}\n")
    before = known.read_text()

    check = hbtui("hosts", "check", "r1", env=env)
    assert check.returncode == 1 and "CHANGED" in check.stdout
    assert asyncssh_server.fingerprint in check.stdout.replace("\n", "")
    trust = hbtui("hosts", "trust", "r1", "--fingerprint", asyncssh_server.fingerprint, env=env)
    assert trust.returncode == 3 and "CHANGED" in trust.stderr and "ssh-keygen -R" in trust.stderr
    new = hbtui("new", "rb1", "--host", "r1", "--recipe", str(SIM_RECIPE), env=env)
    assert new.returncode == 3 and "CHANGED" in new.stderr and "Traceback" not in new.stderr
    assert known.read_text() == before
    assert remote_machines(state) == []


async def test_unknown_key_is_refused_in_process_too(remote_env, asyncssh_server, ssh_client_key):
    conn = HostConnection(
        "r1", parse_target(f"root@127.0.0.1:{asyncssh_server.port}"), str(ssh_client_key)
    )
    with pytest.raises(HostKeyUnknown) as refused:
        await conn.connection()
    assert refused.value.fingerprint == asyncssh_server.fingerprint


# -- the runner ------------------------------------------------------------------------------


async def test_timeouts_and_cancellation_kill_the_remote_process(trusted_host):
    _env, _state, server = trusted_host
    host = await remote_host("r1")
    runner = host.engine.runner
    assert isinstance(runner, SshRunner)

    def left(marker: str) -> str:
        return subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout

    async def until(what: str, check) -> None:
        """The remote side ends what it runs a moment after the client gives up."""
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            await asyncio.sleep(0.05)

    started = time.monotonic()
    with pytest.raises(RunTimeout):
        await runner.run(Command(["sh", "-c", "sleep 471; echo never"], timeout=1))
    assert time.monotonic() - started < 10
    await until("sleep 471 to end", lambda: left("sleep 471") == "")

    task = asyncio.create_task(runner.run(Command(["sh", "-c", "sleep 472"])))
    await until("sleep 472 to start", lambda: left("sleep 472") != "")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until("sleep 472 to end", lambda: left("sleep 472") == "")

    with pytest.raises(RunTimeout):
        async for _ in runner.stream(["sh", "-c", "echo one; sleep 473"], timeout=1):
            pass
    await until("sleep 473 to end", lambda: left("sleep 473") == "")

    # One connection serves everything, and it comes back after a drop.
    conn = runner.conn
    first = await conn.connection()
    await runner.run(Command(["true"]))
    assert await conn.connection() is first
    server.drop_connections()
    await until("the connection to drop", first.is_closed)
    done = await runner.run(Command(["echo", "back"]))
    assert done.stdout == b"back\n" and await conn.connection() is not first
    await conn.close()


async def test_an_unreachable_host_is_reported_without_blocking_ls(
    trusted_host, free_port, ssh_client_key
):
    env, _state, _server = trusted_host
    [dead] = free_port(1)
    ok(
        hbtui(
            "hosts",
            "add",
            "gone",
            "--ssh",
            f"root@127.0.0.1:{dead}",
            "--identity",
            str(ssh_client_key),
            env=env,
        )
    )
    started = time.monotonic()
    done = hbtui("ls", "--json", env=env)
    assert time.monotonic() - started < 20
    assert done.returncode == 1 and json.loads(done.stdout) == []  # no boxes, one error
    assert "host gone unreachable" in done.stderr and "refused" in done.stderr.lower()


# -- boxes on a remote host ------------------------------------------------------------------


def test_remote_box_new_ls_exec_open_save_load_pause_rm(trusted_host, tmp_path):
    env, state, _server = trusted_host
    env = dict(env, HBTUI_PASSPHRASE=PASSPHRASE)
    ok(hbtui("new", "rb1", "--host", "r1", "--recipe", str(SIM_RECIPE), "-q", env=env))
    assert remote_machines(state) == ["rb1"]
    [box] = json.loads(ok(hbtui("ls", "--json", env=env)).stdout)
    assert (box["name"], box["host"], box["state"], box["provisioning"]) == (
        "rb1",
        "r1",
        "running",
        "ready",
    )
    lo, hi = map(int, REMOTE_PORTS.split("-"))
    assert lo <= box["port"] <= hi

    who = ok(hbtui("exec", "rb1", "--host", "r1", "--", "id", "-un", env=env))
    assert who.stdout.strip() == "agent"
    piped = hbtui(
        "exec",
        "rb1",
        "--host",
        "r1",
        "--",
        "sh",
        "-c",
        "cat > /data/home/agent/note; exit 5",
        input="over ssh\n",
        env=env,
    )
    assert piped.returncode == 5

    ports = json.loads(ok(hbtui("ports", "--host", "r1", "--json", env=env)).stdout)
    assert {"port": box["port"], "state": "used", "box": "rb1"} in ports

    opener = subprocess.Popen(
        [HBTUI_BIN, "open", "rb1", "--host", "r1", "--print"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = opener.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url != box["url"]
        assert b"executor" in fetch(url)
        assert b"executor" in fetch(url)  # the forward keeps serving
        assert opener.poll() is None
    finally:
        opener.send_signal(signal.SIGINT)
        assert opener.wait(20) == 0

    archive = tmp_path / "rb1.hbx"
    ok(hbtui("save", "rb1", "--host", "r1", "-o", str(archive), env=env))
    assert archive.stat().st_size > 0
    ok(
        hbtui(
            "load", str(archive), "rb2", "--host", "r1", "--recipe", str(SIM_RECIPE), "-q", env=env
        )
    )
    note = ok(hbtui("exec", "rb2", "--host", "r1", "--", "cat", "/data/home/agent/note", env=env))
    assert note.stdout == "over ssh\n"
    assert not list(Path("/tmp").glob("hbtui.*/rb1*"))

    # Paused over SSH: the box keeps its processes, and goes on where it was.
    ok(hbtui("exec", "rb1", "--host", "r1", "--", "sh", "-c", "sleep 600 </dev/null >/dev/null 2>&1 & echo $! > /tmp/p",
             env=env))  # fmt: skip
    ok(hbtui("pause", "rb1", "--host", "r1", env=env))
    states = {b["name"]: b["state"] for b in json.loads(ok(hbtui("ls", "--json", env=env)).stdout)}
    assert states["rb1"] == "paused", states
    ok(hbtui("resume", "rb1", "--host", "r1", env=env))
    alive = hbtui("exec", "rb1", "--host", "r1", "--", "sh", "-c", 'kill -0 "$(cat /tmp/p)"',
                  env=env)  # fmt: skip
    assert alive.returncode == 0, alive.stderr

    ok(hbtui("rm", "rb1", "--host", "r1", "--force", env=env))
    ok(hbtui("rm", "rb2", "--host", "r1", "--force", env=env))
    assert remote_machines(state) == []
    assert json.loads(ok(hbtui("ls", "--json", env=env)).stdout) == []


async def test_open_forward_serves_the_dashboard_and_closes(trusted_host):
    _env, _state, server = trusted_host
    svc = service()
    view = await svc.new(NewSpec("rb1", host="r1", recipe=SIM_RECIPE))
    web = await svc.boxes.web("rb1", "r1")
    assert web.forwarded
    url, close = web.url, web.close
    body = await asyncio.to_thread(fetch, url)
    assert b"executor" in body
    server.drop_connections()  # the forward survives a dropped connection
    await asyncio.sleep(0.5)
    assert b"executor" in await asyncio.to_thread(fetch, url)
    await close()
    with pytest.raises(OSError):
        await asyncio.to_thread(fetch, url)
    await svc.remove("rb1", "r1")
    assert view.host == "r1"


async def test_a_dropped_connection_mid_provisioning_rolls_back(trusted_host):
    _env, state, server = trusted_host
    svc = service()
    dropped = []

    def report(event) -> None:
        if isinstance(event, Step) and not dropped:
            dropped.append(event)
            server.drop_connections()

    with pytest.raises(HostUnreachable, match="lost"):
        await svc.new(NewSpec("rb1", host="r1", recipe=SIM_RECIPE), report=report)
    assert dropped
    assert remote_machines(state) == []  # the rollback reconnected and deleted it
    assert Registry(resolve_paths().registry_file).read().on_host("r1") == []
    view = await svc.new(NewSpec("rb1", host="r1", recipe=SIM_RECIPE))  # and the host still works
    assert view.state == "running"
    await svc.remove("rb1", "r1")


async def test_a_host_that_stays_down_leaves_a_clearly_resumable_box(trusted_host):
    env, state, server = trusted_host
    svc = service()

    def report(event) -> None:
        if isinstance(event, Step) and event.index == 1:
            server.toggle_listening()  # drop everything and refuse new connections

    with pytest.raises(HostUnreachable):
        await svc.new(NewSpec("rb1", host="r1", recipe=SIM_RECIPE), report=report)
    row = Registry(resolve_paths().registry_file).read().get("rb1", "r1")
    assert row is not None and row.status == FAILED and "rollback failed" in row.error
    listing = await svc.boxes.listing()
    assert "r1" in listing.errors
    server.toggle_listening()
    await asyncio.sleep(0.5)
    done = await asyncio.to_thread(hbtui, "rm", "rb1", "--host", "r1", "--force", env=env)
    assert done.returncode == 0, done.stderr
    assert remote_machines(state) == []
    assert Registry(resolve_paths().registry_file).read().on_host("r1") == []


# -- a real OpenSSH server ------------------------------------------------------------------


def test_openssh_server_end_to_end(remote_env, openssh_server, ssh_client_key, tmp_path):
    env, state = remote_env
    env = dict(env, HBTUI_PASSPHRASE=PASSPHRASE)
    # No --smolvm: the engine is found as `smolvm` on the host's PATH.
    add_host(env, "os1", openssh_server, ssh_client_key, state, ports=OPENSSH_PORTS, smolvm=None)
    refused = hbtui("hosts", "check", "os1", env=env)
    assert refused.returncode == 1 and "not trusted" in refused.stdout
    assert openssh_server.fingerprint in refused.stdout.replace("\n", "")
    ok(hbtui("hosts", "trust", "os1", "--fingerprint", openssh_server.fingerprint, env=env))
    report = json.loads(ok(hbtui("hosts", "check", "os1", "--json", env=env)).stdout)
    assert report["ok"] and report["version"] == "1.32.2", report
    assert report["engine"].endswith("/bin/smolvm")

    ok(hbtui("new", "rb1", "--host", "os1", "--recipe", str(SIM_RECIPE), "-q", env=env))
    [box] = json.loads(ok(hbtui("ls", "--json", env=env)).stdout)
    assert (box["name"], box["host"], box["state"]) == ("rb1", "os1", "running")
    who = ok(hbtui("exec", "rb1", "--host", "os1", "--", "id", "-un", env=env))
    assert who.stdout.strip() == "agent"
    # With a terminal, exec (like enter) hands it over through `ssh -t`: a tty in the box.
    import shlex

    shown = subprocess.run(
        [
            "script",
            "-qec",
            shlex.join(
                [
                    HBTUI_BIN,
                    "exec",
                    "rb1",
                    "--host",
                    "os1",
                    "--",
                    "sh",
                    "-c",
                    "[ -t 0 ] && [ -t 1 ] && echo has-a-tty; id -un",
                ]
            ),
            "/dev/null",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert "has-a-tty" in shown.stdout and "agent" in shown.stdout, shown.stdout + shown.stderr

    opener = subprocess.Popen(
        [HBTUI_BIN, "open", "rb1", "--host", "os1", "--print"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = opener.stdout.readline().strip()
        assert b"executor" in fetch(url)
    finally:
        opener.send_signal(signal.SIGINT)
        assert opener.wait(20) == 0

    archive = tmp_path / "rb1.hbx"
    ok(hbtui("save", "rb1", "--host", "os1", "-o", str(archive), env=env))
    assert archive.stat().st_size > 0
    ok(hbtui("rm", "rb1", "--host", "os1", "--force", env=env))
    assert remote_machines(state) == []


async def test_streamed_output_keeps_its_order_and_status(trusted_host):
    _env, _state, _server = trusted_host
    host = await remote_host("r1")
    stream = host.engine.runner.stream(
        ["sh", "-c", "for i in 1 2 3 4 5 6; do echo out$i; echo err$i >&2; done; exit 4"],
        timeout=30,
    )
    lines = [line async for line in stream]
    assert lines == [f"{k}{i}" for i in range(1, 7) for k in ("out", "err")]
    assert stream.returncode == 4 and stream.stderr_tail.endswith("err6")
    await host.engine.runner.conn.close()


async def test_a_remote_command_printing_without_end_is_ended_at_its_bound(trusted_host):
    """Read whole (asyncssh's communicate), it held everything until its timeout."""
    _env, _state, _server = trusted_host
    host = await remote_host("r1")
    runner = host.engine.runner
    for redirect, limit in (("", 1 << 20), (" >&2", ERR_MAX)):
        with pytest.raises(OutputTooLong) as caught:
            flood = ["sh", "-c", f"exec yes hbtui-flood-474{redirect}"]
            await runner.run(Command(flood, timeout=120, bound=Bound(1 << 20)))
        assert caught.value.limit == limit
    seq = Command(["sh", "-c", "seq 100000"], timeout=60, bound=Bound(13, tail=True))
    tail = await runner.run(seq)
    assert (tail.stdout, tail.dropped) == (b"99999\n100000\n", 588_882)
    deadline = time.monotonic() + 30
    while subprocess.run(["pgrep", "-f", "hbtui-flood-474"], capture_output=True).stdout:
        assert time.monotonic() < deadline, "the remote yes outlived its call"
        await asyncio.sleep(0.05)
    await runner.conn.close()


def test_trust_at_a_terminal_shows_the_fingerprint_and_asks(
    remote_env, asyncssh_server, ssh_client_key
):
    env, state = remote_env
    known = Path(env["HBTUI_KNOWN_HOSTS"])
    add_host(env, "r1", asyncssh_server, ssh_client_key, state)

    def at_terminal(answer: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["script", "-qec", f"{HBTUI_BIN} hosts trust r1", "/dev/null"],
            input=answer,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )

    no = at_terminal("n\n")
    assert asyncssh_server.fingerprint in no.stdout and "Trust this key for r1?" in no.stdout
    assert "not trusted" in no.stdout and not known.exists()
    yes = at_terminal("y\n")
    assert "trusted r1" in yes.stdout, yes.stdout
    assert known.read_text().startswith(f"[127.0.0.1]:{asyncssh_server.port} ssh-ed25519 ")


@pytest.mark.parametrize("kind", ["encrypted", "not-a-key", "folder", "fifo", "device"])
def test_an_unusable_identity_is_one_line_at_add(remote_env, tmp_path, kind):
    """An identity file hbtui cannot log in with is refused when the host is added,
    with the reason (and, for an encrypted key, what to do), never a traceback; a FIFO
    (it hung `hosts add` for good) or a device is refused at once."""
    env, _state = remote_env
    identity = tmp_path / "id"
    if kind == "encrypted":
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret-pass", "-f", str(identity)],
            check=True,
        )
    elif kind == "not-a-key":
        identity.write_text("just some text\n")
    elif kind == "fifo":
        os.mkfifo(identity)
    elif kind == "device":
        identity.symlink_to("/dev/zero")
    else:
        identity.mkdir()
    done = hbtui(
        "hosts", "add", "h1", "--ssh", "me@127.0.0.1", "--identity", str(identity), env=env,
        timeout=30,
    )  # fmt: skip
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    expected = {
        "encrypted": "ssh-agent", "not-a-key": "not a private key", "folder": "folder",
        "fifo": "is a FIFO, not a regular file", "device": "a character device",
    }  # fmt: skip
    assert expected[kind] in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "h1" not in ok(hbtui("hosts", "ls", "--json", env=env)).stdout
