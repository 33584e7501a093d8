"""`hbtui VERB`: the scriptable front end. `hbtui` alone opens the dashboard.

Argument parsing and output only: every verb calls one BoxService method (or
an archive function) and renders its result with rich, or as JSON with
`--json`. User errors print one line and exit non-zero; `--debug` shows the
traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import webbrowser
from collections.abc import Callable, Coroutine
from datetime import UTC
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from hbtui import __version__
from hbtui.config import config_to_dict, load_config
from hbtui.core.boxes import MISSING, BoxService, BoxView
from hbtui.core.passphrase import scrub_environment
from hbtui.core.registry import LOCAL
from hbtui.environment import child_env
from hbtui.errors import HbtuiError, UsageError
from hbtui.paths import Paths, resolve_paths
from hbtui.progress import ConsoleReporter

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

STATE_STYLE = {
    "running": "green",
    "stopped": "yellow",
    "created": "cyan",
    "failed": "red",
    "missing": "red",
    "unreachable": "red",
}
PROVISION_STYLE = {"ready": "green", "provisioning": "cyan", "failed": "red"}


class App:
    """What every verb needs: paths, config and the service, made on first use."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.paths: Paths = resolve_paths()
        self.config = load_config(self.paths)
        self._service: BoxService | None = None

    @property
    def service(self) -> BoxService:
        if self._service is None:
            self.paths.ensure()
            self._service = make_service(self.paths, self.config)
        return self._service

    @property
    def host(self) -> str:
        return getattr(self.args, "host", None) or LOCAL

    def reporter(self) -> ConsoleReporter:
        quiet = getattr(self.args, "quiet", False)
        return ConsoleReporter(
            err if getattr(self.args, "json", False) else out, show_logs=not quiet
        )


def make_service(paths: Paths, config: Any) -> BoxService:
    try:
        from hbtui.remote import remote_host_factory
    except ImportError:
        return BoxService(paths, config)
    return BoxService(paths, config, remote_host_factory=remote_host_factory(paths, config))


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def age(created: str | None) -> str:
    from datetime import datetime

    if not created:
        return ""
    try:
        then = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return ""
    secs = int((datetime.now(UTC) - then).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{max(secs, 0)}s"


def box_table(boxes: list[BoxView], show_host: bool) -> Table:
    headers = (
        ["BOX"]
        + (["HOST"] if show_host else [])
        + ["STATE", "PORT", "URL", "IMAGE", "CPUS", "MEM", "AGE", "PROVISIONING"]
    )
    rows = []
    for b in boxes:
        state = f"[{STATE_STYLE.get(b.state, 'white')}]{b.state}[/]"
        name = b.name if b.kind in ("box", MISSING) else f"{b.name} [dim]({b.kind})[/]"
        prov = (
            f"[{PROVISION_STYLE.get(b.provisioning, 'white')}]{b.provisioning}[/]"
            if b.provisioning
            else ""
        )
        rows.append(
            [name]
            + ([b.host] if show_host else [])
            + [
                state,
                str(b.port or ""),
                b.url or "",
                b.image or "",
                str(b.cpus or ""),
                f"{b.memory_mib} MiB" if b.memory_mib else "",
                age(b.created),
                prov,
            ]
        )
    table = Table(box=None, header_style="bold", pad_edge=False)
    for i, header in enumerate(headers):
        # In a narrow terminal the image gives way; every other column stays whole.
        width = max([len(header)] + [Text.from_markup(r[i]).cell_len for r in rows])
        table.add_column(
            header,
            no_wrap=True,
            overflow="ellipsis",
            min_width=None if header == "IMAGE" else width,
        )
    for row in rows:
        table.add_row(*row)
    return table


# -- verbs ----------------------------------------------------------------------------


def cmd_doctor(app: App) -> int:
    from hbtui.core.doctor import run_doctor

    report = run(run_doctor(app.paths, app.config, probe=app.args.probe))
    if app.args.json:
        print_json(report.to_json())
    else:
        for c in report.checks:
            word, style = (
                ("ok", "green") if c.ok else (("FAIL", "red") if c.needed else ("warn", "yellow"))
            )
            out.print(f"[{style}]{word:>4}[/]  [bold]{c.name}[/]: {c.detail}")
            if not c.ok and c.fix:
                out.print(f"{'':>6}fix: {c.fix}")
        out.print("all needed checks pass" if report.ok else "[red]some needed checks fail[/]")
    return 0 if report.ok else 1


def cmd_ls(app: App) -> int:
    hosts = [app.args.host] if app.args.host else None
    if app.args.host and app.args.host not in app.service.host_names():
        raise UsageError(f"unknown host {app.args.host!r}; see: hbtui hosts ls")
    listing = run(app.service.list_boxes(include_foreign=app.args.all, hosts=hosts))
    if app.args.json:
        print_json([b.to_json() for b in listing.boxes])
    elif listing.boxes:
        out.print(box_table(listing.boxes, show_host=bool(app.config.hosts)))
    elif not listing.errors:
        out.print("No boxes yet. Create one: hbtui new NAME")
    for host, why in listing.errors.items():
        err.print(f"[red]host {host} unreachable:[/] {why}")
    return 1 if listing.errors and not listing.boxes else 0


def cmd_new(app: App) -> int:
    a = app.args
    with app.reporter() as rep:
        view = run(
            app.service.new(
                a.name,
                host_name=app.host,
                image=a.image,
                cpus=a.cpus,
                memory_mib=a.mem,
                port=a.port,
                recipe=Path(a.recipe) if a.recipe else None,
                start=not a.no_start,
                report=rep,
            )
        )
        rep.finish_steps()
    if a.json:
        print_json(view.to_json())
    else:
        where = (
            f"executor: {view.url}"
            if view.host == LOCAL
            else f"executor web UI: hbtui open {view.name} --host {view.host}"
        )
        out.print(f"[green]✓[/] box [bold]{view.name}[/] is {view.state}; {where}")
    return 0


def _simple(method: str, verb: str) -> Callable[[App], int]:
    def cmd(app: App) -> int:
        with app.reporter() as rep:
            view = run(getattr(app.service, method)(app.args.name, app.host, report=rep))
        if getattr(app.args, "json", False):
            print_json(view.to_json())
        else:
            out.print(f"[green]✓[/] {view.name} {verb}: {view.state}")
        return 0

    return cmd


def confirm_typed(name: str, what: str) -> None:
    if not sys.stdin.isatty():
        raise UsageError(f"refusing to {what} {name!r} without a terminal to confirm; use --force")
    typed = input(f"Type the box name ({name}) to {what} it: ").strip()
    if typed != name:
        raise UsageError(f"confirmation did not match; {name!r} was not touched")


def cmd_rm(app: App) -> int:
    a = app.args
    view = run(app.service.get(a.name, app.host))
    if not a.force:
        if view.last_save:
            out.print(f"last save of {a.name}: {view.last_save}")
        else:
            out.print(f"[yellow]{a.name} was never saved[/]; its /data will be gone")
        confirm_typed(a.name, "delete")
    with app.reporter() as rep:
        run(app.service.remove(a.name, app.host, report=rep))
    return 0


def _handoff(argv: list[str]) -> int:
    """Give this terminal to a child and pass its exit status through."""
    try:
        return subprocess.call(argv, env=child_env())
    except KeyboardInterrupt:
        return 130


def cmd_enter(app: App) -> int:
    argv = run(app.service.enter_argv(app.args.name, app.host, report=app.reporter()))
    return _handoff(argv)


def cmd_exec(app: App) -> int:
    command = list(app.args.command)
    # `exec NAME --host H -- CMD`: the remainder swallows options given after NAME.
    while command and command[0] != "--" and command[0].startswith("--host"):
        if command[0] == "--host" and len(command) > 1:
            app.args.host, command = command[1], command[2:]
        elif command[0].startswith("--host="):
            app.args.host, command = command[0].split("=", 1)[1], command[1:]
        else:
            break
    if command and command[0] == "--":
        command = command[1:]
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    argv = run(app.service.exec_argv(app.args.name, command, app.host, tty=tty))
    return _handoff(argv)


def cmd_open(app: App) -> int:
    if app.host != LOCAL:  # a remote box: forward a local port over SSH and hold it
        from hbtui.remote.cli import open_remote

        return open_remote(app)
    url = run(app.service.url(app.args.name, app.host))
    if app.args.print or not webbrowser.open(url):
        out.print(url)
    else:
        out.print(f"opened {url}")
    return 0


def cmd_logs(app: App) -> int:
    a = app.args
    if a.provision:
        logs = app.service.provision_logs(a.name, app.host)
        if not logs:
            raise UsageError(f"no provisioning log for {a.name!r}")
        sys.stdout.write(logs[-1].read_text(errors="replace"))
        return 0
    if a.follow:

        async def follow() -> None:
            host = await app.service.host(app.host)
            await app.service.get(a.name, app.host)
            async for line in host.engine.logs_stream(a.name, tail=a.tail):
                sys.stdout.write(line + "\n")
                sys.stdout.flush()

        try:
            run(follow())
        except KeyboardInterrupt:
            pass
        return 0
    sys.stdout.write(run(app.service.workload_logs(a.name, app.host, tail=a.tail)))
    return 0


def cmd_repair(app: App) -> int:
    with app.reporter() as rep:
        view = run(
            app.service.repair(
                app.args.name,
                app.host,
                recipe=Path(app.args.recipe) if app.args.recipe else None,
                report=rep,
            )
        )
        rep.finish_steps()
    out.print(f"[green]✓[/] {view.name} repaired; executor: {view.url}")
    return 0


def cmd_adopt(app: App) -> int:
    view = run(app.service.adopt(app.args.name, app.host))
    out.print(f"[green]✓[/] adopted {view.name} (port {view.port})")
    return 0


def cmd_ports(app: App) -> int:
    slots = run(app.service.ports(app.host))
    if app.args.json:
        print_json([{"port": s.port, "state": s.state, "box": s.box or None} for s in slots])
        return 0
    used = [s for s in slots if s.state == "used"]
    busy = [s for s in slots if s.state == "busy"]
    free = [s for s in slots if s.state == "free"]
    lo, hi = slots[0].port, slots[-1].port
    out.print(
        f"range {lo}-{hi}: [cyan]{len(used)} used[/], [yellow]{len(busy)} busy[/], "
        f"[green]{len(free)} free[/]"
    )
    for s in used:
        out.print(f"  {s.port}  used by [bold]{s.box}[/]")
    for s in busy:
        out.print(f"  {s.port}  busy (another process listens)")
    return 0


def cmd_config(app: App) -> int:
    if app.args.action == "path":
        out.print(str(app.paths.config_file))
    else:
        import tomli_w

        sys.stdout.write(tomli_w.dumps(config_to_dict(app.config)))
    return 0


def _passphrase(confirm: bool) -> bytes:
    from hbtui.core.passphrase import get_passphrase

    return get_passphrase(confirm=confirm)


def cmd_save(app: App) -> int:
    a = app.args
    app.service  # fail on a bad config before asking for a passphrase
    passphrase = _passphrase(confirm=True)
    with app.reporter() as rep:
        path = run(
            app.service.save(
                a.name,
                app.host,
                output=Path(a.output) if a.output else None,
                passphrase=passphrase,
                verify=not a.no_verify,
                report=rep,
            )
        )
    if a.json:
        print_json({"box": a.name, "archive": str(path), "bytes": path.stat().st_size})
    else:
        out.print(f"[green]✓[/] saved {a.name} to {path} ({path.stat().st_size:,} bytes)")
    return 0


def cmd_load(app: App) -> int:
    a = app.args
    from hbtui.core.archive_ops import archive_kind

    archive_kind(Path(a.file).expanduser())  # a missing or foreign file fails before the prompt
    passphrase = _passphrase(confirm=False)
    with app.reporter() as rep:
        view = run(
            app.service.load(
                Path(a.file),
                a.name,
                app.host,
                passphrase=passphrase,
                recipe=Path(a.recipe) if a.recipe else None,
                report=rep,
            )
        )
        rep.finish_steps()
    if a.json:
        print_json(view.to_json())
    else:
        out.print(
            f"[green]✓[/] loaded {a.file} into box [bold]{view.name}[/]; executor: {view.url}"
        )
    return 0


def cmd_extract(app: App) -> int:
    from hbtui.core.archive_ops import archive_kind, extract

    a = app.args
    archive_kind(Path(a.file).expanduser())
    passphrase = _passphrase(confirm=False)
    with app.reporter() as rep:
        dest = run(
            extract(Path(a.file), Path(a.dir) if a.dir else None, passphrase=passphrase, report=rep)
        )
    out.print(f"[green]✓[/] extracted into {dest}")
    return 0


def cmd_verify(app: App) -> int:
    from hbtui.core.archive_ops import archive_kind, verify

    a = app.args
    if archive_kind(Path(a.file).expanduser()) != "hbx":
        raise UsageError("verify checks .hbx archives; extract an old backup to check it")
    passphrase = _passphrase(confirm=False)
    with app.reporter() as rep:
        size = run(verify(Path(a.file), passphrase=passphrase, report=rep))
    out.print(f"[green]✓[/] {a.file}: every chunk authentic ({size:,} bytes of payload)")
    return 0


def cmd_archive_info(app: App) -> int:
    from hbtui.archive.format import read_header
    from hbtui.core.archive_ops import archive_kind

    a = app.args
    if archive_kind(Path(a.file).expanduser()) != "hbx":
        raise UsageError(f"{a.file} is an old gpg backup; it has no hbtui header")
    info = read_header(Path(a.file).expanduser())
    data = {
        "format_version": info.version,
        "aead": info.aead,
        "kdf": info.kdf_name,
        "kdf_params": info.kdf.describe(),
        "chunk_size": info.chunk_size,
        "archive_size": info.archive_size,
        "payload_size": info.plaintext_size,
    }
    if a.json:
        print_json(data)
    else:
        for key, value in data.items():
            out.print(f"{key:>15}: {value}")
    return 0


def cmd_version(app: App) -> int:
    out.print(f"hbtui {__version__}")
    return 0


# -- parser ---------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hbtui",
        description="Boxes for AI coding agents "
        "(smolvm microVMs). Run without a verb for the dashboard.",
    )
    p.add_argument("--version", action="version", version=f"hbtui {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="verb", metavar="VERB")

    def verb(
        name: str, fn: Callable[[App], int], help: str, *, host: bool = True, json_: bool = False
    ) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help)
        sp.set_defaults(func=fn)
        if host:
            sp.add_argument("--host", metavar="NAME", help="a remote host (see hbtui hosts)")
        if json_:
            sp.add_argument("--json", action="store_true", help="print JSON")
        return sp

    sp = verb("doctor", cmd_doctor, "check that this host can run boxes", host=False, json_=True)
    sp.add_argument("--probe", action="store_true", help="also try a real boot (up to 60 s)")

    sp = verb("ls", cmd_ls, "list boxes", json_=True)
    sp.add_argument("--all", action="store_true", help="also machines hbtui did not make")

    sp = verb("new", cmd_new, "create and provision a box", json_=True)
    sp.add_argument("name")
    sp.add_argument("--image", help="OCI image (default from config: ubuntu:24.04)")
    sp.add_argument("--cpus", type=int)
    sp.add_argument("--mem", type=int, metavar="MIB", help="memory in MiB")
    sp.add_argument("--port", type=int, help="host port (default: a free one in the range)")
    sp.add_argument("--recipe", metavar="DIR", help="a recipe folder (provision/ + guest/)")
    sp.add_argument("--no-start", action="store_true", help="leave the box stopped when ready")
    sp.add_argument("-q", "--quiet", action="store_true", help="hide the provisioning output")

    for name, method, word, help in (
        ("start", "start", "started", "start a box"),
        ("stop", "stop", "stopped", "quiesce and stop a box"),
    ):
        sp = verb(name, _simple(method, word), help, json_=True)
        sp.add_argument("name")

    sp = verb("rm", cmd_rm, "delete a box and free its port")
    sp.add_argument("name")
    sp.add_argument("-f", "--force", action="store_true", help="do not ask to type the name")

    sp = verb("enter", cmd_enter, "a shell as agent in the box's tmux session main")
    sp.add_argument("name")

    sp = verb("exec", cmd_exec, "run a command in a box as agent: hbtui exec NAME -- CMD...")
    sp.add_argument("name")
    sp.add_argument("command", nargs=argparse.REMAINDER)

    sp = verb("open", cmd_open, "open the box's executor web UI")
    sp.add_argument("name")
    sp.add_argument("--print", action="store_true", help="print the URL instead")

    sp = verb("logs", cmd_logs, "the box's workload output")
    sp.add_argument("name")
    sp.add_argument("-f", "--follow", action="store_true")
    sp.add_argument("--tail", type=int, metavar="N")
    sp.add_argument("--provision", action="store_true", help="the last provisioning log instead")

    sp = verb("repair", cmd_repair, "run the recipe again in a box")
    sp.add_argument("name")
    sp.add_argument("--recipe", metavar="DIR")
    sp.add_argument("-q", "--quiet", action="store_true")

    sp = verb("adopt", cmd_adopt, "take an orphaned hbtui machine back into the registry")
    sp.add_argument("name")

    verb("ports", cmd_ports, "the port range: used, busy, free", json_=True)

    sp = verb("config", cmd_config, "where the config is, and what it says", host=False)
    sp.add_argument("action", choices=["path", "show"])

    sp = verb("save", cmd_save, "save a box's /data as an encrypted archive", json_=True)
    sp.add_argument("name")
    sp.add_argument("-o", "--output", metavar="FILE", help="default: <backups>/NAME-<UTC time>.hbx")
    sp.add_argument("--no-verify", action="store_true", help="skip the authentication pass")

    sp = verb("load", cmd_load, "a new box from an archive (.hbx or old .tar.gz.gpg)", json_=True)
    sp.add_argument("file")
    sp.add_argument("name")
    sp.add_argument("--recipe", metavar="DIR")
    sp.add_argument("-q", "--quiet", action="store_true")

    sp = verb("extract", cmd_extract, "unpack an archive's files into a folder (no VM)", host=False)
    sp.add_argument("file")
    sp.add_argument("dir", nargs="?", help="a new folder (default: beside the archive)")

    sp = verb("verify", cmd_verify, "authenticate every chunk of an archive", host=False)
    sp.add_argument("file")

    sp = verb("archive", lambda app: 0, "archive tools", host=False)
    asub = sp.add_subparsers(dest="archive_verb", metavar="ACTION", required=True)
    info = asub.add_parser("info", help="show an archive's header (no passphrase needed)")
    info.add_argument("file")
    info.add_argument("--json", action="store_true")
    info.set_defaults(func=cmd_archive_info)

    verb("version", cmd_version, "print the version", host=False)
    for register in extra_verbs():
        register(sub, verb)
    return p


def extra_verbs() -> list[Callable[..., None]]:
    """Verb groups that live beside their feature (archives, remote hosts)."""
    registrars = []
    for module in ("hbtui.remote.cli",):
        try:
            mod = __import__(module, fromlist=["register"])
        except ImportError as exc:
            if exc.name != module:
                raise
            continue
        registrars.append(mod.register)
    return registrars


def main(argv: list[str] | None = None) -> int:
    scrub_environment()  # before anything can start a child process
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.verb is None:
            from hbtui.tui.app import run_dashboard

            return run_dashboard()
        return args.func(App(args))
    except HbtuiError as exc:
        if args.debug:
            raise
        err.print(f"[red]error:[/] {exc.message}", highlight=False, markup=True)
        if exc.hint:
            err.print(f"[dim]{exc.hint}[/]")
        return exc.exit_code
    except KeyboardInterrupt:
        err.print("interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
