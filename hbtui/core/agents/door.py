"""The agents in boxes as the front ends reach them (`service.agents`): their sessions,
answering them, and their status streams. Names and hosts are checked here; while a watch
runs, a listing takes each streamed box's row from its stream instead of asking the box
again (the stream says every change: an exec per box and refresh is what it saves).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

from hbtui.core.agents import lifecycle
from hbtui.core.agents.lifecycle import Stopped
from hbtui.core.agents.operations import decide, listing, pane, send, sessions_ended_by
from hbtui.core.agents.sessions import AgentSession, Answer, BoxAgents, Ending
from hbtui.core.agents.starts import StartBook
from hbtui.core.agents.watch import AgentWatch
from hbtui.core.boxes.core import BoxCore
from hbtui.core.boxes.guard import Guard
from hbtui.core.foundation.views import BoxView
from hbtui.core.foundation.workbook import WorkBook
from hbtui.core.work.agent import AgentEnded, AgentStart
from hbtui.events import Report, ignore
from hbtui.names import LOCAL, check_name


class Agents:
    """The agent sessions of every running box, and the watches that stream them."""

    def __init__(self, core: BoxCore) -> None:
        self._core = core
        self._guard = Guard(core)
        self._book = WorkBook(core.paths)
        self._watches: weakref.WeakSet[AgentWatch] = weakref.WeakSet()  # while referenced

    def _check(self, names: Iterable[str], hosts: Iterable[str]) -> None:
        for name in names:
            check_name(name)
        for host in hosts:
            self._guard.host(host)

    async def listing(
        self, boxes: list[str] | None = None, hosts: list[str] | None = None
    ) -> list[BoxAgents]:
        """The agent sessions of every running box (or of these boxes), one row per box:
        what a live status stream of this feature said, else asked of the box now."""
        self._check(boxes or [], hosts or [])
        return await listing(self._core, boxes, hosts, self._streamed)

    async def ended_by(self, operation: Ending, name: str, host: str = LOCAL) -> list[AgentSession]:
        """The sessions working or waiting for the user that `operation` on the box would
        end: what a front end names when it asks before going on."""
        self._check([name], [host])
        return await sessions_ended_by(self._core, operation, name, host, self._streamed)

    def watch(
        self,
        *,
        relist: float | None = None,
        hosts: list[str] | None = None,
        names: Iterable[str] | None = None,
    ) -> AgentWatch:
        """The running boxes' agents as they change, one status stream per box; with
        `relist` seconds it finds the running boxes itself (of these hosts, with these
        names), else the caller says (`AgentWatch.track`)."""
        watch = AgentWatch(self._core, relist=relist, hosts=hosts, names=names)
        self._watches.add(watch)
        return watch

    def ended_at_start(self, host: str, box: str, agent: str, words: str) -> None:
        """An agent started by `new` or a try ended before it took its task: every view
        shows it as the box's ended session, with its last words, until the box has one
        of its own (the box stays, ready)."""
        StartBook(self._core.paths).ended(host, box, agent, words)

    def forget_start(self, host: str, box: str) -> None:
        """The box is gone (or starts an agent again): its ended start is no story."""
        StartBook(self._core.paths).drop(host, box)

    def _streamed(self, view: BoxView) -> BoxAgents | None:
        for watch in list(self._watches):
            row = watch.current(view.host, view.name)
            if row is not None:
                return row
        return None

    async def answer(
        self,
        name: str,
        decision: str,
        host: str = LOCAL,
        *,
        session: str | None = None,
        request: str | None = None,
        waiting_for: str | None = None,
    ) -> Answer:
        """Allow or deny the permission request an agent in the box waits on: the one the
        user was shown (`request`, `waiting_for`, as `hb agents` said them), or refused
        with what is pending now (see `decide`)."""
        self._check([name], [host])
        return await decide(
            self._core, name, host, decision, session, request=request, waiting_for=waiting_for
        )

    async def send(
        self, name: str, text: str, host: str = LOCAL, *, session: str | None = None
    ) -> AgentSession:
        """Type one line and Enter into the agent's pane."""
        self._check([name], [host])
        return await send(self._core, name, host, text, session)

    async def pane(self, name: str, pane_id: str, host: str = LOCAL) -> str:
        """An agent's screen, colours kept, every other terminal sequence removed."""
        self._check([name], [host])
        return await pane(self._core, name, host, pane_id)

    async def start(
        self, name: str, agent: str, task: str = "", host: str = LOCAL, *,
        keyless: bool = False, setup: bool = False, report: Report = ignore,
    ) -> AgentStart:  # fmt: skip
        """A new session of `agent` in the box's clone (or workspace), in tmux "main",
        waited for as `new --agent` is: AgentEnded (its view set) when it ended at once.
        With `setup`, each clone's .hbtui/setup.sh runs first (SetupFailed: no agent)."""
        self._check([name], [host])
        try:
            return await lifecycle.start(
                self._core, self._book, name, host, agent, task, keyless=keyless,
                setup=setup, report=report,
            )  # fmt: skip
        except AgentEnded as ended:
            ended.view = await self._core.get(name, host)
            raise

    async def resume(
        self, name: str, host: str = LOCAL, *, session: str | None = None,
        report: Report = ignore,
    ) -> AgentStart:  # fmt: skip
        """Start an ended session again with its conversation (the most recent ended one
        unless `session` names one); a fork where it came from another box."""
        self._check([name], [host])
        try:
            return await lifecycle.resume(self._core, name, host, session, report=report)
        except AgentEnded as ended:
            ended.view = await self._core.get(name, host)
            raise

    async def stop(
        self, name: str, host: str = LOCAL, *, session: str | None = None, yes: bool = False
    ) -> Stopped:
        """End one live session, its own exit first; AgentBusy (nothing done) for one that
        is working or waits for an answer, unless `yes`."""
        self._check([name], [host])
        return await lifecycle.stop(self._core, name, host, session, yes=yes)

    async def forget(
        self, name: str, host: str = LOCAL, *, session: str | None = None
    ) -> tuple[AgentSession, ...]:
        """Drop ended sessions (the named one, else all) from every view."""
        self._check([name], [host])
        return await lifecycle.forget(self._core, name, host, session)
