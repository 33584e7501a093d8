"""`FakeService.agents` (tests/support/tui_fakes.py), as the real Service composes
`hbtui.core.agents.door.Agents`: sessions kept per box, answers that change them as an agent
would, every call recorded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hbtui.core.agents.lifecycle import Stopped, ended_session
from hbtui.core.agents.operations import pending_request
from hbtui.core.agents.sessions import (
    ENDED,
    ERROR,
    IDLE,
    NEEDS_YOU,
    WORKING,
    AgentBusy,
    AgentError,
    AgentSession,
    Answer,
    BoxAgents,
)
from hbtui.core.work.agent import TOOK, AgentStart
from hbtui.events import Report, ignore
from hbtui.names import LOCAL

if TYPE_CHECKING:
    from support.tui_fakes import FakeService

NOW_TS = 1_795_953_600.0  # tui_fakes.NOW (2026-11-29 12:00 UTC) as a UNIX time


def session(
    box: str,
    sid: str,
    status: str,
    *,
    host: str = LOCAL,
    ago: float = 4.0,
    waiting_for: str = "",
    pane: str = "%1",
    agent: str = "claude",
    request: str = "ab12cd34",
) -> AgentSession:
    """A session whose status changed `ago` seconds before the fake clock's now."""
    return AgentSession(
        box=box,
        host=host,
        agent=agent,
        session_id=sid,
        status=status,
        since=NOW_TS - ago,
        waiting_for=waiting_for if status == NEEDS_YOU else "",
        pane=pane,
        request=request if status == NEEDS_YOU else "",
    )


class FakeAgents:
    """`service.agents` over the fake's sessions (`FakeService.agent_sessions`, its
    errors, panes and the records of what was asked and decided)."""

    def __init__(self, fake: FakeService) -> None:
        self.fake = fake

    async def listing(
        self, boxes: list[str] | None = None, hosts: list[str] | None = None
    ) -> list[BoxAgents]:
        fake = self.fake
        fake.agents_calls += 1
        rows = []
        for box in fake.views:
            if box.state != "running" or (boxes is not None and box.name not in boxes):
                continue
            key = (box.host, box.name)
            if key in fake.agent_errors:
                rows.append(BoxAgents(box.name, box.host, error=fake.agent_errors[key]))
            else:
                found = tuple(fake.agent_sessions.get(key, ()))
                rows.append(BoxAgents(box.name, box.host, found))
        return rows

    def _pick(self, name: str, host: str, wanted: str | None, pending: bool) -> AgentSession:
        sessions = self.fake.agent_sessions.get((host, name), [])
        live = [s for s in sessions if s.status not in (ENDED, ERROR)]
        if pending:
            live = [s for s in live if s.status == NEEDS_YOU]
        if wanted:
            live = [s for s in live if s.session_id == wanted]
        if not live:
            raise AgentError(f"nothing is pending in box {name}")
        if len(live) > 1:
            raise AgentError(f"box {name} has {len(live)} sessions: name one with --session")
        return live[0]

    def _set(self, name: str, host: str, new: AgentSession) -> None:
        sessions = self.fake.agent_sessions[(host, name)]
        sessions[:] = [new if s.session_id == new.session_id else s for s in sessions]

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
        """The core's own choice (`pending_request`) over the sessions the box has now."""
        fake = self.fake
        fake._called("answer_agent", name, decision, host, session)
        now = tuple(fake.agent_sessions.get((host, name), ()))
        chosen = pending_request(now, name, session, request, waiting_for)
        fake.decided.append((host, name, chosen.session_id, decision, chosen.waiting_for))
        self._set(name, host, replace(chosen, status=WORKING, waiting_for="", request=""))
        return Answer(chosen, "hook", decision)

    async def send(
        self, name: str, text: str, host: str = LOCAL, *, session: str | None = None
    ) -> AgentSession:
        self.fake._called("send_to_agent", name, text, host, session)
        return self._pick(name, host, session, pending=False)

    async def pane(self, name: str, pane_id: str, host: str = LOCAL) -> str:
        self.fake.pane_asks.append((host, name, pane_id))
        screen = self.fake.panes.get((host, name, pane_id))
        if screen is None:
            raise AgentError(f"box {name}: no pane {pane_id}")
        return screen

    async def start(
        self, name: str, agent: str, task: str = "", host: str = LOCAL, *,
        keyless: bool = False, setup: bool = False, report: Report = ignore,
    ) -> AgentStart:  # fmt: skip
        """A new session, idle (or working on `task`) at once."""
        self.fake._called("start_agent", name, agent, task, host, keyless)
        sessions = self.fake.agent_sessions.setdefault((host, name), [])
        sid = f"new{len(sessions) + 1:05d}"
        status = WORKING if task else IDLE
        sessions.insert(0, session(name, sid, status, host=host, ago=0.0, agent=agent))
        began = "" if task else "started at its prompt"
        return AgentStart(name, agent, TOOK, 0.5, event="UserPromptSubmit", began=began)

    async def resume(
        self, name: str, host: str = LOCAL, *, session: str | None = None,
        report: Report = ignore,
    ) -> AgentStart:  # fmt: skip
        """The core's own choice (`ended_session`), made idle again."""
        self.fake._called("resume_agent", name, host, session)
        chosen = ended_session(tuple(self.fake.agent_sessions.get((host, name), ())), name, session)
        self._set(name, host, replace(chosen, status=IDLE, since=NOW_TS))
        began = f"resumed session {chosen.session_id[:8]}"
        return AgentStart(name, chosen.agent, TOOK, 0.5, event="SessionStart", began=began)

    async def stop(
        self, name: str, host: str = LOCAL, *, session: str | None = None, yes: bool = False
    ) -> Stopped:
        """AgentBusy as the core says it, else the session ended."""
        self.fake._called("stop_agent", name, host, session, yes)
        chosen = self._pick(name, host, session, pending=False)
        if chosen.status in (WORKING, NEEDS_YOU) and not yes:
            raise AgentBusy(chosen)
        self._set(name, host, replace(chosen, status=ENDED, waiting_for="", request=""))
        return Stopped(chosen, "exit")

    async def forget(
        self, name: str, host: str = LOCAL, *, session: str | None = None
    ) -> tuple[AgentSession, ...]:
        self.fake._called("forget_agents", name, host, session)
        sessions = self.fake.agent_sessions.get((host, name), [])
        gone = tuple(s for s in sessions if s.status == ENDED and session in (None, s.session_id))
        sessions[:] = [s for s in sessions if s not in gone]
        return gone
