"""`hbtui hosts ...` and the remote half of `hbtui open`.

Registered by hbtui.cli through `register(sub, verb)`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import webbrowser
from pathlib import Path
from typing import Any

from rich.table import Table

from hbtui.cli import err, out, print_json
from hbtui.config import Host as HostConfig
from hbtui.config import save_config
from hbtui.core.names import name_problem
from hbtui.core.ports import parse_range
from hbtui.core.registry import LOCAL, Registry
from hbtui.errors import UsageError
from hbtui.remote.connection import CONNECTION_ERRORS, _reason, changed_key_error
from hbtui.remote.errors import HostKeyError, HostUnreachable
from hbtui.remote.forward import open_forward
from hbtui.remote.hosts import check_host
from hbtui.remote.knownhosts import (
    append_trusted,
    fetch_server_key,
    key_algorithms,
    known_hosts_path,
    trusted_keys,
)
from hbtui.remote.target import parse_target


def _host_config(app: Any, name: str) -> HostConfig:
    host = app.config.hosts.get(name)
    if host is None:
        raise UsageError(f"unknown host {name!r}; see: hbtui hosts ls")
    return host


def check_host_name(name: str) -> str:
    if name == LOCAL:
        raise UsageError("'local' means this machine; pick another host name")
    problem = name_problem(name)
    if problem:
        raise UsageError(f"invalid host name {name!r}: {problem.replace('box name', 'host name')}")
    return name


# -- hosts add / ls / rm --------------------------------------------------------------


def cmd_hosts_add(app: Any) -> int:
    a = app.args
    name = check_host_name(a.name)
    if name in app.config.hosts:
        raise UsageError(f"host {name!r} exists already; remove it first: hbtui hosts rm {name}")
    target = parse_target(a.ssh)
    identity = ""
    if a.identity:
        path = Path(a.identity).expanduser().absolute()
        if not path.is_file():
            raise UsageError(f"--identity {a.identity}: no such file")
        identity = str(path)
    if a.ports:
        parse_range(a.ports)
    app.config.hosts[name] = HostConfig(
        ssh=str(target),
        identity=identity,
        smolvm=a.smolvm or "",
        state_dir=a.state_dir or "",
        ports=a.ports or "",
    )
    save_config(app.paths, app.config)
    out.print(f"[green]✓[/] added host [bold]{name}[/] ({target}); next: hbtui hosts check {name}")
    return 0


def cmd_hosts_ls(app: Any) -> int:
    hosts = app.config.hosts
    if app.args.json:
        print_json(
            [
                {
                    "name": n,
                    "ssh": h.ssh,
                    "identity": h.identity or None,
                    "smolvm": h.smolvm or None,
                    "state_dir": h.state_dir or None,
                    "ports": h.ports or f"{app.config.ports.low}-{app.config.ports.high}",
                }
                for n, h in sorted(hosts.items())
            ]
        )
        return 0
    if not hosts:
        out.print("No remote hosts. Add one: hbtui hosts add NAME --ssh USER@HOST")
        return 0
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("HOST", "SSH", "IDENTITY", "SMOLVM", "STATE DIR", "PORTS"):
        table.add_column(col)
    for n, h in sorted(hosts.items()):
        table.add_row(
            n,
            h.ssh,
            h.identity,
            h.smolvm or "(found there)",
            h.state_dir,
            h.ports or f"{app.config.ports.low}-{app.config.ports.high}",
        )
    out.print(table)
    return 0


def cmd_hosts_rm(app: Any) -> int:
    name = app.args.name
    _host_config(app, name)
    registry = Registry(app.paths.registry_file)
    boxes = [r.name for r in registry.read().on_host(name)]
    if boxes and not app.args.force:
        raise UsageError(
            f"host {name!r} still has boxes ({', '.join(boxes)}); remove them "
            f"first, or forget the host and its rows with --force"
        )

    async def forget() -> None:
        async with registry.transaction() as rows:
            for box in boxes:
                rows.remove(box, name)

    if boxes:
        asyncio.run(forget())
    del app.config.hosts[name]
    save_config(app.paths, app.config)
    extra = f" and its {len(boxes)} registry row(s); the machines stay on it" if boxes else ""
    out.print(f"[green]✓[/] removed host [bold]{name}[/]{extra}")
    return 0


# -- hosts check / trust --------------------------------------------------------------


def cmd_hosts_check(app: Any) -> int:
    name = app.args.name
    host = _host_config(app, name)
    report = asyncio.run(check_host(name, host, app.config))
    if app.args.json:
        print_json(report.to_json())
    else:
        for c in report.checks:
            mark = "[green]ok[/]" if c.ok else ("[red]FAIL[/]" if c.needed else "[yellow]warn[/]")
            out.print(f"{mark:>14}  [bold]{c.name}[/]: {c.detail}", soft_wrap=True)
            if not c.ok and c.fix:
                out.print(f"{'':>6}fix: {c.fix}", soft_wrap=True)
        out.print(
            f"host {name} is ready for boxes" if report.ok else f"[red]host {name} is not ready[/]"
        )
    return 0 if report.ok else 1


def _normal_fp(text: str) -> str:
    text = text.strip()
    if text.upper().startswith("SHA256:"):
        text = text[len("SHA256:") :]
    return "SHA256:" + text.rstrip("=")


async def _trust(app: Any) -> int:
    name = app.args.name
    target = parse_target(_host_config(app, name).ssh)
    kh = known_hosts_path()
    known = trusted_keys(target)
    try:
        if known:
            server = await fetch_server_key(target, algorithms=key_algorithms(known))
        else:
            server = await fetch_server_key(target)
    except (TimeoutError, *CONNECTION_ERRORS) as exc:
        raise HostUnreachable(f"cannot connect to host {name} ({target}): {_reason(exc)}") from None
    if known:
        if any(k.public_data == server.key.public_data for k in known):
            out.print(
                f"host {name} is already trusted: {server.algorithm} {server.fingerprint} "
                f"is in {kh}"
            )
            return 0
        raise changed_key_error(name, target, server.algorithm, server.fingerprint)
    out.print(f"host {name} ({target.host}:{target.port}) presents this {server.algorithm} key:")
    out.print(f"  [bold]{server.fingerprint}[/]")
    if app.args.fingerprint:
        if _normal_fp(app.args.fingerprint) != server.fingerprint:
            raise HostKeyError(
                f"REFUSED: host {name} presents {server.fingerprint}, not the "
                f"{app.args.fingerprint} you gave; nothing was trusted",
                fingerprint=server.fingerprint,
            )
    else:
        if not sys.stdin.isatty():
            raise UsageError(
                f"no terminal to confirm the key of {name}; after checking it, run: "
                f"hbtui hosts trust {name} --fingerprint {server.fingerprint}"
            )
        out.print(
            "Compare it with the host's own, e.g. there: "
            "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"
        )
        answer = input(f"Trust this key for {name}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            raise UsageError(f"not trusted; {kh} was not changed")
    append_trusted(target, server.key, kh)
    out.print(f"[green]✓[/] trusted {name}: added {server.fingerprint} to {kh}")
    return 0


def cmd_hosts_trust(app: Any) -> int:
    return asyncio.run(_trust(app))


# -- open, for remote boxes ---------------------------------------------------------------


def open_remote(app: Any) -> int:
    """`hbtui open NAME --host H`: forward a local port to the box and hold it."""

    async def hold() -> None:
        url, close = await open_forward(app.service, app.args.name, app.host)
        try:
            if app.args.print or not webbrowser.open(url):
                sys.stdout.write(url + "\n")
            else:
                sys.stdout.write(f"opened {url}\n")
            sys.stdout.flush()
            err.print(f"forwarding {url} to {app.args.name} on {app.host}; Ctrl-C to stop")
            await asyncio.Event().wait()
        finally:
            await close()

    try:
        asyncio.run(hold())
    except KeyboardInterrupt:
        pass
    return 0


# -- registration ---------------------------------------------------------------------


def register(sub: argparse._SubParsersAction, verb: Any) -> None:
    hp = verb(
        "hosts",
        lambda app: _usage(hp),
        "remote hosts over SSH: add, ls, rm, check, trust",
        host=False,
    )
    hs = hp.add_subparsers(dest="hosts_action", metavar="ACTION")

    sp = hs.add_parser("add", help="remember a remote host", description="remember a remote host")
    sp.set_defaults(func=cmd_hosts_add)
    sp.add_argument("name")
    sp.add_argument("--ssh", required=True, metavar="USER@HOST[:PORT]")
    sp.add_argument("--identity", metavar="FILE", help="the private key to log in with")
    sp.add_argument(
        "--smolvm",
        metavar="PATH",
        help="the engine there (default: found on PATH or in its python's smolmachines)",
    )
    sp.add_argument("--state-dir", metavar="DIR", help="the engine's --state-dir there")
    sp.add_argument("--ports", metavar="LO-HI", help="host ports for its boxes")

    sp = hs.add_parser("ls", help="list remote hosts", description="list remote hosts")
    sp.set_defaults(func=cmd_hosts_ls)
    sp.add_argument("--json", action="store_true", help="print JSON")

    sp = hs.add_parser("rm", help="forget a remote host", description="forget a remote host")
    sp.set_defaults(func=cmd_hosts_rm)
    sp.add_argument("name")
    sp.add_argument(
        "-f",
        "--force",
        action="store_true",
        help="also forget its boxes' rows (the machines stay on the host)",
    )

    sp = hs.add_parser(
        "check",
        help="connect and check the engine there",
        description="connect, find the engine and its version, say what is missing",
    )
    sp.set_defaults(func=cmd_hosts_check)
    sp.add_argument("name")
    sp.add_argument("--json", action="store_true", help="print JSON")

    sp = hs.add_parser(
        "trust",
        help="trust a host's SSH key after checking its fingerprint",
        description="show the host key's SHA256 fingerprint and add it to "
        "known_hosts once confirmed",
    )
    sp.set_defaults(func=cmd_hosts_trust)
    sp.add_argument("name")
    sp.add_argument(
        "--fingerprint",
        metavar="SHA256:...",
        help="trust without asking, only if the key has this fingerprint",
    )


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2
