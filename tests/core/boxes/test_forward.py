"""`hbtui forward`: a dev server on a box's own loopback reached from here, end to end
against the simulator, and everything it starts ended when it ends."""

from __future__ import annotations

import hashlib
import http.client
import signal
import socket
import urllib.parse

import pytest

from support import SIM_RECIPE
from support.cli import hbtui, in_box, ok, one_line_error
from support.devserver import Forward, box_sha256, relays_of, root, start_dev_server

pytestmark = pytest.mark.sim


@pytest.fixture
def dev(free_port) -> int:
    """The dev server's port in the box: a number no other process here relays to (the
    boxes share this machine's process table), and free here as a host port too."""
    return free_port(1)[0]


def port_free(port: int) -> bool:
    """Nothing listens there, and a server may take it again (as asyncio's do, with
    SO_REUSEADDR: the closed connections' TIME_WAIT does not hold it)."""
    with socket.socket() as s:
        if s.connect_ex(("127.0.0.1", port)) == 0:
            return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def connect(url: str) -> http.client.HTTPConnection:
    parts = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=60)


def get(conn: http.client.HTTPConnection, path: str) -> bytes:
    conn.request("GET", path)
    answer = conn.getresponse()
    assert answer.status == 200
    return answer.read()


def make_box(env: dict[str, str], name: str = "b1") -> None:
    ok(hbtui("new", name, "--recipe", str(SIM_RECIPE), "-q", env=env))


def test_a_dev_server_on_the_box_loopback_is_reached_and_sigterm_ends_it_all(
    sim_env, free_port, dev
):
    make_box(sim_env)
    start_dev_server(sim_env, "b1", dev, file_mib=10)
    [here] = free_port(1)
    forward = Forward("b1", str(dev), "--port", str(here), env=sim_env)
    try:
        url = forward.url()
        assert url == f"http://127.0.0.1:{here}/"

        conn = connect(url)
        seen = {get(conn, "/conn") for _ in range(5)}
        assert len(seen) == 1  # five requests kept alive on one connection to the server
        assert get(conn, "/") and get(conn, "/conn") in seen

        big = get(connect(url), "/big")
        assert len(big) == 10 << 20
        assert hashlib.sha256(big).hexdigest() == box_sha256(sim_env, "b1", root(dev) + "/big")

        opened = ok(hbtui("open", f"b1:{dev}", "--print", env=sim_env))
        assert opened.stdout.strip() == url

        # A connection still open when the forward is told to end.
        assert get(conn, "/conn") in seen
        assert relays_of(dev)
        forward.proc.send_signal(signal.SIGTERM)
        assert forward.proc.wait(30) == 128 + signal.SIGTERM
    finally:
        forward.stop()
    assert port_free(here)
    assert relays_of(dev) == []
    assert in_box("b1", "sh", "-c", "pgrep -x cat | wc -l", env=sim_env) == "0"
    gone = hbtui("open", f"b1:{dev}", "--print", env=sim_env)
    one_line_error(gone, f"no forward of port {dev} of b1")


def test_several_ports_in_one_call_each_get_their_own_url(sim_env, free_port):
    dev, second_port = free_port(2)
    make_box(sim_env)
    start_dev_server(sim_env, "b1", dev)
    start_dev_server(sim_env, "b1", second_port)
    forward = Forward("b1", str(dev), str(second_port), env=sim_env)
    try:
        first, second = forward.url(), forward.url()
        assert first == f"http://127.0.0.1:{dev}/"  # the box's own number, free here
        assert second == f"http://127.0.0.1:{second_port}/"
        for url in (first, second):
            assert get(connect(url), "/conn").isdigit()
        listed = ok(hbtui("open", f"b1:{second_port}", "--print", env=sim_env)).stdout
        assert listed.strip() == second
    finally:
        forward.stop()


def test_bad_input_is_one_line_and_nothing_listens(sim_env, free_port, dev):
    make_box(sim_env)
    [taken] = free_port(1)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", taken))
        holder.listen()
        done = hbtui("forward", "b1", str(dev), "--port", str(taken), env=sim_env)
        one_line_error(done, f"port {taken}", "taken")
        assert done.returncode == 1
    for port in ("0", "65536"):
        done = hbtui("forward", "b1", port, env=sim_env)
        one_line_error(done, "out of range")
        assert done.returncode == 2
    one_line_error(hbtui("forward", "b1", "web", env=sim_env), "PORT")
    one_line_error(hbtui("forward", "nope", str(dev), env=sim_env), "no box named 'nope'")
    one_line_error(
        hbtui("forward", "b1", "3000", "3001", "--port", str(taken), env=sim_env), "single"
    )
    ok(hbtui("stop", "b1", env=sim_env))
    done = hbtui("forward", "b1", str(dev), "--port", str(taken), env=sim_env)
    one_line_error(done, "b1 is not running", "hbtui start b1")
    assert port_free(taken)


def test_a_box_that_stops_while_forwarded_ends_the_forward(sim_env, free_port, dev):
    make_box(sim_env)
    start_dev_server(sim_env, "b1", dev)
    [here] = free_port(1)
    forward = Forward("b1", str(dev), "--port", str(here), env=sim_env)
    try:
        conn = connect(forward.url())
        assert get(conn, "/conn")
        ok(hbtui("stop", "b1", env=sim_env))
        assert forward.proc.wait(60) == 1
        errors = [line for line in forward.stderr().splitlines() if line.startswith("error:")]
        assert errors == ["error: box b1 is no longer running (stopped): its forward ended"]
    finally:
        forward.stop()
    assert port_free(here)
    assert relays_of(dev) == []
