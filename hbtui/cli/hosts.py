"""`hbtui hosts add|ls|rm|check|trust`: the remote hosts in the config."""

from __future__ import annotations

import sys

from hbtui.cli.output import Invocation, print_checks, table
from hbtui.errors import UsageError


def cmd_hosts_add(inv: Invocation) -> int:
    a = inv.args
    settings = inv.service.hosts.add(
        a.name,
        ssh=a.ssh,
        identity=a.identity or "",
        smolvm=a.smolvm or "",
        state_dir=a.state_dir or "",
        ports=a.ports or "",
    )
    return inv.done(f"added host {a.name} ({settings.ssh}); next: hbtui hosts check {a.name}")


def cmd_hosts_ls(inv: Invocation) -> int:
    hosts = inv.service.hosts.listing()
    ports = {n: inv.service.hosts.port_range(n) for n in hosts}
    inv.show(
        [
            {
                "name": n,
                "ssh": h.ssh,
                "identity": h.identity or None,
                "smolvm": h.smolvm or None,
                "state_dir": h.state_dir or None,
                "ports": ports[n],
            }
            for n, h in hosts.items()
        ],
        lambda: table(
            ("HOST", "SSH", "IDENTITY", "SMOLVM", "STATE DIR", "PORTS"),
            [
                (n, h.ssh, h.identity, h.smolvm or "(found there)", h.state_dir, ports[n])
                for n, h in hosts.items()
            ],
        ),
        empty="No remote hosts. Add one: hbtui hosts add NAME --ssh USER@HOST",
    )
    return 0


def cmd_hosts_rm(inv: Invocation) -> int:
    name = inv.args.name
    boxes = inv.call(inv.service.hosts.remove(name, force=inv.args.force))
    extra = f" and its {len(boxes)} registry row(s); the machines stay on it" if boxes else ""
    return inv.done(f"removed host {name}{extra}")


def cmd_hosts_check(inv: Invocation) -> int:
    name = inv.args.name
    report = inv.call(inv.service.hosts.check(name))

    def text() -> None:
        print_checks(inv.out, report.checks)
        if report.ok:
            inv.out.print(f"host {name} is ready for boxes", markup=False)
        else:
            inv.out.print(f"host {name} is not ready", style="red", markup=False)

    inv.show(report.to_json(), text)
    return 0 if report.ok else 1


def cmd_hosts_trust(inv: Invocation) -> int:
    name, expected = inv.args.name, inv.args.fingerprint
    offer = inv.call(inv.service.hosts.offered_key(name))
    out = inv.out
    if offer.trusted:
        out.print(
            f"host {name} is already trusted: {offer.algorithm} {offer.fingerprint} "
            f"is in {offer.known_hosts}",
            markup=False,
        )
        return 0
    target = offer.target
    out.print(f"host {name} ({target.host}:{target.port}) presents this {offer.algorithm} key:")
    out.print(f"  {offer.fingerprint}", style="bold", markup=False)
    if expected is None:
        if not sys.stdin.isatty():
            raise UsageError(
                f"no terminal to confirm the key of {name}; after checking it, run: "
                f"hbtui hosts trust {name} --fingerprint {offer.fingerprint}"
            )
        out.print(
            "Compare it with the host's own, e.g. there: "
            "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"
        )
        answer = input(f"Trust this key for {name}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            raise UsageError(f"not trusted; {offer.known_hosts} was not changed")
    inv.service.hosts.trust(offer, expected=expected)
    out.print(f"✓ trusted {name}: added {offer.fingerprint} to {offer.known_hosts}", markup=False)
    return 0
