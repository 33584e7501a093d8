"""An agent's life in a box, from the host: a new session started, an ended one resumed
with its conversation, a live one stopped, ended ones forgotten.

A start or a resume runs the agent in a new window of tmux "main" through the same
launcher and the same wait as `new --agent` (hbtui.core.work.agent), each with a launch
folder of its own in the box (the wait reads the launcher's files there, so an earlier
start's never count). A resume names the session to the agent (Claude `--resume ID`,
Codex `resume ID`, Hermes `--resume ID`) in the folder it ran in. A session that ran in
another box (its status file names that box: a branch or a load copied it here; or,
from a helper that did not name its box, this box is a branch) is resumed as a fork
(Claude `--fork-session`, Codex `fork ID`): the two boxes never go on with one session
id. Hermes has no fork; its sessions live in each box's own store.

Stop and forget are the box's helper's (`hb agents stop|forget`): it knows the session's
process and pane, and checks again, as it acts, that what it ends is live and what it
drops has ended.
"""

from __future__ import annotations

import json
import secrets
import shlex
import time
from dataclasses import dataclass, replace

from hbtui.core.agents.operations import (
    named_session,
    pick_session,
    read_sessions,
    run_helper,
    running_box,
)
from hbtui.core.agents.sessions import (
    ENDED,
    ERROR,
    NEEDS_YOU,
    WORKING,
    AgentBusy,
    AgentError,
    AgentSession,
)
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation.scratch import scratch
from hbtui.core.foundation.views import BoxView
from hbtui.core.foundation.workbook import WorkBook
from hbtui.core.work import agent as work_agent
from hbtui.core.work import box as work_box
from hbtui.core.work.agent import AgentEnded, AgentStart
from hbtui.core.work.operations import AGENTS, check_task
from hbtui.core.work.setup import run_setup
from hbtui.errors import UsageError
from hbtui.events import Notice, Phase, Report, ignore

WORKSPACE = "/data/home/agent/workspace"  # where an agent works in a box without a clone
LAUNCHES = "/data/home/agent/.local/state/hermes-box/launch"
STOP_GRACE_MS = 5000  # for the agent's own exit, after its exit keys
STOP_TIMEOUT = 30.0  # the helper's keys, the grace, SIGTERM's 3 s and SIGKILL's 2 s, and room
_STOPPED_HOW = {
    "exit": "it exited at its own command",
    "SIGTERM": "on SIGTERM",
    "SIGKILL": "on SIGKILL",
}


@dataclass(frozen=True)
class Stopped:
    session: AgentSession
    how: str  # "exit" (its own), "SIGTERM" or "SIGKILL"

    @property
    def message(self) -> str:
        s = self.session
        return (
            f"stopped {s.agent} session {s.session_id[:8]} in {s.box} "
            f"({_STOPPED_HOW.get(self.how, self.how)})"
        )

    def to_json(self) -> dict[str, object]:
        return {"session": self.session.to_json(), "how": self.how, "message": self.message}


def resume_command(agent: str, session_id: str, fork: bool) -> str:
    """The agent's own command line that goes on with `session_id` (a fork of it: a new
    id), quoted for the launcher's shell."""
    sid = shlex.quote(session_id)
    if agent == "claude":
        return f"claude --resume {sid}" + (" --fork-session" if fork else "")
    if agent == "codex":
        return f"codex {'fork' if fork else 'resume'} {sid}"
    if agent == "hermes":
        return f"hermes --resume {sid}"
    raise AgentError(f"hbtui cannot resume a session of {agent!r}")


def forks(session: AgentSession, name: str, parent: str) -> bool:
    """Whether resuming `session` in box `name` must fork it: its status file names
    another box; or names none (an older helper) and this box is a branch."""
    return session.origin != name if session.origin else bool(parent)


def ended_session(
    sessions: tuple[AgentSession, ...], name: str, wanted: str | None
) -> AgentSession:
    """The ended session to resume: the named one (an id or a prefix of at least 4
    characters), else the most recent one that ended."""
    if wanted:
        chosen = named_session(list(sessions), name, wanted)
        if chosen is None:
            raise AgentError(
                f"box {name} has no agent session {wanted!r} (see: hbtui agents {name})"
            )
        if chosen.status != ENDED:
            raise AgentError(
                f"session {chosen.session_id[:8]} in box {name} is {chosen.status}: "
                "only an ended session is resumed"
            )
        return chosen
    ended = [s for s in sessions if s.status == ENDED]
    if not ended:
        raise AgentError(f"box {name} has no ended agent session to resume")
    return max(ended, key=lambda s: s.since or 0.0)


async def _launch_folder(boxes: BoxCore, view: BoxView) -> str:
    """A new folder of the box's agent for one launcher's files."""
    folder = f"{LAUNCHES}/{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    host = await boxes.hosts.get(view.host)
    await host.engine.exec(
        view.name, ["mkdir", "-p", "-m", "0700", folder], user=work_box.AGENT, timeout=60
    )
    return folder


async def _run(
    boxes: BoxCore, view: BoxView, agent: str, cwd: str, task: str, run: str | None, began: str,
    report: Report,
) -> AgentStart:  # fmt: skip
    """Launch `agent` in a new window of tmux "main" in `cwd`, and wait until it is seen
    (on `task`, or up at all without one). AgentEnded when it ended at once."""
    launch = await _launch_folder(boxes, view)
    host = await boxes.hosts.get(view.host)
    with scratch(boxes.paths, "agent") as folder:
        why = await work_agent.start(
            host, view.name, cwd, agent, task, folder, launch=launch, run=run
        )
    if why is not None:
        raise AgentError(f"starting {agent} in box {view.name} failed: {why}")
    report(Phase(f"{agent} launched in {view.name}; waiting to see it"))
    seen = await work_agent.await_start(
        boxes, view.name, view.host, cwd, agent, work_agent.wait_seconds(),
        launch=launch, up=not task,
    )  # fmt: skip
    start = replace(seen, began=began)
    if start.ended:
        raise AgentEnded(start)
    report(Phase(start.message) if start.took else Notice(start.message))
    return start


async def start(
    boxes: BoxCore, book: WorkBook, name: str, host: str, agent: str, task: str = "",
    *, keyless: bool = False, setup: bool = False, report: Report = ignore,
) -> AgentStart:  # fmt: skip
    """A new session of `agent` in the box's clone (its workspace without one), on
    `task` or at its prompt. A box that binds no credential to the agent's key variable
    is refused unless `keyless` (the agent logs in inside the box). With `setup`, each
    clone's .hbtui/setup.sh runs first, as after `new --repo` (SetupFailed: no agent)."""
    if agent not in AGENTS:
        raise UsageError(f"unknown agent {agent!r}: one of {', '.join(AGENTS)}")
    check_task(task, agent)
    view = await running_box(boxes, name, host)
    record = book.get(host, name)
    if setup and record is None:
        raise UsageError(f"--setup: box {name} was not made with a repository")
    unkeyed = work_agent.unkeyed(boxes, name, host, agent)
    if unkeyed is not None:
        if not keyless:
            raise AgentError(f"{unkeyed}; or start it without a credential (--keyless)")
        report(Notice(unkeyed))
    if setup and record is not None:
        on = await boxes.hosts.get(host)
        for repo in record.repos:
            await run_setup(on, name, repo.clone, agent, report)
    cwd = record.first.clone if record is not None else WORKSPACE
    if task:
        return await _run(boxes, view, agent, cwd, task, None, "", report)
    return await _run(boxes, view, agent, cwd, "", agent, "started at its prompt", report)


async def resume(
    boxes: BoxCore, name: str, host: str, session: str | None = None, *, report: Report = ignore
) -> AgentStart:
    """Start an ended session again with its conversation, in the folder it ran in (the
    box's most recent ended session unless `session` names one); a fork where the
    session came from another box (`forks`)."""
    view = await running_box(boxes, name, host)
    chosen = ended_session(await read_sessions(boxes, view), name, session)
    if chosen.agent not in AGENTS:
        raise AgentError(
            f"session {chosen.session_id[:8]} in box {name} is of no agent hbtui knows"
        )
    if not chosen.cwd:
        raise AgentError(
            f"session {chosen.session_id[:8]} in box {name} does not say where it ran: "
            f"resume it inside the box (hbtui enter {name})"
        )
    record = boxes.registry.read().get(name, host)
    fork = forks(chosen, name, record.parent if record is not None else "")
    run = resume_command(chosen.agent, chosen.session_id, fork)
    where = chosen.origin or (record.parent if record is not None else "") or "its source"
    began = f"resumed session {chosen.session_id[:8]}" + (
        f" as a fork (it ran in {where})" if fork else ""
    )
    return await _run(boxes, view, chosen.agent, chosen.cwd, "", run, began, report)


async def stop(
    boxes: BoxCore, name: str, host: str, session: str | None = None, *, yes: bool = False
) -> Stopped:
    """End one live session: its own exit first, then a signal (bounded, in the box).
    One that is working or waits for an answer is AgentBusy unless `yes`."""
    view = await running_box(boxes, name, host)
    chosen = pick_session(await read_sessions(boxes, view), name, session, pending=False)
    if chosen.status in (WORKING, NEEDS_YOU) and not yes:
        raise AgentBusy(chosen)
    code, out, err = await run_helper(
        boxes, view, ["stop", chosen.session_id, str(STOP_GRACE_MS)], timeout=STOP_TIMEOUT
    )
    _helper_failed(name, "stop", code, err)
    try:
        how = json.loads(out[:4096].decode()).get("how")
    except (UnicodeDecodeError, ValueError, AttributeError):
        how = None
    return Stopped(chosen, how if how in _STOPPED_HOW else "exit")


async def forget(
    boxes: BoxCore, name: str, host: str, session: str | None = None
) -> tuple[AgentSession, ...]:
    """Drop ended sessions from every view: the named one, else every ended one. A live
    session cannot be forgotten (one line). Returns those dropped."""
    view = await running_box(boxes, name, host)
    sessions = await read_sessions(boxes, view)
    if session:
        chosen = named_session(list(sessions), name, session)
        if chosen is None:
            raise AgentError(f"box {name} has no agent session {session!r}")
        if chosen.status not in (ENDED, ERROR):
            raise AgentError(
                f"session {chosen.session_id[:8]} in box {name} is {chosen.status}: a live "
                f"session is not forgotten (stop it first: hbtui agents stop {name} "
                f"--session {chosen.session_id[:8]})"
            )
        gone: tuple[AgentSession, ...] = (chosen,)
    else:
        gone = tuple(s for s in sessions if s.status == ENDED)
    if not gone:
        return ()
    code, _out, err = await run_helper(boxes, view, ["forget", *(s.session_id for s in gone)])
    _helper_failed(name, "forget", code, err)
    return gone


def _helper_failed(name: str, verb: str, code: int, err: str) -> None:
    if code == 0:
        return
    if code == 2:  # a helper from before it had the verb
        raise AgentError(
            f"box {name}: its agent helper has no `{verb}` (bring it up to date: hbtui repair {name})"
        )
    raise AgentError(f"box {name}: {err or f'hb agents {verb} exited with {code}'}")
