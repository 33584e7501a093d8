"""The coding agents in boxes: what each session does, and answering it from the host.

One `hb agents --json` exec per running box per refresh (a bounded number at once, remote
hosts included) gives every agent session of the box; `hb agents decide|send|pane` answer
a permission request, type a line, or show the agent's screen. Everything a box says is
untrusted: its output is size-capped and parsed against the schema (hbtui.core.agents.sessions), text fields
lose every control character, and nothing of it ever reaches a host shell (the in-box
helper gets it as argv through the engine's exec).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hbtui import boxtext
from hbtui.core.agents.sessions import (
    ENDED,
    ERROR,
    NEEDS_YOU,
    OUTPUT_MAX,
    PANE_ID,
    REQUEST_ID,
    SEND_MAX,
    WORKING,
    AgentError,
    AgentSession,
    AgentsUnread,
    Answer,
    BoxAgents,
    Ending,
    clean_text,
    parse_listing,
)
from hbtui.core.agents.starts import StartBook
from hbtui.core.boxes.core import BoxCore, BoxNotFound
from hbtui.core.foundation import recipe as recipes
from hbtui.core.foundation.views import BOX, BoxView
from hbtui.engine import Bound, EngineError, EngineOutputTooLong
from hbtui.errors import HbtuiError, UsageError
from hbtui.events import MachineState
from hbtui.names import LOCAL
from hbtui.present import human_bytes

CONCURRENCY = 8  # execs at once across all boxes and hosts
EXEC_TIMEOUT = 15.0
PANE_MAX = 512 * 1024
ANSWER = Bound(OUTPUT_MAX)  # what hb agents may print (--json's cap serves its every verb)
HB = f"{recipes.GUEST_BIN}/hb"

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


@dataclass
class _Limits:
    semaphore: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(CONCURRENCY))


def _why(exc: BaseException) -> str:
    return clean_text(str(exc) or type(exc).__name__, 200)


async def run_helper(
    boxes: BoxCore, view: BoxView, argv: list[str], bound: Bound = ANSWER,
    timeout: float = EXEC_TIMEOUT,
) -> tuple[int, bytes, str]:  # fmt: skip
    """`hb agents ARGV` in the box: its exit status, output and one safe line of stderr."""
    host = await boxes.hosts.get(view.host)
    done = await host.engine.exec(view.name, [HB, "agents", *argv], timeout=timeout, bound=bound)
    return done.returncode, done.stdout, clean_text(done.stderr.decode(errors="replace"), 200)


async def _box_agents(boxes: BoxCore, view: BoxView, limits: _Limits) -> BoxAgents:
    async with limits.semaphore:
        try:
            code, out, err = await run_helper(boxes, view, ["--json"])
        except EngineOutputTooLong:
            why = f"the box answered more than {human_bytes(OUTPUT_MAX)}; hbtui stopped reading it"
            return BoxAgents(view.name, view.host, error=why)
        except (EngineError, HbtuiError, OSError, TimeoutError) as exc:
            return BoxAgents(view.name, view.host, error=_why(exc))
    if code != 0:
        if "unknown command 'agents'" in err:
            err = f"its recipe predates hb agents; bring it up to date: hbtui repair {view.name}"
        return BoxAgents(view.name, view.host, error=err or f"hb agents exited with {code}")
    try:
        return BoxAgents(view.name, view.host, parse_listing(view.name, view.host, out))
    except AgentError as exc:
        return BoxAgents(view.name, view.host, error=exc.message)


async def listing(
    boxes: BoxCore,
    names: Iterable[str] | None = None,
    hosts: list[str] | None = None,
    streamed: Callable[[BoxView], BoxAgents | None] | None = None,
) -> list[BoxAgents]:
    """Every running box's sessions (or the named boxes', stopped ones saying so); a host
    that cannot be listed is a row with its reason. `streamed` gives a box's row where a
    live status stream already said it: that box is not asked again."""
    found = await boxes.list_boxes(hosts=hosts)
    wanted = set(names) if names is not None else None
    rows: list[BoxAgents] = [
        BoxAgents("", host, error=_why(Exception(why)))
        for host, why in sorted(found.errors.items())
    ]
    targets = []
    for view in found.boxes:
        if view.kind != BOX or (wanted is not None and view.name not in wanted):
            continue
        if view.state != MachineState.RUNNING:
            if wanted is not None:
                rows.append(BoxAgents(view.name, view.host, error=f"the box is {view.state}"))
            continue
        targets.append(view)
    if wanted is not None:
        missing = wanted - {v.name for v in found.boxes if v.kind == BOX}
        if missing and not found.errors:
            raise BoxNotFound(f"no box named {sorted(missing)[0]!r} (see: hbtui ls)")
    limits = _Limits()

    async def row(view: BoxView) -> BoxAgents:
        known = streamed(view) if streamed is not None else None
        return known if known is not None else await _box_agents(boxes, view, limits)

    told = StartBook(boxes.paths).told  # an agent that ended at its start is its story
    rows.extend(told(r) for r in await asyncio.gather(*(row(v) for v in targets)))
    return sorted(rows, key=lambda r: (r.host != LOCAL, r.host, r.box))


async def live_sessions(
    boxes: BoxCore,
    name: str,
    host: str = LOCAL,
    streamed: Callable[[BoxView], BoxAgents | None] | None = None,
) -> list[AgentSession]:
    """The box's sessions that are working or wait for the user: what ending its processes
    would cut off. A box that is not running has none, nor does one that is not there (the
    operation says so, in its own words and order); a running box whose agents cannot be
    read is AgentsUnread (an agent may be at work there: the front end asks)."""
    try:
        view = await boxes.get(name, host)
    except BoxNotFound:
        return []
    if view.kind != BOX or view.state != MachineState.RUNNING:
        return []
    known = streamed(view) if streamed is not None else None
    row = known if known is not None else await _box_agents(boxes, view, _Limits())
    if row.error and view.recipe_done:
        raise AgentsUnread(name, row.error)
    return [s for s in row.sessions if s.status in (WORKING, NEEDS_YOU)]


async def sessions_ended_by(
    boxes: BoxCore,
    operation: Ending,
    name: str,
    host: str = LOCAL,
    streamed: Callable[[BoxView], BoxAgents | None] | None = None,
) -> list[AgentSession]:
    """The live sessions `operation` on the box would end: every one for a stop, rm,
    repair or credentials change; for a branch, only when the source must be stopped to
    copy its disk (a source running branchable goes on running)."""
    if operation == Ending.BRANCH:
        try:
            view = await boxes.get(name, host)
        except BoxNotFound:
            return []  # the branch says so
        if view.branchable and view.state == MachineState.RUNNING:
            return []
    return await live_sessions(boxes, name, host, streamed)


async def running_box(boxes: BoxCore, name: str, host: str) -> BoxView:
    view = await boxes.get(name, host)
    if view.kind != BOX:
        raise AgentError(f"box {name} is {view.kind}: hbtui cannot reach its agents")
    if view.state != MachineState.RUNNING:
        raise AgentError(f"box {name} is {view.state}: start it first (hbtui start {name})")
    return view


def named_session(live: list[AgentSession], name: str, wanted: str) -> AgentSession | None:
    """The live session named by its id or a prefix of at least 4 characters; None when
    there is none, one line when the prefix names several."""
    chosen = [s for s in live if s.session_id == wanted] or [
        s for s in live if len(wanted) >= 4 and s.session_id.startswith(wanted)
    ]
    if len(chosen) > 1:
        raise AgentError(f"session {wanted!r} matches several in box {name}: give more of it")
    return chosen[0] if chosen else None


def pick_session(
    sessions: tuple[AgentSession, ...], name: str, wanted: str | None, pending: bool
) -> AgentSession:
    """The session to act on: the named one (an id or a prefix of at least 4 characters),
    or the only candidate; anything else is one line naming the choices."""
    live = [s for s in sessions if s.status not in (ENDED, ERROR)]
    if wanted:
        session = named_session(live, name, wanted)
        if session is None:
            raise AgentError(f"box {name} has no live agent session {wanted!r}")
        if pending and session.status != NEEDS_YOU:
            raise AgentError(
                f"nothing is pending in box {name}: session {wanted} is {session.status}"
            )
        return session
    candidates = [s for s in live if s.status == NEEDS_YOU] if pending else live
    if not candidates:
        if pending:
            raise AgentError(f"nothing is pending in box {name}")
        raise AgentError(f"box {name} has no live agent session")
    if len(candidates) > 1:
        ids = ", ".join(s.session_id[:8] for s in candidates)
        what = "sessions waiting for an answer" if pending else "agent sessions"
        raise AgentError(
            f"box {name} has {len(candidates)} {what} ({ids}): name one with --session"
        )
    return candidates[0]


def _asks(session: AgentSession) -> str:
    return session.waiting_for or "an answer (it does not say to what)"


def _now(
    name: str, sessions: tuple[AgentSession, ...], session_id: str, waiting_for: str | None
) -> str:
    """What is pending in the box now, said when it is not what the user was shown (the
    request of session `session_id` waiting for `waiting_for`)."""
    live = [s for s in sessions if s.status not in (ENDED, ERROR)]
    pending = [s for s in live if s.status == NEEDS_YOU]
    mine = next((s for s in live if s.session_id == session_id), None)
    if mine is not None and mine.status == NEEDS_YOU:
        again = ""
        if mine.waiting_for == waiting_for:  # the same words, another request
            again = " (a new request)" if mine.request else " (now at its own prompt)"
        now = f"session {mine.session_id[:8]} in {name} now asks for: {_asks(mine)}{again}"
    elif pending:
        first = pending[0]
        now = f"session {first.session_id[:8]} in {name} now asks for: {_asks(first)}"
        if len(pending) > 1:
            now += f" (and {len(pending) - 1} more)"
        if mine is not None:
            now = f"session {mine.session_id[:8]} is {mine.status}; {now}"
    else:
        now = f"nothing is pending in box {name} now"
        if mine is not None:
            now += f" (session {mine.session_id[:8]} is {mine.status})"
    return f"{now} — nothing was decided"


def pending_request(
    sessions: tuple[AgentSession, ...],
    name: str,
    wanted: str | None,
    request: str | None = None,
    waiting_for: str | None = None,
) -> AgentSession:
    """The pending request a decision is for, as the box says it now. With nothing
    pinned (no request id, no text): the one pending (of the named session), whatever it
    is. With a pin: the session whose request is exactly what the user was shown (its
    hook's request id, "" for none, and its words); when the box now says anything else,
    one line says what it is now and that nothing was decided."""
    if request is None and waiting_for is None:
        return pick_session(sessions, name, wanted, pending=True)
    live = [s for s in sessions if s.status not in (ENDED, ERROR)]
    mine = named_session(live, name, wanted) if wanted else None
    candidates = ([mine] if mine is not None else []) if wanted else live
    hits = [
        s
        for s in candidates
        if s.status == NEEDS_YOU
        and (request is None or s.request == request)
        and (waiting_for is None or s.waiting_for == waiting_for)
    ]
    if len(hits) > 1:
        ids = ", ".join(s.session_id[:8] for s in hits)
        raise AgentError(
            f"box {name} has {len(hits)} sessions waiting for that ({ids}): name one with --session"
        )
    if not hits:
        shown = mine.session_id if mine is not None else wanted or ""
        raise AgentError(_now(name, sessions, shown, waiting_for))
    return hits[0]


async def read_sessions(boxes: BoxCore, view: BoxView) -> tuple[AgentSession, ...]:
    row = await _box_agents(boxes, view, _Limits())
    if row.error:
        raise AgentError(f"box {view.name}: {row.error}")
    return row.sessions


async def decide(
    boxes: BoxCore,
    name: str,
    host: str,
    decision: str,
    session: str | None = None,
    *,
    request: str | None = None,
    waiting_for: str | None = None,
) -> Answer:
    """Allow or deny the permission request a session waits on: through the box's hook
    when it waits for hbtui, else through the agent's own prompt in its pane.

    What is decided is what the user was shown: `request` (the hook's request id, "" for
    none) and `waiting_for` (its words), where given, must be what the box says now (see
    pending_request); the box checks them again as it decides (`hb agents decide`), so a
    request that changed in between is refused there too. Refused, nothing is decided."""
    if decision not in ("allow", "deny"):
        raise UsageError("a decision is allow or deny")
    if request and not REQUEST_ID.fullmatch(request):
        raise UsageError(
            f"not a request id: {clean_text(request, 60)!r} (as `hbtui agents --json` shows it)"
        )
    view = await running_box(boxes, name, host)
    chosen = pending_request(await read_sessions(boxes, view), name, session, request, waiting_for)
    if not chosen.request and not chosen.pane:  # no hook waits, no screen to press keys in
        raise AgentError(
            f"session {chosen.session_id[:8]} in box {name} waits for you in no tmux pane "
            f"hbtui can reach: answer it inside the box (hbtui enter {name})"
        )
    argv = ["decide", chosen.session_id, chosen.request or "-", decision, chosen.waiting_for]
    code, out, err = await run_helper(boxes, view, argv)
    if code == 3:  # the box's word for why (its request changed, or it shows no prompt)
        raise AgentError(f"box {name}: {err}")
    if code == 2:  # a helper from before it was told what was shown
        raise AgentError(
            f"box {name}: {err or 'hb agents decide: bad usage'} — nothing was decided "
            f"(an older agent helper? bring it up to date: hbtui repair {name})"
        )
    if code != 0:
        raise AgentError(f"box {name}: {err or f'hb agents decide exited with {code}'}")
    try:
        via = json.loads(out[:4096].decode()).get("via")
    except (UnicodeDecodeError, ValueError, AttributeError):
        via = None
    return Answer(chosen, via if via in ("hook", "keys") else "keys", decision)


async def send(
    boxes: BoxCore, name: str, host: str, text: str, session: str | None = None
) -> AgentSession:
    """Type one line into a session's pane and press Enter (an answer, or the next prompt)."""
    if not text.strip():  # an Enter alone is typed in the agent's own screen
        raise UsageError(
            f"the text is empty: nothing sent (to press Enter alone: hbtui enter {name})"
        )
    if len(text) > SEND_MAX:
        raise UsageError(f"the text is {len(text)} characters, over {SEND_MAX}: nothing sent")
    if _CONTROL.search(text):
        raise UsageError("the text holds a control character (one line, no tabs): nothing sent")
    view = await running_box(boxes, name, host)
    chosen = pick_session(await read_sessions(boxes, view), name, session, pending=False)
    if not chosen.pane:
        raise AgentError(f"session {chosen.session_id[:8]} in box {name} runs in no tmux pane")
    code, _out, err = await run_helper(boxes, view, ["send", chosen.pane, text])
    if code != 0:
        raise AgentError(f"box {name}: {err or f'hb agents send exited with {code}'}")
    return chosen


async def pane(boxes: BoxCore, name: str, host: str, pane_id: str) -> str:
    """The pane's screen with only its colours kept (safe to draw on the host)."""
    if not PANE_ID.fullmatch(pane_id):
        raise UsageError(f"not a tmux pane id: {pane_id!r} (like %3)")
    view = await running_box(boxes, name, host)
    # One byte over PANE_MAX kept says the screen was cut: screen_text drops its first,
    # partial line.
    code, out, err = await run_helper(
        boxes, view, ["pane", pane_id], Bound(PANE_MAX + 1, tail=True)
    )
    if code != 0:
        raise AgentError(f"box {name}: {err or f'hb agents pane exited with {code}'}")
    return screen_text(out)


def screen_text(output: bytes) -> str:
    """A pane capture as the host may draw it: its last PANE_MAX bytes, whole lines,
    colours kept and every other terminal sequence removed."""
    tail = output[-PANE_MAX:]
    if len(output) > PANE_MAX and b"\n" in tail:
        tail = tail[tail.index(b"\n") + 1 :]
    return boxtext.colours(tail.decode("utf-8", errors="replace"))
