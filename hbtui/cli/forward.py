"""`hbtui forward BOX PORT...`, and the forward `hbtui open BOX:PORT` opens."""

from __future__ import annotations

import contextlib
import sys

from hbtui.cli.output import Invocation, print_json
from hbtui.errors import UsageError
from hbtui.names import LOCAL, host_flag


def cmd_forward(inv: Invocation) -> int:
    """Prints each forward's URL (or, with --json, the forwards) once it listens, then
    holds them until Ctrl-C or SIGTERM, or until the box stops (one line, status 1)."""
    a = inv.args

    async def hold() -> None:
        forwards = inv.service.boxes.forward(a.name, inv.host)
        async with forwards.open(a.ports, local_port=a.port) as forwarding:
            if inv.json:
                print_json([f.to_json() for f in forwarding.forwards])
            for f in forwarding.forwards:
                if not inv.json:
                    sys.stdout.write(f.url + "\n")
                where = "" if f.host == LOCAL else f" on {f.host}"
                sys.stderr.write(
                    f"forwarding {f.url} to 127.0.0.1:{f.box_port} in {f.box}{where}\n"
                )
            sys.stderr.write("Ctrl-C to stop\n")
            sys.stdout.flush()
            await forwarding.wait()

    with contextlib.suppress(KeyboardInterrupt):
        inv.call(hold())
    return 0


def forwarded_url(inv: Invocation, target: str) -> str:
    """The URL of a running forward of BOX:PORT (any process's, on this machine)."""
    name, _, text = target.rpartition(":")
    if not text.isdigit():
        raise UsageError(f"{target!r}: expected BOX:PORT, like web:3000")
    port = int(text)
    running = [f for f in inv.service.boxes.forward(name, inv.host).running() if f.box_port == port]
    if not running:
        raise UsageError(
            f"no forward of port {port} of {name} is running here; start one with: "
            f"hbtui forward {name} {port}{host_flag(inv.host)}"
        )
    return running[-1].url
