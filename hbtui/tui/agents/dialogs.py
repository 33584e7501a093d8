"""Answering a box's agent: which session (when several wait), and the line to send;
and starting a new one.

`SessionPicker` dismisses with the chosen session's id; `SendDialog` with the line to
type into the agent's pane; `StartAgentDialog` with the agent and its task. Neither calls the Service: the App sends the answer
(`Service.agents.answer`, `Service.agents.send`), which checks again in the box; an
approval or denial carries the request as the list showed it, refused if it changed.
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Checkbox, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from hbtui.core.agents import SEND_MAX, AgentSession
from hbtui.core.work import AGENTS, check_task
from hbtui.errors import HbtuiError
from hbtui.present import AGENT_STYLE
from hbtui.tui.dialogs.base import Dialog, Field, Form


def session_label(session: AgentSession) -> Text:
    """`claude 3f2a9c1e  needs-you  Bash: rm -rf build`."""
    text = Text(f"{session.agent} {session.session_id[:8]}  ")
    text.append(session.status, style=AGENT_STYLE.get(session.status, ""))
    if session.waiting_for:
        text.append(f"  {session.waiting_for}")
    return text


class SessionPicker(Dialog[str]):
    """Several sessions of the box could take the answer: the user picks one."""

    TITLE_TEXT = "Which agent session?"

    def __init__(self, box: str, what: str, sessions: list[AgentSession]) -> None:
        super().__init__()
        self.box = box
        self.what = what  # "approve", "deny", "send a line to"
        self.sessions = sessions

    def compose_body(self) -> ComposeResult:
        yield Static(
            f"{len(self.sessions)} agent sessions in {self.box}: {self.what} which?", markup=False
        )
        yield OptionList(
            *(Option(session_label(s), id=s.session_id) for s in self.sessions), id="sessions"
        )

    def on_mount(self) -> None:
        self.focus_field(self.query_one(OptionList))

    @on(OptionList.OptionSelected)
    def picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


def line_problem(text: str) -> str | None:
    """Why `text` cannot be sent (the core checks it again)."""
    if not text.strip():
        return "type the line to send"
    if len(text) > SEND_MAX:
        return f"at most {SEND_MAX} characters"
    if not text.isprintable():
        return "no control characters"
    return None


class SendDialog(Dialog[str]):
    """One line for the agent: an answer to its question, or the next prompt."""

    TITLE_TEXT = "Send a line to the agent"

    def __init__(self, box: str, session: AgentSession | None) -> None:
        super().__init__()
        self.box = box
        self.session = session
        self.line = Field(placeholder="the answer, or the next prompt", id="line")

    def compose_body(self) -> ComposeResult:
        to = f"the agent in {self.box}"
        if self.session is not None:
            to = f"{self.session.agent} ({self.session.session_id[:8]}) in {self.box}"
        with Form("Send", lambda: line_problem(self.line.value), self.send):
            yield Static(f"Typed into {to}'s pane, then Enter.", markup=False)
            yield self.line

    def on_mount(self) -> None:
        self.focus_field(self.line)

    def send(self) -> None:
        self.dismiss(self.line.value)


class StartAgentDialog(Dialog[tuple[str, str, bool]]):
    """A new agent session in a box: which agent, its first prompt (none: it waits at
    its prompt), and whether it may start without a credential for its key. Dismisses
    with (agent, task, keyless); the App starts it (`Service.agents.start`)."""

    TITLE_TEXT = "Start an agent"

    def __init__(self, box: str) -> None:
        super().__init__()
        self.box = box
        self.which: Select[str] = Select([(a, a) for a in AGENTS], value="claude",
                                         allow_blank=False, id="agent")  # fmt: skip
        self.prompt = Field(
            placeholder="its first prompt (none: it waits at its prompt)", id="task"
        )
        self.keyless_box = Checkbox("without a credential: it logs in inside the box", id="keyless")

    def compose_body(self) -> ComposeResult:
        with Form("Start", self.problem, self.start):
            yield Static(
                f"A new session in {self.box}'s clone (or workspace), in tmux main.", markup=False
            )
            yield Label("Agent")
            yield self.which
            yield Label("Task")
            yield self.prompt
            yield self.keyless_box

    def on_mount(self) -> None:
        self.focus_field(self.prompt)

    def problem(self) -> str | None:
        try:
            check_task(self.prompt.value.strip(), str(self.which.value))
        except HbtuiError as exc:
            return exc.message
        return None

    def start(self) -> None:
        self.dismiss((str(self.which.value), self.prompt.value.strip(), self.keyless_box.value))
