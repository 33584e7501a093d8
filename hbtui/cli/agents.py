"""Agent verbs: agents (a table across boxes and hosts), approve, deny, send."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from hbtui.cli.output import Invocation, table
from hbtui.core.agents import BoxAgents, in_story_order
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL
from hbtui.present import AGENT_STYLE, elapsed

if TYPE_CHECKING:
    from rich.table import Table

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


def cmd_agents(inv: Invocation) -> int:
    boxes = inv.args.boxes or None
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
