"""This machine and hbtui itself: doctor, config, version."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui import __version__
from hbtui.cli.output import Invocation, print_checks
from hbtui.config import check_keymap
from hbtui.errors import HbtuiError, UsageError
from hbtui.schema import show

if TYPE_CHECKING:
    from hbtui.checks import Check
    from hbtui.core.service import Service


def cmd_doctor(inv: Invocation) -> int:
    def show_check(check: Check) -> None:  # as it is made: a probe's stages take seconds
        print_checks(inv.out, [check])

    report = inv.call(
        inv.service.doctor.run(probe=inv.args.probe, report=None if inv.json else show_check)
    )

    def verdict() -> None:
        if report.ok:
            inv.out.print("all needed checks pass")
        else:
            inv.out.print("some needed checks fail", style="red")

    inv.show(report.to_json(), verdict)
    return 0 if report.ok else 1


def cmd_config_path(inv: Invocation) -> int:
    sys.stdout.write(f"{inv.file_service().paths.config_file}\n")
    return 0


def cmd_config_show(inv: Invocation) -> int:
    if inv.args.template:
        sys.stdout.write(inv.file_service().settings.template())
        return 0
    sys.stdout.write(inv.service.settings.listing())
    sys.stdout.write("".join(f"# {line}\n" for line in _notes(inv.service)))
    return 0


def cmd_config_set(inv: Invocation) -> int:
    service = inv.file_service()
    changed = service.settings.set(inv.args.key, inv.args.value)
    was = "the default" if changed.before is None else show(changed.before)
    sys.stdout.write(f"✓ {changed.setting} = {show(changed.after)} (was {was})\n")
    if changed.overridden_by:
        sys.stdout.write(
            f"note: {changed.overridden_by} overrides {changed.setting} in this environment\n"
        )
    return 0


def cmd_config_edit(inv: Invocation) -> int:
    service = inv.file_service()
    done = service.settings.edit(_run_editor, _edit_again)
    path = service.paths.config_file
    sys.stdout.write(f"✓ saved {path}\n" if done == "saved" else f"no change to {path}\n")
    return 0


def _run_editor(path: Path) -> None:
    """$VISUAL, else $EDITOR, else vi, on `path`, with this terminal."""
    command = next(
        (c for c in (os.environ.get("VISUAL"), os.environ.get("EDITOR")) if c and c.strip()), "vi"
    )
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"cannot read the editor command {command!r}: {exc}") from None
    try:
        done = subprocess.run([*argv, str(path)], check=False)
    except OSError as exc:
        raise HbtuiError(
            f"cannot run the editor {argv[0]!r}: {exc.strerror or exc} (set VISUAL or EDITOR); "
            "config.toml is unchanged"
        ) from None
    if done.returncode != 0:
        raise HbtuiError(
            f"the editor {argv[0]!r} exited with status {done.returncode}; config.toml is unchanged"
        )


def _edit_again(problem: str) -> bool:
    """At a terminal, say what is wrong and offer to edit again; elsewhere, refuse."""
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    sys.stderr.write(f"{' '.join(problem.split())}\nEdit it again? [Y/n] ")
    sys.stderr.flush()
    answer = sys.stdin.readline()
    return answer != "" and answer.strip().lower() in ("", "y", "yes")  # "": end of input


def _notes(service: Service) -> list[str]:
    """What the settings come to, as TOML comments: the recipe in use, and the `[keymap]`
    entries the dashboard does not apply (it keeps those actions' default keys)."""
    try:
        notes = [f"recipe in use: {service.boxes.recipe_dir()}"]
    except HbtuiError as exc:
        notes = [f"recipe: {exc.message}"]
    if service.config.keymap:  # the dashboard's keys are read only when there are remaps
        from hbtui.tui.actions import default_keys, scopes  # the table, without Textual

        notes += check_keymap(service.config.keymap, default_keys(), scopes()).problems
    return notes


def cmd_version(inv: Invocation) -> int:
    sys.stdout.write(f"hbtui {__version__}\n")
    return 0
