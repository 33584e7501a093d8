"""Agent verbs: agents (a table across boxes and hosts; its actions start, resume, stop
and forget a session), approve, deny, send."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from hbtui.cli.output import Invocation, table
from hbtui.core.agents import BoxAgents, in_story_order
from hbtui.errors import HbtuiError, UsageError
from hbtui.names import LOCAL
from hbtui.present import AGENT_STYLE, elapsed

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine
    from typing import Any

    from rich.table import Table

    from hbtui.core.work import AgentStart
    from hbtui.events import Report

    Starting = Callable[[Report], Coroutine[Any, Any, AgentStart]]

WATCH_SECONDS = 2.0
COALESCE = 0.05  # --watch: changes this close together are drawn once


def _since(when: float | None, now: float) -> str:
    return "" if when is None else elapsed(max(0.0, now - when))


def _tokens(n_in: int | None, n_out: int | None) -> str:
    if n_in is None and n_out is None:
        return ""
    total = (n_in or 0) + (n_out or 0)
    return f"{total / 1000:.1f}k" if total >= 1000 else str(total)


def agents_table(rows: list[BoxAgents], *, show_host: bool) -> Table:
    from rich.text import Text

    now = time.time()
    headers = (
        ["BOX"]
        + (["HOST"] if show_host else [])
        + ["AGENT", "SESSION", "STATUS", "SINCE", "WAITING FOR", "PANE", "TOKENS", "GIT"]
    )
    made = table(headers, wrap=("WAITING FOR",), overflow="fold")
    for row in rows:
        lead = [Text(row.box or "-")] + ([Text(row.host)] if show_host else [])
        if row.error:
            blanks = [Text("")] * 2
            made.add_row(*lead, *blanks, Text("error", style="red"), Text(""), Text(row.error))
            continue
        if not row.sessions:
            made.add_row(*lead, Text("-"), Text(""), Text("no agent", style="dim"))
            continue
        for s in in_story_order(row):  # the box's status first, as every view tells it
            git = ""
            if s.git is not None:
                git = f"{s.git.branch} ±{s.git.changed} +{s.git.commits}"
            made.add_row(
                *lead,
                Text(s.agent),
                Text(s.session_id[:8]),
                Text(s.status, style=AGENT_STYLE.get(s.status, "")),
                Text(_since(s.since, now)),
                Text(s.error or s.waiting_for),
                Text(s.pane),
                Text(_tokens(s.tokens_in, s.tokens_out)),
                Text(git),
            )
    return made


def _show(inv: Invocation, rows: list[BoxAgents]) -> None:
    inv.show(
        [r.to_json() for r in rows],
        lambda: agents_table(rows, show_host=len({r.host for r in rows}) > 1),
        empty="No running boxes.",
    )


# Each action's options (besides --host and --json); any other given is refused.
_OPTIONS = {
    "ls": ("watch",),
    "start": ("agent", "task", "task_file", "keyless", "setup"),
    "resume": ("session",),
    "stop": ("session", "yes"),
    "forget": ("session",),
}
_FLAGS = ("watch", "agent", "task", "task_file", "keyless", "setup", "session", "yes")


def _action(inv: Invocation) -> tuple[str, list[str]]:
    """The action and its boxes: a first word start, resume, stop or forget is that
    action (with exactly one box), `ls` or any other word a listing; each option checked
    against the action it belongs to."""
    words = list(inv.args.words)
    action = words.pop(0) if words and words[0] in _OPTIONS else "ls"
    for flag in _FLAGS:
        if flag not in _OPTIONS[action] and getattr(inv.args, flag) not in (None, False):
            what = "a listing" if action == "ls" else f"agents {action}"
            raise UsageError(f"--{flag.replace('_', '-')} does not apply to {what}")
    if action != "ls" and len(words) != 1:
        raise UsageError(f"agents {action} takes one box: hbtui agents {action} BOX")
    return action, words


def cmd_agents(inv: Invocation) -> int:
    action, words = _action(inv)
    if action != "ls":
        return _ACTIONS[action](inv, words[0])
    boxes = words or None
    hosts = [inv.args.host] if inv.args.host else None
    if not inv.args.watch:
        rows = inv.call(inv.service.agents.listing(boxes, hosts))
        _show(inv, rows)
        return 1 if rows and all(r.error for r in rows) else 0
    try:
        inv.call(_follow(inv, boxes, hosts))
    except KeyboardInterrupt:
        return 0
    return 0


async def _follow(inv: Invocation, boxes: list[str] | None, hosts: list[str] | None) -> None:
    """--watch: the table, then again each time a box's status stream says its agents
    changed (and every WATCH_SECONDS, for the SINCE column; JSON only on a change)."""
    import asyncio

    rows = await inv.service.agents.listing(
        boxes, hosts
    )  # at once (and a box not known fails here)
    follower = _Follower(inv, boxes, hosts, rows)
    reading = asyncio.create_task(follower.read())
    try:
        while True:
            follower.changed.clear()
            if not inv.json and sys.stdout.isatty():
                sys.stdout.write("\x1b[H\x1b[2J")
            _show(inv, sorted(follower.rows.values(), key=_order))
            sys.stdout.flush()
            waiting = asyncio.ensure_future(follower.changed.wait())
            await asyncio.wait(
                [waiting, reading], timeout=None if inv.json else WATCH_SECONDS,
                return_when=asyncio.FIRST_COMPLETED,
            )  # fmt: skip
            waiting.cancel()
            if reading.done():
                reading.result()  # the watch failed: say why
                return
            await asyncio.sleep(COALESCE)  # a burst of changes (every box at start): one redraw
    finally:
        reading.cancel()
        await follower.close()


def _order(row: BoxAgents) -> tuple[bool, str, str]:
    return (row.host != LOCAL, row.host, row.box)


class _Follower:
    """The rows --watch shows, kept by the boxes' status streams (`Service.agents.watch`,
    listing the boxes again every WATCH_SECONDS to follow starts and stops). A box whose
    stream fails is asked directly (`hb agents --json`) every WATCH_SECONDS until its
    stream is back."""

    def __init__(
        self,
        inv: Invocation,
        boxes: list[str] | None,
        hosts: list[str] | None,
        rows: list[BoxAgents],
    ) -> None:
        import asyncio

        self.service = inv.service
        self.named = boxes is not None
        self.rows = {(r.host, r.box): r for r in rows}
        self.changed = asyncio.Event()
        self.polls: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.watch = self.service.agents.watch(relist=WATCH_SECONDS, hosts=hosts, names=boxes)

    async def read(self) -> None:
        import asyncio

        from hbtui.core.agents import AgentsGone

        async for event in self.watch.events():
            if isinstance(event, AgentsGone):
                key = (event.host, event.box)
                self._unpoll(key)
                if self.named:  # a box asked for by name stays, saying why it shows nothing
                    self.rows[key] = BoxAgents(
                        event.box, event.host, error="the box is not running"
                    )
                else:
                    self.rows.pop(key, None)
            elif event.row.error and event.via == "stream":
                key = (event.row.host, event.row.box)
                if key not in self.polls:  # its stream failed: ask the box until it is back
                    self.polls[key] = asyncio.create_task(self._poll(*key))
                    self.rows[key] = event.row
            else:
                key = (event.row.host, event.row.box)
                self._unpoll(key)
                self.rows[key] = event.row
            self.changed.set()

    async def _poll(self, host: str, box: str) -> None:
        import asyncio

        while True:
            try:
                found = await self.service.agents.listing([box], [host])
            except HbtuiError as exc:
                found = [BoxAgents(box, host, error=exc.message)]
            for row in found:
                if (row.host, row.box) == (host, box):
                    self.rows[(host, box)] = row
                    self.changed.set()
            await asyncio.sleep(WATCH_SECONDS)

    def _unpoll(self, key: tuple[str, str]) -> None:
        task = self.polls.pop(key, None)
        if task is not None:
            task.cancel()

    async def close(self) -> None:
        for task in self.polls.values():
            task.cancel()
        await self.watch.close()


def _decide(inv: Invocation, decision: str) -> int:
    """Decide the request the box says is pending as it is read now, or the one the
    flags pin (`--request`, `--waiting-for`: refused if the box now asks anything else),
    and say exactly what was decided."""
    args = inv.args
    answer = inv.call(
        inv.service.agents.answer(
            args.name,
            decision,
            inv.host,
            session=args.session,
            request=args.request,
            waiting_for=args.waiting_for,
        )
    )
    s = answer.session
    done = "approved" if decision == "allow" else "denied"
    how = "through its hook" if answer.via == "hook" else "at its prompt"
    what = f": {s.waiting_for}" if s.waiting_for else ""
    request = f" request {s.request}" if s.request else ""
    sys.stdout.write(f"{done} {s.agent} session {s.session_id[:8]}{request} ({how}){what}\n")
    return 0


def cmd_approve(inv: Invocation) -> int:
    return _decide(inv, "allow")


def cmd_deny(inv: Invocation) -> int:
    return _decide(inv, "deny")


def cmd_send(inv: Invocation) -> int:
    s = inv.call(
        inv.service.agents.send(inv.args.name, inv.args.text, inv.host, session=inv.args.session)
    )
    sys.stdout.write(f"sent to {s.agent} session {s.session_id[:8]} (pane {s.pane})\n")
    return 0


def _started(inv: Invocation, starting: Starting) -> int:
    """Run a start or resume (`starting(report)`), its progress as `new --agent`'s; an
    agent that ended at once is one line and status 1 (with --json, printed with the
    box, as `new --json` prints it)."""
    from hbtui.cli.output import print_json
    from hbtui.core.work import AgentEnded

    try:
        with inv.reporter() as rep:
            start = inv.call(starting(rep))
    except AgentEnded as ended:
        if not inv.json or ended.view is None:
            raise
        print_json({**ended.view.to_json(), "agent": ended.start.to_json()})
        return 1
    if inv.json:
        print_json(start.to_json())
    return 0


def _start(inv: Invocation, name: str) -> int:
    from hbtui.cli.work import task_text

    a = inv.args
    if a.agent is None:
        raise UsageError("agents start needs the agent: --agent claude|codex|hermes")
    task = task_text(inv)
    return _started(
        inv,
        lambda rep: inv.service.agents.start(
            name, a.agent, task, inv.host, keyless=a.keyless, setup=a.setup, report=rep
        ),
    )


def _resume(inv: Invocation, name: str) -> int:
    return _started(
        inv,
        lambda rep: inv.service.agents.resume(name, inv.host, session=inv.args.session, report=rep),
    )


def _stop(inv: Invocation, name: str) -> int:
    """Stop a session; one that is working or waits for an answer is asked about at a
    terminal, refused without one (one line naming it) unless --yes."""
    from hbtui.cli.output import print_json
    from hbtui.core.agents import AgentBusy

    session = inv.args.session
    try:
        stopped = inv.call(
            inv.service.agents.stop(name, inv.host, session=session, yes=inv.args.yes)
        )
    except AgentBusy as busy:
        if not sys.stdin.isatty():
            raise HbtuiError(
                f"{busy.message}: not stopped without a terminal to ask; add --yes"
            ) from None
        s = busy.session
        answer = input(f"{busy.message}. Stop it? [y/N] ").strip()
        if answer.lower() not in ("y", "yes"):
            raise UsageError(f"not confirmed; session {s.session_id[:8]} was not touched") from None
        stopped = inv.call(inv.service.agents.stop(name, inv.host, session=s.session_id, yes=True))
    if inv.json:
        print_json(stopped.to_json())
        return 0
    return inv.done(stopped.message)


def _forget(inv: Invocation, name: str) -> int:
    from hbtui.cli.output import print_json

    gone = inv.call(inv.service.agents.forget(name, inv.host, session=inv.args.session))
    if inv.json:
        print_json([s.to_json() for s in gone])
        return 0
    if not gone:
        inv.out.print(f"box {name} has no ended agent session to forget", markup=False)
        return 0
    ids = ", ".join(s.session_id[:8] for s in gone)
    return inv.done(f"forgot {len(gone)} ended session(s) of {name}: {ids}")


_ACTIONS: dict[str, Callable[[Invocation, str], int]] = {
    "start": _start,
    "resume": _resume,
    "stop": _stop,
    "forget": _forget,
}
