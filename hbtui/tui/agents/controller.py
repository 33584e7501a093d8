"""The agents in the boxes: asking what they do, showing an agent's screen, answering it.

What the agents do comes from the boxes' status streams (`Service.agents.watch`, one
long-lived exec per running box, told which boxes run at each `AgentsWanted`): each change
goes to the agent panel (panel.py) as it happens. Where the watch cannot run at all, the
panel's `AgentsWanted` (every AGENT_SECONDS while boxes run) polls `Service.agents.listing()`
instead, one worker, never two at once. `AgentPaneWanted` (every second while the preview
shows) asks for the selected agent's screen. Approve, deny and send go
through the Service (`answer_agent`, `send_to_agent`), which checks in the box what is
pending: approve and deny carry the request the dashboard shows, and one that changed
since is refused; what it refuses is one notification. Start, resume, stop and forget
a session go through `Service.agents` too; a stop the box says would cut off work
(`AgentBusy`) is asked about, then made. A box that turns needs-you rings the
terminal's bell, asks the terminal for a desktop notification (OSC 9) and runs
`notify-send` where there is one, unless `agent_alerts = false` in the config.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, TypeVar

from textual.worker import Worker

from hbtui.core.agents import AgentBusy, AgentSession, AgentsGone, BoxAgents
from hbtui.errors import HbtuiError
from hbtui.tui.activity import BoxKey
from hbtui.tui.agents.alerts import alert_text, notify_send_argv, osc9, run_notify_send
from hbtui.tui.agents.panel import AgentPanel
from hbtui.tui.agents.state import live, waiting
from hbtui.tui.failure import Failure, describe
from hbtui.tui.feature import Dashboard, Feature
from hbtui.tui.messages import AgentPaneLoaded, AgentsLoaded, AgentsWanted

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine
    from typing import Any

    from textual.notifications import SeverityLevel

    from hbtui.core.agents import AgentWatch
    from hbtui.core.work import AgentStart

T = TypeVar("T")
ALLOW, DENY = "allow", "deny"
# The keys left out of the footer while no box has an agent.
AGENT_KEYS = ("approve", "deny", "send", "next_needs_you", "toggle_agent")


class Agents(Feature):
    def __init__(self, app: Dashboard) -> None:
        super().__init__(app)
        self._panel: AgentPanel | None = None
        self._agents_worker: Worker[None] | None = None
        self._agents_again = False  # asked for while an ask was out
        self._pane_worker: Worker[None] | None = None
        # (host, box, session) of every session that waited at the last ask; None: not yet
        self._waited: set[tuple[str, str, str]] | None = None
        self._alerted_boxes: frozenset[BoxKey] = frozenset()  # the last ask's boxes with a row
        self._watch: AgentWatch | None = None
        self._watch_failed = False  # the streams cannot run here: poll

    @property
    def panel(self) -> AgentPanel:
        """The main screen's agent panel, which shows what the agents do."""
        if self._panel is None:
            self._panel = self.app.main.query_one(AgentPanel)
        return self._panel

    def _to_panel(self, message: AgentsLoaded | AgentPaneLoaded) -> None:
        if self.app.screen_stack:  # (none: the dashboard has closed)
            self.panel.post_message(message)

    # -- what the agents do ----------------------------------------------------------------

    def wanted(self) -> None:
        """Tell the streams which boxes run; where they cannot run, ask now, or, while an
        ask is out, once more right after it (a tick is never lost: a slow box would
        otherwise halve the rate)."""
        if self.app.paused or not self.app.screen_stack or self._stream_agents():
            return  # (no screen: the dashboard is closing)
        if self._agents_worker is None or self._agents_worker.is_finished:
            self._agents_again = False
            self._agents_worker = self.app.start(self._agents, "agents")
        else:
            self._agents_again = True

    async def _agents(self) -> None:
        while True:
            try:
                rows = await self.service.agents.listing()
            except HbtuiError as exc:  # the dashboard outlives a broken engine
                self._to_panel(AgentsLoaded(None, Failure.of(exc)))
            else:
                self._alert_new(rows)
                self._to_panel(AgentsLoaded(rows))
            if not self._agents_again or self.app.paused:
                return
            self._agents_again = False

    def _stream_agents(self) -> bool:
        """The running boxes handed to the status streams (the watch starts at the first
        call); False when the watch cannot run, and the poll asks instead."""
        if self._watch_failed:
            return False
        if self._watch is None:
            try:
                self._watch = self.service.agents.watch()
            except AttributeError:  # a Service without streams: the poll does it
                self._watch_failed = True
                return False
            self.app.start(partial(self._watching, self._watch), "agents-watch")
        listing = self.app.main.listing
        self._watch.track(listing.boxes if listing is not None else [])
        return True

    async def _watching(self, watch: AgentWatch) -> None:
        """Every change of a box's agents, shown as it comes (all rows each time)."""
        rows: dict[BoxKey, BoxAgents] = {}
        try:
            async for event in watch.events():
                if isinstance(event, AgentsGone):
                    rows.pop((event.host, event.box), None)
                else:
                    rows[(event.row.host, event.row.box)] = event.row
                shown = list(rows.values())
                self._alert_new(shown)
                self._to_panel(AgentsLoaded(shown))
        except Exception as exc:  # whatever broke the watch, the poll takes over
            self._watch, self._watch_failed = None, True
            self._to_panel(AgentsLoaded(None, Failure.of(exc)))

    async def close(self) -> None:
        """The streams end with the dashboard (and none starts again)."""
        watch, self._watch, self._watch_failed = self._watch, None, True
        if watch is not None:
            await watch.close()

    def _alert_new(self, rows: list[BoxAgents]) -> None:
        """Alert for each session that waits now and did not at the last ask, in a box
        the last ask had a row for (none at first: what already waits is on the screen
        the user just opened)."""
        now = {(s.host, s.box, s.session_id): s for row in rows for s in waiting(row)}
        before, self._waited = self._waited, set(now)
        boxes, self._alerted_boxes = self._alerted_boxes, frozenset((r.host, r.box) for r in rows)
        if before is None:
            return
        for key, session in now.items():
            if key not in before and key[:2] in boxes:
                self.alert(alert_text(session))

    def alert(self, text: str) -> None:
        """A toast always; the bell, OSC 9 and notify-send unless the config says no."""
        self.app.notify(text, title="agent", severity="warning", timeout=10)
        if not self.app.config.agent_alerts:
            return
        self.app.bell()
        self.app.to_terminal(osc9(text))
        argv = notify_send_argv(text)
        if argv is not None:
            self.app.start(partial(run_notify_send, argv), "notify-send")

    # -- the preview -----------------------------------------------------------------------

    def pane_wanted(self, key: BoxKey, pane: str) -> None:
        if self.app.paused:
            return
        if self._pane_worker is None or self._pane_worker.is_finished:
            work = partial(self._agent_pane, key, pane)
            self._pane_worker = self.app.start(work, "agent-pane")

    async def _agent_pane(self, key: BoxKey, pane: str) -> None:
        try:
            text = await self.service.agents.pane(key[1], pane, key[0])
        except HbtuiError as exc:
            self._to_panel(AgentPaneLoaded(key, pane, "", Failure.of(exc)))
            return
        self._to_panel(AgentPaneLoaded(key, pane, text))

    # -- answering -------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The agent keys are left out of the footer while no box has an agent.
        if action in AGENT_KEYS and self.app.screen_stack:
            return self.panel.any_agents
        return True

    def action_next_needs_you(self) -> None:
        self.panel.next_needs_you()

    def action_toggle_agent(self) -> None:
        self.panel.toggle()

    def action_approve(self) -> None:
        self._answer(ALLOW)

    def action_deny(self) -> None:
        self._answer(DENY)

    def _answer(self, decision: str) -> None:
        """Decide the pending request the dashboard shows for the selected box (the one
        the user picks when it shows several): its session, request id and words go with
        the decision, and the box refuses it if it now asks anything else. With nothing
        shown as pending, nothing is guessed."""
        from hbtui.tui.agents.dialogs import SessionPicker

        view = self.need_box()
        if view is None:
            return
        key = (view.host, view.name)
        pending = waiting(self.panel.agents.get(key))
        if not pending:
            said = f"nothing is pending in box {view.name}"
            self.app.notify(said, title="agent", severity="warning", markup=False)
        elif len(pending) > 1:
            what = "approve" if decision == ALLOW else "deny"
            picker = SessionPicker(view.name, what, pending)
            self.app.push_screen(picker, partial(self._decide_picked, key, decision, pending))
        else:
            self.app.start(partial(self._decide, key, decision, pending[0]), "agent-answer")

    def _decide_picked(
        self, key: BoxKey, decision: str, shown: list[AgentSession], picked: str | None
    ) -> None:
        session = next((s for s in shown if s.session_id == picked), None)
        if session is not None:
            self.app.start(partial(self._decide, key, decision, session), "agent-answer")

    async def _decide(self, key: BoxKey, decision: str, shown: AgentSession) -> None:
        host, name = key
        answer = await self._asked(
            self.service.agents.answer(
                name, decision, host, session=shown.session_id, request=shown.request,
                waiting_for=shown.waiting_for,
            )
        )  # fmt: skip
        if answer is None:
            return
        done = "approved" if decision == ALLOW else "denied"
        what = answer.session.waiting_for or f"session {answer.session.session_id[:8]}"
        how = "through its hook" if answer.via == "hook" else "at its prompt"
        self._said(f"{done} in {name} ({how}): {what}")

    def action_send(self) -> None:
        """A line for the selected box's agent (the session picked first when several run)."""
        self._live_session("send a line to", self._send_dialog)

    def _live_session(self, doing: str, then: Callable[[BoxKey, str | None], None]) -> None:
        """`then` the selected box and its live session: the one there is (None when there
        is none: the box says which it takes), else the one the user picks."""
        from hbtui.tui.agents.dialogs import SessionPicker

        view = self.need_box()
        if view is None:
            return
        key = (view.host, view.name)
        sessions = live(self.panel.agents.get(key))
        if len(sessions) > 1:
            self.app.push_screen(SessionPicker(view.name, doing, sessions), partial(then, key))
        else:
            then(key, sessions[0].session_id if sessions else None)

    def _send_dialog(self, key: BoxKey, session: str | None) -> None:
        from hbtui.tui.agents.dialogs import SendDialog

        row = self.panel.agents.get(key)
        chosen = next((s for s in live(row) if s.session_id == session), None)
        dialog = SendDialog(key[1], chosen)
        self.app.push_screen(dialog, partial(self._send_line, key, session))

    def _send_line(self, key: BoxKey, session: str | None, text: str | None) -> None:
        if text is not None:
            self.app.start(partial(self._send, key, text, session), "agent-answer")

    async def _send(self, key: BoxKey, text: str, session: str | None) -> None:
        host, name = key
        sent = await self._asked(self.service.agents.send(name, text, host, session=session))
        if sent is not None:
            self._said(f"sent to {sent.agent} in {name}")

    # -- a session's life --------------------------------------------------------------------

    def action_start_agent(self) -> None:
        from hbtui.tui.agents.dialogs import StartAgentDialog

        view = self.need_box()
        if view is not None:
            key = (view.host, view.name)
            self.app.push_screen(StartAgentDialog(view.name), partial(self._start_picked, key))

    def _start_picked(self, key: BoxKey, picked: tuple[str, str, bool] | None) -> None:
        if picked is not None:
            self.app.start(partial(self._start_agent, key, *picked), "agent-life")

    async def _start_agent(self, key: BoxKey, agent: str, task: str, keyless: bool) -> None:
        host, name = key
        self.app.notify(f"starting {agent} in {name}", title="agent", markup=False)
        await self._told(self.service.agents.start(name, agent, task, host, keyless=keyless))

    def action_resume_agent(self) -> None:
        view = self.need_box()
        if view is not None:
            self.app.start(partial(self._resume_agent, (view.host, view.name)), "agent-life")

    async def _resume_agent(self, key: BoxKey) -> None:
        host, name = key
        self.app.notify(f"resuming the agent in {name}", title="agent", markup=False)
        await self._told(self.service.agents.resume(name, host))

    async def _told(self, starting: Coroutine[Any, Any, AgentStart]) -> None:
        """A start or resume, waited for; how it went, as one notification."""
        start = await self._asked(starting)
        if start is not None:
            self._said(start.message, warning=not start.took)

    def action_stop_agent(self) -> None:
        """Stop the selected box's live session (picked first when several run)."""
        self._live_session("stop", self._stop_picked)

    def _stop_picked(self, key: BoxKey, session: str | None) -> None:
        self.app.start(partial(self._stop, key, session, False), "agent-life")

    async def _stop(self, key: BoxKey, session: str | None, yes: bool) -> None:
        host, name = key
        try:
            stopped = await self.service.agents.stop(name, host, session=session, yes=yes)
        except AgentBusy as busy:
            self._ask_stop(key, busy)
            return
        except HbtuiError as exc:
            self._warn(exc)
            return
        self._said(stopped.message)

    def _ask_stop(self, key: BoxKey, busy: AgentBusy) -> None:
        from hbtui.tui.dialogs.confirm import ConfirmDialog

        sid = busy.session.session_id

        def answered(yes: bool | None) -> None:
            if yes:
                self.app.start(partial(self._stop, key, sid, True), "agent-life")

        question = f"{busy.message}. Stop it?"
        self.app.push_screen(ConfirmDialog("Stop agent", question, "Stop", "Keep"), answered)

    def action_forget_agents(self) -> None:
        view = self.need_box()
        if view is not None:
            self.app.start(partial(self._forget, (view.host, view.name)), "agent-life")

    async def _forget(self, key: BoxKey) -> None:
        host, name = key
        gone = await self._asked(self.service.agents.forget(name, host))
        if gone is not None:
            some = f"forgot {len(gone)} ended session(s) of {name}"
            self._said(some if gone else f"box {name} has no ended agent session to forget")

    async def _asked(self, asking: Awaitable[T]) -> T | None:
        """What the box's agents answered; None when they could not, said as a warning."""
        try:
            return await asking
        except HbtuiError as exc:
            self._warn(exc)
            return None

    def _warn(self, exc: HbtuiError) -> None:
        self.app.notify(describe(exc), title="agent", severity="warning", markup=False)

    def _said(self, text: str, *, warning: bool = False) -> None:
        """How an answer, a line, a start or a stop went (the box's words: plain), and the
        agents listed again to show it."""
        severity: SeverityLevel = "warning" if warning else "information"
        self.app.notify(text, title="agent", severity=severity, markup=False)
        self.app.post_message(AgentsWanted())
