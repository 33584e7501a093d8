"""Asking before a verb ends a box's live agents: at a terminal a y/N question, without
one a refusal naming the sessions; `--yes` (or rm's `--force`) answers it beforehand."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from hbtui.core.agents import AgentsUnread
from hbtui.errors import UsageError

if TYPE_CHECKING:
    from hbtui.cli.output import Invocation
    from hbtui.core.agents import AgentSession, Ending

# What each operation does to the box, as the question says it.
DOES = {
    "stop": "stopping {name}",
    "rm": "deleting {name}",
    "repair": "repairing {name} (its recipe runs again)",
    "credentials": "making {name} again with other credentials",
    "branch": "branching {name} (it stops, its disk is copied, and it starts again)",
}


def named(sessions: list[AgentSession]) -> str:
    """`claude 1a2b3c4d (working), codex 5e6f7a8b (needs-you)`: plain, one line."""
    return ", ".join(f"{s.agent} {s.session_id[:8]} ({s.status})" for s in sessions)


def confirm_ending(inv: Invocation, operation: Ending, name: str, *, answered: bool) -> None:
    """Go on only if `operation` on box `name` ends no live agent session, or the user
    says so: `answered` (--yes), a `y` at a terminal. Anything else raises, the box
    untouched."""
    if answered:
        return
    doing = DOES[operation].format(name=name)
    try:
        live = inv.call(inv.service.agents.ended_by(operation, name, inv.host))
    except AgentsUnread as unread:
        said = f"{doing} may end agents at work: {unread.message}"
    else:
        if not live:
            return
        said = f"{doing} would end its live agents: {named(live)}"
    if not sys.stdin.isatty():
        raise UsageError(f"{said}; refusing without a terminal to ask (pass --yes to go on)")
    # The question goes to stderr: with --json, stdout is the result alone.
    sys.stderr.write(f"{said[:1].upper()}{said[1:]}. Go on? [y/N] ")
    sys.stderr.flush()
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UsageError(f"not confirmed; {name} was not touched")
