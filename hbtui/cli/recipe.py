"""`hbtui recipe check`: the recipe's pins beside the newest releases (changes nothing)."""

from __future__ import annotations

import sys
from pathlib import Path

from hbtui.cli.output import Invocation, table

_MARK = {"current": "✓", "outdated": "↑", "differs": "≠", "not-checked": "·", "failed": "✗"}
_STYLE = {"current": "green", "outdated": "yellow", "differs": "yellow", "failed": "red"}


def cmd_recipe_check(inv: Invocation) -> int:
    """Exit 0 when a registry answered for at least one pin (outdated pins included:
    the verb informs, it does not judge); 1 when nothing could be checked."""
    recipe = Path(inv.args.recipe) if inv.args.recipe else None
    report = inv.call(inv.service.recipe_check(recipe))

    def text() -> None:
        from rich.text import Text

        inv.out.print(Text(f"pins of {report.versions_file}"))
        pins = table(("", "PIN", "PINNED", "NEWEST", "FROM", "NOTE"), wrap=("NOTE",))
        for p in report.pins:
            style = _STYLE.get(p.status, "dim")
            pins.add_row(
                Text(_MARK[p.status], style=style),
                Text(p.key),
                Text(p.pinned),
                Text(p.latest or "-", style=style if p.latest else "dim"),
                Text(f"{p.registry} {p.package}" if p.registry else "-"),
                Text(p.note or p.status.replace("-", " ")),
            )
        inv.out.print(pins)
        outdated = report.outdated
        if outdated:
            names = ", ".join(p.key for p in outdated)
            n = len(outdated)
            inv.out.print(Text(f"{n} pin{'s' * (n > 1)} behind the newest release: {names}"))
        elif report.checked:
            inv.out.print(Text("every pin checked is the newest release"))
        inv.out.print(Text(report.how_to_bump(), style="dim"))

    inv.show(report.to_json(), text)
    if not report.checked:
        sys.stderr.write(
            "error: no pin could be checked (no registry answered, or no pin names a "
            "package hbtui knows)\n"
        )
        return 1
    return 0
