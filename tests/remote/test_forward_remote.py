"""`hbtui forward` to a box on a remote host: every relay over the host's SSH connection."""

from __future__ import annotations

import hashlib
import http.client
import signal
import urllib.parse

import pytest

from support import SIM_RECIPE, SIM_SMOLVM
from support.cli import hbtui, ok
from support.devserver import Forward, box_sha256, relays_of, root, start_dev_server

pytestmark = pytest.mark.remote


def get(conn: http.client.HTTPConnection, path: str) -> bytes:
    conn.request("GET", path)
    answer = conn.getresponse()
    assert answer.status == 200
    return answer.read()


def test_a_remote_box_dev_server_is_forwarded_over_ssh(trusted_host, free_port):
    [dev] = free_port(1)  # no other process here relays to it
    env, state, _server = trusted_host
    ok(hbtui("new", "rb1", "--host", "r1", "--recipe", str(SIM_RECIPE), "-q", env=env))
    there = dict(env, HBTUI_SMOLVM=str(SIM_SMOLVM), HBTUI_SMOLVM_STATE_DIR=str(state))
    start_dev_server(there, "rb1", dev, file_mib=3)
    forward = Forward("rb1", str(dev), "--host", "r1", env=env)
    try:
        url = urllib.parse.urlsplit(forward.url())
        conn = http.client.HTTPConnection("127.0.0.1", url.port, timeout=60)
        assert len({get(conn, "/conn") for _ in range(3)}) == 1
        big = get(conn, "/big")
        assert hashlib.sha256(big).hexdigest() == box_sha256(there, "rb1", root(dev) + "/big")
        opened = ok(hbtui("open", f"rb1:{dev}", "--host", "r1", "--print", env=env))
        assert opened.stdout.strip() == url.geturl()
        forward.proc.send_signal(signal.SIGTERM)
        assert forward.proc.wait(30) == 128 + signal.SIGTERM
    finally:
        forward.stop()
    assert relays_of(dev) == []
