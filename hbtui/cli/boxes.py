"""Box verbs: ls new start stop pause resume rm enter exec open logs repair adopt ports."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import webbrowser
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hbtui import boxtext
from hbtui.cli.ask import confirm_ending
from hbtui.cli.output import Invocation, box_table, print_json
from hbtui.core.agents import Ending
from hbtui.core.foundation import NewSpec
from hbtui.environment import child_env
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import LogLine, MachineState, Report, Step
from hbtui.names import LOCAL

if TYPE_CHECKING:
    from hbtui.core.foundation import BoxView


def _recipe(inv: Invocation) -> Path | None:
    return Path(inv.args.recipe) if getattr(inv.args, "recipe", None) else None


def cmd_ls(inv: Invocation) -> int:
    hosts = [inv.args.host] if inv.args.host else None
    listing = inv.call(inv.service.boxes.listing(include_foreign=inv.args.all, hosts=hosts))
    inv.show(
        [b.to_json() for b in listing.boxes],
        lambda: (
            box_table(
                listing.boxes,
                show_host=len(inv.service.hosts.names()) > 1,
                fit=sys.stdout.isatty(),
                width=inv.out.width,
            )
            if listing.boxes
            else None
        ),  # every host failed: the errors say so
        empty=None if listing.errors else "No boxes yet. Create one: hbtui new NAME",
    )
    for host, why in listing.errors.items():
        sys.stderr.write(f"host {host} unreachable: {' '.join(why.split())}\n")
    return 1 if listing.errors and not listing.boxes else 0


def cmd_new(inv: Invocation) -> int:
    from hbtui.cli.work import work_request

    a = inv.args
    work = work_request(inv)
    with inv.reporter() as rep:
        view = _new(
            inv,
            inv.service.new(
                NewSpec(
                    a.name,
                    host=inv.host,
                    image=a.image,
                    cpus=a.cpus,
                    memory_mib=a.mem,
                    port=a.port,
                    recipe=_recipe(inv),
                    start=not a.no_start,
                    use_base=not a.no_base,
                    branchable=a.branchable,
                    credentials=None if a.credentials is None else tuple(a.credentials),
                    egress=a.egress,
                    allow=None if a.allow is None else tuple(a.allow),
                    agent_permissions=a.agent_permissions,
                    work=work,
                ),
                report=rep,
            ),
        )
        rep.finish_steps()
    if view is None:
        return 1
    where = (
        f"executor: {view.url}"
        if view.host == LOCAL
        else f"executor web UI: hbtui open {view.name} --host {view.host}"
    )
    inv.show(view.to_json(), f"✓ box {view.name} is {view.state}; {where}")
    return 0


def _new(inv: Invocation, making: Coroutine[Any, Any, BoxView]) -> BoxView | None:
    """The new box; with --json, one whose agent ended is still printed (with how its
    agent ended, as `agent`), and None says so: a script gets the box it has now."""
    from hbtui.core.work import AgentEnded

    try:
        return inv.call(making)
    except AgentEnded as ended:
        if not inv.json or ended.view is None:
            raise
        print_json({**ended.view.to_json(), "agent": ended.start.to_json()})
        return None


def cmd_start(inv: Invocation) -> int:
    with inv.reporter() as rep:
        view = inv.call(inv.service.boxes.start(inv.args.name, inv.host, report=rep))
    return _state_done(inv, view, "started")


def cmd_stop(inv: Invocation) -> int:
    confirm_ending(inv, Ending.STOP, inv.args.name, answered=inv.args.yes)
    with inv.reporter() as rep:
        view = inv.call(inv.service.boxes.stop(inv.args.name, inv.host, report=rep))
    return _state_done(inv, view, MachineState.STOPPED)


def cmd_pause(inv: Invocation) -> int:
    return _each(
        inv, "paused", lambda name, rep: inv.service.boxes.pause(name, inv.host, report=rep)
    )


def cmd_resume(inv: Invocation) -> int:
    return _each(
        inv, "resumed", lambda name, rep: inv.service.boxes.resume(name, inv.host, report=rep)
    )


def _each(
    inv: Invocation, verb: str, change: Callable[[str, Report], Coroutine[Any, Any, BoxView]]
) -> int:
    """Change each named box in turn; one that fails is one error line, and the others
    still go (status 1 if any failed). --json: the boxes changed."""
    from hbtui.cli.output import print_error

    changed: list[BoxView] = []
    failed = 0
    for name in dict.fromkeys(inv.args.names):
        try:
            with inv.reporter() as rep:
                view = inv.call(change(name, rep))
        except HbtuiError as exc:
            print_error(exc)
            failed = max(failed, exc.exit_code)
            continue
        changed.append(view)
        if not inv.json:
            inv.done(f"{view.name} {verb}: {view.state}")
    if inv.json:
        print_json([v.to_json() for v in changed])
    return failed


def _state_done(inv: Invocation, view: BoxView, verb: str) -> int:
    inv.show(view.to_json(), f"✓ {view.name} {verb}: {view.state}")
    return 0


def confirm_typed(name: str, what: str) -> None:
    if not sys.stdin.isatty():
        raise UsageError(f"refusing to {what} {name!r} without a terminal to confirm; use --force")
    typed = input(f"Type the box name ({name}) to {what} it: ").strip()
    if typed != name:
        raise UsageError(f"confirmation did not match; {name!r} was not touched")


def cmd_rm(inv: Invocation) -> int:
    a = inv.args
    confirm_ending(inv, Ending.REMOVE, a.name, answered=a.yes or a.force)
    if not a.force:
        view = inv.call(inv.service.boxes.get(a.name, inv.host))
        if view.last_save:
            inv.out.print(f"last save of {a.name}: {view.last_save}", markup=False)
        else:
            inv.out.print(f"{a.name} was never saved; its /data will be gone", style="yellow")
        confirm_typed(a.name, "delete")
    with inv.reporter() as rep:
        inv.call(inv.service.remove(a.name, inv.host, report=rep))
    return 0


def _handoff(argv: list[str]) -> int:
    """Give this terminal to a child and pass its exit status through."""
    try:
        return subprocess.call(argv, env=child_env())
    except KeyboardInterrupt:
        return 130


def cmd_enter(inv: Invocation) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError("enter needs a terminal; to run one command: hbtui exec NAME -- CMD")
    argv = inv.call(inv.service.boxes.enter_argv(inv.args.name, inv.host, report=inv.reporter()))
    return _handoff(argv)


def cmd_exec(inv: Invocation) -> int:
    command = list(inv.args.command)
    # `exec NAME --host H -- CMD`: the remainder swallows options given after NAME.
    while command and command[0] != "--" and command[0].startswith("--host"):
        if command[0] == "--host" and len(command) > 1:
            inv.args.host, command = command[1], command[2:]
        elif command[0].startswith("--host="):
            inv.args.host, command = command[0].split("=", 1)[1], command[1:]
        else:
            break
    if command and command[0] == "--":
        command = command[1:]
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    argv = inv.call(inv.service.boxes.exec_argv(inv.args.name, command, inv.host, tty=tty))
    return _handoff(argv)


def cmd_open(inv: Invocation) -> int:
    """A local box's URL opens directly; a remote one's through a forward held until Ctrl-C.
    BOX:PORT opens a running `hbtui forward` of that port."""
    if ":" in inv.args.name:
        from hbtui.cli.forward import forwarded_url

        url = forwarded_url(inv, inv.args.name)
        if inv.args.print or not webbrowser.open(url):
            sys.stdout.write(url + "\n")
        else:
            sys.stdout.write(f"opened {url}\n")
        return 0

    async def open_and_hold() -> None:
        web = await inv.service.boxes.web(inv.args.name, inv.host)
        try:
            if inv.args.print or not webbrowser.open(web.url):
                sys.stdout.write(web.url + "\n")
            else:
                sys.stdout.write(f"opened {web.url}\n")
            sys.stdout.flush()
            if web.forwarded:
                sys.stderr.write(
                    f"forwarding {web.url} to {inv.args.name} on {inv.host}; Ctrl-C to stop\n"
                )
                await asyncio.Event().wait()
        finally:
            await web.close()

    with contextlib.suppress(KeyboardInterrupt):
        inv.call(open_and_hold())
    return 0


def _coloured(text: str) -> str:
    """Box text with its colours, ended by a reset: the terminal is left as it was."""
    return text + "\x1b[0m" if "\x1b" in text else text


def cmd_logs(inv: Invocation) -> int:
    """The box's output as the core gives it (only its colours kept, see hbtui.boxtext);
    the colours reach a terminal, a file or a pipe gets plain text."""
    a = inv.args
    shown = _coloured if sys.stdout.isatty() else boxtext.lines
    if a.provision:
        log = inv.call(inv.service.boxes.provision_log(a.name, inv.host, tail=a.tail))
        if log is None:
            raise UsageError(f"no provisioning log for {a.name!r}")
        for event in log.events:
            if isinstance(event, Step):
                sys.stdout.write(f"── step {event.index}/{event.total} {event.name}\n")
            elif isinstance(event, LogLine):
                sys.stdout.write(shown(event.text) + "\n")
        return 0
    if a.follow:

        async def follow() -> None:
            async for line in inv.service.boxes.follow_logs(a.name, inv.host, tail=a.tail):
                sys.stdout.write(shown(line) + "\n")
                sys.stdout.flush()

        with contextlib.suppress(KeyboardInterrupt):
            inv.call(follow())
        return 0
    sys.stdout.write(
        shown(inv.call(inv.service.boxes.workload_logs(a.name, inv.host, tail=a.tail)))
    )
    return 0


def cmd_repair(inv: Invocation) -> int:
    confirm_ending(inv, Ending.REPAIR, inv.args.name, answered=inv.args.yes)
    with inv.reporter() as rep:
        view = inv.call(
            inv.service.boxes.repair(inv.args.name, inv.host, recipe=_recipe(inv), report=rep)
        )
        rep.finish_steps()
    return inv.done(f"{view.name} repaired; executor: {view.url}")


def cmd_adopt(inv: Invocation) -> int:
    view = inv.call(inv.service.boxes.adopt(inv.args.name, inv.host))
    return inv.done(f"adopted {view.name} (port {view.port})")


def cmd_inspect(inv: Invocation) -> int:
    details = inv.call(inv.service.boxes.details(inv.args.name, inv.host))

    def text() -> None:
        for section in details.sections:
            inv.out.print(f"[bold]{section.title}[/]")
            width = max((len(label) for label, _ in section.fields), default=0)
            for label, value in section.fields:
                inv.out.print(f"  {label:<{width}}  {value}".rstrip(), markup=False)
        stats = details.stats
        inv.out.print("[bold]Live[/]")
        if stats is None:
            inv.out.print("  not running, or the engine reports no figures", markup=False)
        else:
            cpu = "?" if stats.cpu_percent is None else f"{stats.cpu_percent:.1f}%"
            memory = "?" if stats.memory_mib is None else f"{stats.memory_mib:.0f} MiB"
            inv.out.print(f"  CPU {cpu}  memory {memory}", markup=False)
        inv.out.print("[dim]the engine's own record: hbtui inspect --json[/]")

    inv.show(details.to_json(), text)
    return 0


def cmd_ports(inv: Invocation) -> int:
    slots = inv.call(inv.service.boxes.ports(inv.host))

    def text() -> None:
        from rich.text import Text

        used = [s for s in slots if s.state == "used"]
        busy = [s for s in slots if s.state == "busy"]
        free = [s for s in slots if s.state == "free"]
        lo, hi = slots[0].port, slots[-1].port
        inv.out.print(
            Text.assemble(
                f"range {lo}-{hi}: ",
                (f"{len(used)} used", "cyan"),
                ", ",
                (f"{len(busy)} busy", "yellow"),
                ", ",
                (f"{len(free)} free", "green"),
            )
        )
        for s in used:
            inv.out.print(Text.assemble(f"  {s.port}  used by ", (s.box, "bold")))
        for s in busy:
            inv.out.print(f"  {s.port}  busy (another process listens)", markup=False)

    inv.show([{"port": s.port, "state": s.state, "box": s.box or None} for s in slots], text)
    return 0
