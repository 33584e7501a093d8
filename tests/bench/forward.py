#!/usr/bin/env python3
"""What `hbtui forward` costs a dev server's user, against the engine's published port.

    .venv/bin/python tests/bench/forward.py [--rounds N] [--requests N] [--mib N]

One simulator box (tests/sim/smolvm, root, in a private HBTUI_HOME and engine state dir)
runs the dev server of tests/support/devserver.py on its own 127.0.0.1:3000, and beside it
a bridge like executor's (socat 0.0.0.0:3001 -> 127.0.0.1:3000) behind a port the engine
publishes (`machine update -p`, while the box is stopped). The same server is then asked
through the two ways in, in turns, each round:

  published   the engine's published port: what reaching executor costs
  forward     `hbtui forward BOX 3000`: a relay in the box over the engine's exec

  keepalive_ms   one request on a connection kept alive (median of --requests)
  connect_ms     one request on a new connection, a second after the last (median of
                 --requests / 10). A forward's relays are started ahead (two at a time);
                 new connections faster than the engine's exec starts one wait for it
  download_s     GET of a --mib MiB file (default 100), every byte counted

Prints a table; the LAST line is one JSON object: the medians over the rounds and each
figure's forward ÷ published ratio. Run it on a quiet machine: the figures are wall times.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import hbtui_bin, log  # tests/bench/common.py, beside this script

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from support import SIM_RECIPE, SIM_SMOLVM, sim_usable  # noqa: E402
from support.cli import as_root  # noqa: E402
from support.devserver import Forward, start_dev_server  # noqa: E402

BOX = "fwdbench"
DEV, BRIDGE = 3000, 3001
FIGURES = ("keepalive_ms", "connect_ms", "download_s")
PAUSE = 1.0  # seconds between the new connections of connect_ms


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(conn: http.client.HTTPConnection, path: str) -> int:
    """Bytes of the answer's body, read a chunk at a time (never held whole)."""
    conn.request("GET", path)
    answer = conn.getresponse()
    if answer.status != 200:
        raise SystemExit(f"GET {path}: {answer.status}")
    total = 0
    while chunk := answer.read(1 << 16):
        total += len(chunk)
    return total


def measure(port: int, requests: int, size: int) -> dict[str, float]:
    kept = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    for _ in range(5):
        request(kept, "/conn")
    times = []
    for _ in range(requests):
        t0 = time.perf_counter()
        request(kept, "/conn")
        times.append(time.perf_counter() - t0)
    kept.close()
    fresh = []
    for _ in range(max(3, requests // 10)):
        time.sleep(PAUSE)  # a user's next page, not a flood: see the module's docstring
        t0 = time.perf_counter()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        request(conn, "/conn")
        conn.close()
        fresh.append(time.perf_counter() - t0)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    got = request(conn, "/big")
    download = time.perf_counter() - t0
    conn.close()
    if got != size:
        raise SystemExit(f"the download was {got} bytes, not {size}")
    return {
        "keepalive_ms": statistics.median(times) * 1000,
        "connect_ms": statistics.median(fresh) * 1000,
        "download_s": download,
    }


def run(env: dict[str, str], engine: list[str], args: argparse.Namespace) -> dict[str, object]:
    hbtui = hbtui_bin()

    def hb(*words: str) -> None:
        done = subprocess.run([hbtui, *words], env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"hbtui {' '.join(words)}: {done.stderr.strip()}")

    published = free_port()
    log(f"making {BOX}, with 127.0.0.1:{published} published to its port {BRIDGE}")
    hb("new", BOX, "--recipe", str(SIM_RECIPE), "-q")
    hb("stop", BOX)
    subprocess.run(
        [*engine, "machine", "update", "--name", BOX, "-p", f"{published}:{BRIDGE}"],
        check=True,
        capture_output=True,
    )
    hb("start", BOX)
    start_dev_server(env, BOX, DEV, file_mib=args.mib)
    as_root(
        env,
        BOX,
        f"setsid socat TCP-LISTEN:{BRIDGE},bind=0.0.0.0,fork,reuseaddr TCP:127.0.0.1:{DEV} "
        "</dev/null >/dev/null 2>&1 &",
    )
    forward = Forward(BOX, str(DEV), env=env)
    try:
        forwarded = int(forward.url().rsplit(":", 1)[1].strip("/"))
        size = args.mib << 20
        rounds: dict[str, list[dict[str, float]]] = {"published": [], "forward": []}
        for i in range(args.rounds):
            for way, port in (("published", published), ("forward", forwarded)):
                rounds[way].append(measure(port, args.requests, size))
                log(f"round {i + 1} {way}: {rounds[way][-1]}")
    finally:
        forward.stop()
    result: dict[str, object] = {"mib": args.mib, "rounds": args.rounds}
    for way, got in rounds.items():
        for figure in FIGURES:
            result[f"{way}_{figure}"] = round(statistics.median(r[figure] for r in got), 4)
    for figure in FIGURES:
        f, p = result[f"forward_{figure}"], result[f"published_{figure}"]
        assert isinstance(f, float) and isinstance(p, float)
        result[f"{figure}_ratio"] = round(f / p, 2)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--mib", type=int, default=100)
    args = parser.parse_args()
    why = sim_usable()
    if why:
        raise SystemExit(why)
    with tempfile.TemporaryDirectory(prefix="hbtui-fwd-bench-") as tmp:
        state = Path(tmp, "engine-state")
        state.mkdir()
        env = dict(
            os.environ,
            HBTUI_HOME=str(Path(tmp, "home")),
            HBTUI_SMOLVM=str(SIM_SMOLVM),
            HBTUI_SMOLVM_STATE_DIR=str(state),
        )
        engine = [str(SIM_SMOLVM), "--state-dir", str(state)]
        try:
            result = run(env, engine, args)
        finally:
            subprocess.run(
                [*engine, "machine", "delete", "--name", BOX, "--force"], capture_output=True
            )
    print(f"{'':14}{'published':>12}{'forward':>12}{'ratio':>8}")
    for figure in FIGURES:
        print(
            f"{figure:14}{result[f'published_{figure}']:>12}{result[f'forward_{figure}']:>12}"
            f"{result[f'{figure}_ratio']:>8}"
        )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
