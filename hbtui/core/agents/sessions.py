"""What an agent session is, as the boxes report it: the value types, the statuses, and
the parse of `hb agents --json` (its schema and caps).

Apart from hbtui.core.agents.operations, which asks the boxes, so that what shows a session (the
dashboard's first frame among them) does not import the box operations.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from enum import StrEnum

from hbtui import boxtext
from hbtui.errors import HbtuiError

WORKING = "working"
NEEDS_YOU = "needs-you"
IDLE = "idle"
ENDED = "ended"
ERROR = "error"
STATUSES = (WORKING, NEEDS_YOU, IDLE, ENDED, ERROR)

OUTPUT_MAX = 2 * 1024 * 1024  # what one box may answer `hb agents --json` with
SESSIONS_MAX = 200  # per box
TEXT_MAX = 300
SEND_MAX = 4096

_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
PANE_ID = re.compile(r"%[0-9]{1,6}")
REQUEST_ID = re.compile(r"[0-9a-f]{4,32}")  # a hook's permission request
_BOX_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
_AGENTS = ("claude", "codex", "hermes")


class Ending(StrEnum):
    """The operations that end a box's processes, its agents among them: a front end
    asks before one ends a live session (`Agents.ended_by`)."""

    STOP = "stop"
    REMOVE = "rm"
    REPAIR = "repair"
    CREDENTIALS = "credentials"  # the box is made again from its disk
    BRANCH = "branch"  # its source is stopped to copy its disk, unless it runs branchable


class AgentError(HbtuiError):
    """Nothing to answer, no such session, or a box that cannot be asked."""


@dataclass(frozen=True)
class GitState:
    branch: str
    changed: int  # files with changes (staged, unstaged or untracked)
    commits: int  # commits on HEAD since the session started


@dataclass(frozen=True)
class AgentSession:
    """One agent session in a box, as `hb agents --json` reported it (checked)."""

    box: str
    host: str
    agent: str
    session_id: str
    status: str
    since: float | None = None  # UNIX time of the last change of status
    waiting_for: str = ""  # the tool and its command, or the question; one line
    pane: str = ""  # its tmux pane ("%3")
    request: str = ""  # a permission request the box's hook waits for hbtui to answer
    cwd: str = ""
    tokens_in: int | None = None
    tokens_out: int | None = None
    git: GitState | None = None
    error: str = ""
    origin: str = ""  # the box its status file says it ran in ("": it does not say)

    def to_json(self) -> dict[str, object]:
        return asdict(self)


class AgentsUnread(AgentError):
    """A running box whose agents could not be read (`why`): whether ending its processes
    ends an agent at work is not known, so a front end asks as it would for one."""

    def __init__(self, box: str, why: str) -> None:
        super().__init__(f"the agents in box {box} could not be read ({why})")
        self.why = why


class AgentBusy(AgentError):
    """Stopping this session would cut off what it does (it is working, or waits for an
    answer): a front end asks first, and stops it only when told to (`yes`)."""

    def __init__(self, session: AgentSession) -> None:
        super().__init__(
            f"{session.agent} session {session.session_id[:8]} in box {session.box} is "
            f"{session.status}: stopping it ends what it is doing"
        )
        self.session = session


@dataclass(frozen=True)
class BoxAgents:
    """A box's sessions, or why they could not be read (the other boxes still show)."""

    box: str
    host: str
    sessions: tuple[AgentSession, ...] = ()
    error: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "box": self.box,
            "host": self.host,
            "error": self.error,
            "sessions": [s.to_json() for s in self.sessions],
        }


# The session a box's story is told by: the one that needs the user first, then a broken
# one, then one at work, then an idle one; an ended one only when nothing else is left.
URGENCY = {NEEDS_YOU: 0, ERROR: 1, WORKING: 2, IDLE: 3, ENDED: 4}
NO_AGENT = "no agent"


def in_story_order(row: BoxAgents) -> list[AgentSession]:
    """The box's sessions, the one that tells its story first (the longest waiting first
    among equals): the order every view lists them in."""
    return sorted(row.sessions, key=lambda s: (URGENCY.get(s.status, 5), s.since or 0.0))


def lead(row: BoxAgents | None) -> AgentSession | None:
    """The session that tells the box's story."""
    if row is None or not row.sessions:
        return None
    return in_story_order(row)[0]


def box_status(row: BoxAgents | None) -> str:
    """The one status of a box's agents that every view gives (`agents`, `--watch`,
    `try ls`, the dashboard's Agent column): its leading session's, NO_AGENT when it has
    none, ERROR when it could not be asked."""
    if row is not None and row.error:
        return ERROR
    first = lead(row)
    return first.status if first is not None else NO_AGENT


@dataclass(frozen=True)
class Answer:
    session: AgentSession
    via: str  # "hook" (the structured path) or "keys" (the agent's own prompt)
    decision: str = ""


def clean_text(value: object, limit: int = TEXT_MAX) -> str:
    if not isinstance(value, str):
        return ""
    flat = boxtext.line(value)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def _time(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) and 0 < number < 1e11 else None


def _match(pattern: re.Pattern[str], value: object) -> str:
    return value if isinstance(value, str) and pattern.fullmatch(value) else ""


def _git(value: object) -> GitState | None:
    if not isinstance(value, dict):
        return None
    changed, commits = _count(value.get("changed")), _count(value.get("commits"))
    if changed is None or commits is None:
        return None
    return GitState(clean_text(value.get("branch"), 100), changed, commits)


def parse_session(box: str, host: str, raw: object) -> AgentSession:
    """One session entry, checked field by field; one that breaks the schema is an
    `error` row saying so, never a crash and never trusted."""
    if not isinstance(raw, dict):
        return AgentSession(box, host, "?", "?", ERROR, error="a session entry is not an object")
    sid = _match(_SESSION_ID, raw.get("session_id"))
    agent = raw.get("agent") if raw.get("agent") in _AGENTS else "?"
    status = raw.get("status")
    if not sid or status not in STATUSES:
        return AgentSession(
            box, host, str(agent), sid or "?", ERROR, error="session entry breaks the schema"
        )
    tokens = raw.get("tokens") if isinstance(raw.get("tokens"), dict) else {}
    assert isinstance(tokens, dict)
    return AgentSession(
        box=box,
        host=host,
        agent=str(agent),
        session_id=sid,
        status=str(status),
        since=_time(raw.get("since")),
        waiting_for=clean_text(raw.get("waiting_for")) if status == NEEDS_YOU else "",
        pane=_match(PANE_ID, raw.get("pane")),
        request=_match(REQUEST_ID, raw.get("request")) if status == NEEDS_YOU else "",
        cwd=clean_text(raw.get("cwd"), 400),
        tokens_in=_count(tokens.get("input")),
        tokens_out=_count(tokens.get("output")),
        git=_git(raw.get("git")),
        error=clean_text(raw.get("error")),
        origin=_match(_BOX_NAME, raw.get("origin")),
    )


def parse_listing(box: str, host: str, output: bytes) -> tuple[AgentSession, ...]:
    """`hb agents --json` output, size-capped and checked; junk raises AgentError."""
    if len(output) > OUTPUT_MAX:
        raise AgentError(f"the box answered {len(output)} bytes (more than {OUTPUT_MAX})")
    try:
        data = json.loads(output.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise AgentError("the box's answer is not JSON") from None
    if not isinstance(data, dict) or not isinstance(data.get("sessions"), list):
        raise AgentError("the box's answer has no session list")
    entries = data["sessions"][:SESSIONS_MAX]
    # One row per session: a box can report one session from several of its sources (its
    # hook's file, Claude's own folder, a pane), which showed one ended session three times.
    once: dict[tuple[str, str], AgentSession] = {}
    for entry in entries:
        session = parse_session(box, host, entry)
        key = (session.agent, session.session_id)
        if session.status == ERROR or key not in once:
            once[key if session.status != ERROR else (ERROR, str(len(once)))] = session
    return tuple(once.values())


@dataclass(frozen=True)
class AgentsChanged:
    """A box's sessions (or why they cannot be read) changed."""

    row: BoxAgents
    via: str  # "stream", or "poll" for a box whose helper has no --watch


@dataclass(frozen=True)
class AgentsGone:
    """A box is no longer running (or no longer watched): forget its row."""

    host: str
    box: str


AgentEvent = AgentsChanged | AgentsGone
