"""This machine and hbtui itself: doctor, config, version."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hbtui import __version__
from hbtui.cli.output import Invocation, print_checks, print_json
from hbtui.config import check_keymap
from hbtui.errors import HbtuiError

if TYPE_CHECKING:
    from hbtui.core.service import Service


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
        sys.stdout.write("".join(f"# {line}\n" for line in _notes(inv.service)))
    return 0


def _notes(service: Service) -> list[str]:
    """What the settings come to, as TOML comments: the recipe in use, and the `[keymap]`
    entries the dashboard does not apply (it keeps those actions' default keys)."""
    try:
        notes = [f"recipe in use: {service.recipe_dir()}"]
    except HbtuiError as exc:
        notes = [f"recipe: {exc.message}"]
    if service.config.keymap:  # the dashboard's keys are read only when there are remaps
        from hbtui.tui.actions import default_keys, scopes  # the table, without Textual

        notes += check_keymap(service.config.keymap, default_keys(), scopes()).problems
    return notes


def cmd_version(inv: Invocation) -> int:
    sys.stdout.write(f"hbtui {__version__}\n")
    return 0
