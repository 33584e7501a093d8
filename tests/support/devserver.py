"""A user's dev server in a simulator box, bound to the box's own 127.0.0.1 (as `npm run
dev` is), and `hbtui forward` to it from here."""

from __future__ import annotations

import subprocess
from pathlib import Path

from support import HBTUI_BIN
from support.cli import as_root, wait_for

# HTTP/1.1 with keep-alive (http.server's default is 1.0: one request a connection);
# /conn answers the port its client connected from, so one connection is seen as one.
SERVER = b"""
import functools, http.server, pathlib, sys

class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # as node's http does: no 40 ms wait on the body

    def do_GET(self):
        if self.path != "/conn":
            return super().do_GET()
        body = str(self.client_address[1]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

port, root = int(sys.argv[1]), sys.argv[2]
server = http.server.ThreadingHTTPServer(
    ("127.0.0.1", port), functools.partial(Handler, directory=root)
)
pathlib.Path(root, ".ready").write_text("")
server.serve_forever()
"""


def root(port: int) -> str:
    """The folder the dev server on `port` serves, in the box."""
    return f"/srv/dev{port}"


def start_dev_server(env: dict[str, str], box: str, port: int, *, file_mib: int = 0) -> None:
    """The dev server on the box's 127.0.0.1:port, with `file_mib` MiB of random bytes
    at /big when asked; returns once it listens."""
    folder = root(port)
    as_root(env, box, f"mkdir -p {folder} && cat > /srv/dev.py", input=SERVER)
    if file_mib:
        as_root(env, box, f"head -c {file_mib}M /dev/urandom > {folder}/big")
    as_root(
        env,
        box,
        f"setsid python3 /srv/dev.py {port} {folder} </dev/null >/dev/null 2>&1 &",
    )
    wait_for("the dev server", lambda: ".ready" in as_root(env, box, f"ls -a {folder}").split())


def box_sha256(env: dict[str, str], box: str, path: str) -> str:
    return as_root(env, box, f"sha256sum {path}").split()[0]


class Forward:
    """`hbtui forward ARGS` running in the background: its URLs once it listens."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [HBTUI_BIN, "forward", *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def url(self) -> str:
        """The next URL it prints (each forward's, once it listens)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith("http://127.0.0.1:"), line + self.stderr()
        return line.strip()

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return ""
        assert self.proc.stderr is not None
        return self.proc.stderr.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait(30)


def relays_of(port: int) -> list[str]:
    """The command lines of every process relaying to a box's port `port` (the relays run
    in the simulator's boxes, which share this machine's process table)."""
    needle = f"TCP:127.0.0.1:{port}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in argv.split(b"\0"):
            found.append(argv.replace(b"\0", b" ").decode(errors="replace"))
    return found
