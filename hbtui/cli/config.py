"""This machine and hbtui itself: doctor, config, version."""

from __future__ import annotations

import sys

from hbtui import __version__
from hbtui.cli.output import Invocation, print_checks, print_json


def cmd_doctor(inv: Invocation) -> int:
    report = inv.call(inv.service.doctor(probe=inv.args.probe))
    if inv.json:
        print_json(report.to_json())
    else:
        print_checks(inv.out, report.checks)
        if report.ok:
            inv.out.print("all needed checks pass")
        else:
            inv.out.print("some needed checks fail", style="red")
    return 0 if report.ok else 1


def cmd_config(inv: Invocation) -> int:
    if inv.args.action == "path":
        sys.stdout.write(f"{inv.service.config_path()}\n")
    else:
        import tomli_w

        sys.stdout.write(tomli_w.dumps(inv.service.config_values()))
    return 0


def cmd_version(inv: Invocation) -> int:
    sys.stdout.write(f"hbtui {__version__}\n")
    return 0
