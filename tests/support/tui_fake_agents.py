"""The agent methods of `FakeService` (tests/support/tui_fakes.py), as the real Service inherits
them from `hbtui.core.agents.operations.AgentOperations`: sessions kept per box, answers that
change them as an agent would, every call recorded.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hbtui.core.agents.operations import pending_request
from hbtui.core.agents.sessions import (
    ENDED,
    ERROR,
    NEEDS_YOU,
    WORKING,
    AgentError,
    AgentSession,
    Answer,
    BoxAgents,
)
from hbtui.core.foundation.views import BoxView
from hbtui.names import LOCAL

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
    def __init__(self) -> None:
        # (host, box) -> its sessions; a running box not here has none
        self.agent_sessions: dict[tuple[str, str], list[AgentSession]] = {}
        self.agent_errors: dict[tuple[str, str], str] = {}  # (host, box) -> why it fails
        self.panes: dict[tuple[str, str, str], str] = {}  # (host, box, pane) -> its screen
        self.agents_calls = 0
        self.pane_asks: list[tuple[str, str, str]] = []  # (host, box, pane) per capture
        # (host, box, session, decision, what it asked for) of each request decided
        self.decided: list[tuple[str, str, str, str, str]] = []

    boxes: list[BoxView]  # FakeService's, as are its _called() and calls

    if TYPE_CHECKING:

        def _called(self, *call: object) -> None: ...

    async def agents(
        self, boxes: list[str] | None = None, hosts: list[str] | None = None
    ) -> list[BoxAgents]:
        self.agents_calls += 1
        rows = []
        for box in self.boxes:
            if box.state != "running" or (boxes is not None and box.name not in boxes):
                continue
            key = (box.host, box.name)
            if key in self.agent_errors:
                rows.append(BoxAgents(box.name, box.host, error=self.agent_errors[key]))
            else:
                found = tuple(self.agent_sessions.get(key, ()))
                rows.append(BoxAgents(box.name, box.host, found))
        return rows

    def _pick(self, name: str, host: str, wanted: str | None, pending: bool) -> AgentSession:
        live = [
            s for s in self.agent_sessions.get((host, name), []) if s.status not in (ENDED, ERROR)
        ]
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
        sessions = self.agent_sessions[(host, name)]
        sessions[:] = [new if s.session_id == new.session_id else s for s in sessions]

    async def answer_agent(
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
        self._called("answer_agent", name, decision, host, session)
        now = tuple(self.agent_sessions.get((host, name), ()))
        chosen = pending_request(now, name, session, request, waiting_for)
        self.decided.append((host, name, chosen.session_id, decision, chosen.waiting_for))
        self._set(name, host, replace(chosen, status=WORKING, waiting_for="", request=""))
        return Answer(chosen, "hook", decision)

    async def send_to_agent(
        self, name: str, text: str, host: str = LOCAL, *, session: str | None = None
    ) -> AgentSession:
        self._called("send_to_agent", name, text, host, session)
        return self._pick(name, host, session, pending=False)

    async def agent_pane(self, name: str, pane_id: str, host: str = LOCAL) -> str:
        self.pane_asks.append((host, name, pane_id))
        screen = self.panes.get((host, name, pane_id))
        if screen is None:
            raise AgentError(f"box {name}: no pane {pane_id}")
        return screen
