"""Key verbs: secrets set/ls/rm, a box's credentials, its egress policy."""

from __future__ import annotations

import sys

from hbtui.cli.ask import confirm_ending
from hbtui.cli.output import Invocation, table
from hbtui.core.agents import Ending
from hbtui.errors import UsageError
from hbtui.present import age


def _read_value(name: str) -> str:
    """From stdin when it is not a terminal (one line), else typed without echo."""
    if not sys.stdin.isatty():
        raw = sys.stdin.buffer.readline()
        if sys.stdin.buffer.read(1):
            raise UsageError(f"the value of {name!r} must be one line on stdin")
        try:
            return raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise UsageError(f"the value of {name!r} is not UTF-8 text") from None
    from hbtui.core.keys import read_secret_value

    return read_secret_value(f"Value of {name}: ")


def cmd_secrets_set(inv: Invocation) -> int:
    name = inv.args.name
    inv.service.secrets.preset(name)  # an unknown name fails before a value is asked for
    info = inv.service.secrets.set(name, _read_value(name))
    inv.out.print(f"✓ secret {info.name} stored in the {info.store}", markup=False)
    if info.left_behind:
        sys.stderr.write(f"warning: its former copy was not deleted: {info.left_behind}\n")
    return 0


def cmd_secrets_ls(inv: Invocation) -> int:
    secrets = inv.service.secrets.listing()
    inv.show(
        [s.to_json() for s in secrets],
        lambda: table(
            ("SECRET", "KEPT IN", "SET", "USED BY"),
            [(s.name, s.store, age(s.set), ", ".join(s.boxes) or "-") for s in secrets],
        ),
        empty="No secrets yet. Store one: hbtui secrets set anthropic",
    )
    return 0


def cmd_secrets_rm(inv: Invocation) -> int:
    users, left = inv.service.secrets.remove(inv.args.name)
    if left:
        inv.out.print(
            f"secret {inv.args.name} removed from the list; its value was not deleted",
            markup=False,
        )
        sys.stderr.write(f"warning: {left}\n")
    else:
        inv.out.print(f"✓ secret {inv.args.name} forgotten (its value deleted)", markup=False)
    if users:
        they = f"{users[0]} uses it and" if len(users) == 1 else f"{', '.join(users)} use it and"
        sys.stderr.write(f"warning: {they} will not start until it is set again\n")
    return 0


def cmd_credentials(inv: Invocation) -> int:
    a = inv.args
    if a.action:
        if not a.presets:
            raise UsageError(f"credentials {a.name} {a.action} needs at least one PRESET")
        add = a.presets if a.action == "add" else []
        remove = a.presets if a.action == "rm" else []
        confirm_ending(inv, Ending.CREDENTIALS, a.name, answered=a.yes)
        with inv.reporter() as rep:
            inv.call(
                inv.service.bases.change_credentials(
                    a.name, inv.host, add=add, remove=remove, report=rep
                )
            )
    elif a.presets:
        raise UsageError("say add or rm before the presets: hbtui credentials NAME add PRESET")
    report = inv.call(inv.service.boxes.credentials(a.name, inv.host))

    def text() -> None:
        if not report.known:
            inv.out.print(
                f"{a.name} was adopted from a machine that does not say which credentials it has",
                markup=False,
            )
        elif not report.presets:
            inv.out.print(
                f"{a.name} has no credentials (add: hbtui credentials {a.name} add anthropic)",
                markup=False,
            )
        for p in report.presets:
            state = "secret missing" if p.name in report.missing else "managed"
            var = report.rebound.get(p.name, p.env_var)
            inv.out.print(f"{p.name}: {var} for {', '.join(p.hosts)} ({state})", markup=False)
        for preset, var in report.rebound.items():
            sys.stderr.write(
                f"warning: {a.name} was bound to {preset} as {var}; the preset now says "
                f"{next(p.env_var for p in report.presets if p.name == preset)}: bind it "
                f"again with hbtui credentials {a.name} rm {preset}, then add {preset}\n"
            )
        for gone in report.missing:
            sys.stderr.write(f"warning: no secret {gone!r}: hbtui secrets set {gone}\n")
        for found in report.plaintext or []:
            sys.stderr.write(f"warning: {found}\n")
        if report.plaintext is None and report.presets:
            inv.out.print("(start the box to check it for plaintext copies of keys)", markup=False)

    inv.show(report.to_json(), text)
    return 0


def cmd_egress(inv: Invocation) -> int:
    report = inv.call(inv.service.boxes.egress(inv.args.name, inv.host))
    lines = [f"{report.name}: {report.policy.describe()}"]
    if not report.denials:
        lines.append("no refused connections recorded")
    for event in report.denials:
        lines.append("refused: " + " ".join(f"{k}={v}" for k, v in event.items()))
    inv.show(report.to_json(), "\n".join(lines))
    return 0
