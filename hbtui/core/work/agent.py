"""The agent a box made with `--repo --agent` starts on its task: the launcher that runs
it in tmux "main" (and keeps its window when it ends), the word before it starts when
the box holds no key for it, and the wait that sees it alive on the task, or ended.
`hbtui agents start|resume` (hbtui.core.agents.lifecycle) start agents the same way, with
their own command line and a launch folder of their own.

What "alive on the task" means, per agent: Claude Code, Codex and Hermes all run the
box's hook (hb-agent-hook), which records each event in a status file naming the agent's
tmux pane. The start is seen when that file, for the launcher's pane, names an event
past the agent's own start (UserPromptSubmit, a tool, the turn's end; Hermes's first
turn): the agent is up (logged in, its start-up checks passed) and has the task as its
prompt. A SessionStart alone is not enough: Claude can still end at its API check. The
launcher writes the agent's exit status when it ends (its pane stays, with a shell),
which is the plain "ended". Neither within the bound: the agent still runs but said
nothing (a slow start, a login or dialog it waits on, an agent or stand-in without the
hooks), and the message says only that. The bound, WAIT_DEFAULT: on a loaded 2-core
machine Claude Code took its prompt 1.3 s after its start alone, 4-5.6 s four at once
(a try), and ended at its API check within ~2.5 s; about three times the slowest leaves
room for a busier machine, and a user waits no longer for an agent that never says.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import asdict, dataclass
from pathlib import Path

from hbtui import boxtext
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.views import BoxView
from hbtui.core.keys import credentials as creds
from hbtui.core.work import box as work_box
from hbtui.environment import env_seconds
from hbtui.errors import HbtuiError
from hbtui.events import Notice, Phase, Report

WAIT_ENV = "HBTUI_AGENT_WAIT_SECONDS"
WAIT_DEFAULT = 15.0
WAIT_MAX = 600.0
ENDED_MARK = "[hbtui]"  # the launcher's own line after the agent ended
WORDS_MAX = 300  # characters of an ended agent's last words
WORDS_LINES = 4
TOOK, RUNNING, ENDED, UNSEEN = "took", "running", "ended", "unseen"

# Hermes takes no first prompt on its command line but an interactive one: the task is
# pasted into its input line before it starts, as one bracketed paste and then Enter, so a
# task of many lines is one prompt. It waits in the terminal as typed: `stty` turns off
# the line discipline (no 4 KiB line limit, no ^C or ^U read as keys, Enter stays CR), and
# a theme hint spares Hermes its terminal colour query, which flushes pending input.
_HERMES = """umask 077
stty -icanon -echo -isig -iexten -icrnl -ixon
[ -n "$HERMES_LIGHT$HERMES_TUI_LIGHT$HERMES_TUI_THEME$HERMES_TUI_BACKGROUND$COLORFGBG" ] ||
    export HERMES_TUI_THEME=dark
{ printf '\\033[200~'; tr -d '\\033' < "$1"; printf '\\033[201~\\r'; } > "$1.paste"
tmux load-buffer -b "hbtui-task-$$" "$1.paste" \\; paste-buffer -d -r -b "hbtui-task-$$" -t "$TMUX_PANE"
rm -f "$1.paste"
hermes
"""


def _before(folder: str) -> str:
    """Before the agent: its pane, for the wait that watches its start (`await_start`)."""
    return f"printf '%s\\n' \"$TMUX_PANE\" > '{folder}/hbtui-pane'\n"


def _after(agent: str, folder: str) -> str:
    """After the agent: its exit status where the wait on its start sees it, and its
    window stays, saying how it ended (an agent that could not start, say for want of a
    login, leaves its words on screen), with a shell in the clone, its terminal as a
    shell wants it (Hermes's start turned off line editing)."""
    return (
        f"status=$?\nprintf '%s\\n' \"$status\" > '{folder}/hbtui-ended.tmp'\n"
        f"mv -f '{folder}/hbtui-ended.tmp' '{folder}/hbtui-ended'\nstty sane 2>/dev/null\n"
        f"printf '\\n{ENDED_MARK} {agent} ended (exit status %s); this is a shell in the clone.\\n'"
        ' "$status"\nexec bash -l\n'
    )


# The variable each agent reads its API key from: without a credential bound to it, the
# agent asks to log in instead of working.
_KEY_VARS = {
    "claude": ("ANTHROPIC_API_KEY", "CLAUDE_CODE_OAUTH_TOKEN"),  # a key, or a subscription
    "codex": ("OPENAI_API_KEY",),
}


def launcher(agent: str, task_file: str, run: str | None = None) -> str:
    """The agent's start in its tmux window; the task is read from a file in the box,
    and the launcher's own files go beside it. `run`: the agent's own command line
    instead (a resume, a start at its prompt), already quoted for the shell."""
    if not agent:
        return "exec bash -l\n"
    folder = task_file.rsplit("/", 1)[0]
    if run is not None:
        return f"{_before(folder)}{run}\n{_after(agent, folder)}"
    if agent == "hermes":
        return f"set -- '{task_file}'\n{_before(folder)}{_HERMES}{_after(agent, folder)}"
    return f'{_before(folder)}task=$(cat {task_file})\n{agent} "$task"\n{_after(agent, folder)}'


def unkeyed(boxes: BoxCore, name: str, host_name: str, agent: str) -> str | None:
    """What to tell the user when the box binds no credential to the variable its agent
    reads its key from (None: it does, or the agent reads none we know). Not refused: a
    user may log the agent in inside the box."""
    names = _KEY_VARS.get(agent)
    record = boxes.registry.read().get(name, host_name)
    if names is None or record is None:
        return None
    known = creds.presets(boxes.config)
    if any(known[n].env_var in names for n in record.credentials.split(",") if n in known):
        return None
    var = names[0]
    preset = next((p.name for p in known.values() if p.env_var == var), "")
    hint = f"--credential {preset} when making it, or" if preset else ""
    return (
        f"box {name} binds no credential to {var}: {agent} will ask to log in "
        f"({hint} log it in inside the box: hbtui enter {name})"
    )


async def start(
    host: Host, name: str, clone: str, agent: str, task: str, folder: Path,
    *, launch: str | None = None, run: str | None = None,
) -> str | None:  # fmt: skip
    """Start `agent` on `task` in tmux "main" of box `name`, in `clone`; None, or why it
    did not start. The task and the launcher travel as files (never argv of a shell on
    the host), into `launch` (a folder of the box's agent; the clone's .git without);
    `run`: the agent's own command line instead of its start on the task."""
    launch = launch or f"{clone}/.git"
    task_file = f"{launch}/hbtui-task"
    start_file = f"{launch}/hbtui-start"
    (folder / "task").write_text(task)
    (folder / "start").write_text(launcher(agent, task_file, run))
    for local, guest in ((folder / "task", task_file), (folder / "start", start_file)):
        await host.engine.cp_in(name, local, guest, mode="0644")
        await host.engine.exec(name, ["chown", f"{work_box.AGENT}:", "--", guest], timeout=60)
    answer = await work_box.run_step(
        host, name, work_box.START_SCRIPT, [clone, start_file], cap=64 * 1024
    )
    return None if answer.returncode == 0 else answer.why()


def wait_seconds() -> float:
    """How long `new --agent` and `try` wait to see the agent on its task
    (`HBTUI_AGENT_WAIT_SECONDS`, default WAIT_DEFAULT)."""
    return env_seconds(WAIT_ENV, WAIT_DEFAULT, WAIT_MAX)


@dataclass(frozen=True)
class AgentStart:
    """How a box's agent started: TOOK (seen on its task: `event`), RUNNING (still
    running at the bound, having said nothing; `words`: the end of its screen, a login
    or a dialog it may wait on), ENDED (its exit `status`, None when its window closed;
    `words`: the end of its screen) or UNSEEN (the wait could not look, or was
    interrupted: `words` says why). Words are the box's: one safe line."""

    box: str
    agent: str
    state: str
    seconds: float  # waited
    event: str = ""
    status: int | None = None
    words: str = ""
    began: str = ""  # how it began when not on a task ("resumed session 1a2b3c4d"); "" on it

    @property
    def ended(self) -> bool:
        return self.state == ENDED

    @property
    def took(self) -> bool:
        return self.state == TOOK

    @property
    def message(self) -> str:
        box, agent = self.box, self.agent
        if self.state == TOOK:
            began = self.began or "started on the task"
            return f"{agent} {began} in {box} (seen after {self.seconds:.1f} s)"
        if self.state == RUNNING:
            screen = f"; its screen ends: {self.words}" if self.words else ""
            what = "is up" if self.began else "took the task"
            return (
                f"{agent} runs in {box} but has not said it {what} within "
                f"{int(self.seconds)} s{screen} (see: hbtui agents {box}, or hbtui enter {box})"
            )
        if self.state == ENDED:
            how = "no exit status" if self.status is None else f"exit status {self.status}"
            words = f": {self.words}" if self.words else ""
            if self.began:  # a box that was there before: only its agent is news
                return f"{agent} ended at once in {box} ({how}){words}: hbtui enter {box}"
            return (
                f"{agent} ended at once in {box} ({how}){words}; the box stays, made and "
                f"ready: hbtui enter {box}"
            )
        return f"not seen whether {agent} started in {box} ({self.words}): see hbtui agents {box}"

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "message": self.message}


class AgentEnded(HbtuiError):
    """The box is made and ready, but its agent ended before it took the task: `start`
    says how, and `view` (set by the Service) is the box, for a front end that shows it."""

    def __init__(self, start: AgentStart) -> None:
        super().__init__(start.message)
        self.start = start
        self.view: BoxView | None = None


def last_words(lines: list[str]) -> str:
    """The end of an agent's screen as one line: the last lines with a letter or digit
    in them (not the launcher's own line, nor the shell after it), control characters
    gone, at most WORDS_MAX characters (the box's words: untrusted)."""
    marks = [i for i, line in enumerate(lines) if line.lstrip().startswith(ENDED_MARK + " ")]
    if marks:
        lines = lines[: marks[-1]]
    said = [w for w in (boxtext.line(line) for line in lines) if any(c.isalnum() for c in w)]
    text = " | ".join(said[-WORDS_LINES:])
    return text if len(text) <= WORDS_MAX else text[: WORDS_MAX - 1] + "…"


def _number(word: str, digits: int) -> int | None:
    """A count the box said: ASCII digits, at most `digits` of them (str.isdigit takes
    '²', which int() refuses, and a long number overflows a float), else None."""
    ok = word.isascii() and word.isdigit() and len(word) <= digits
    return int(word) if ok else None


def _ms(text: str | None) -> float:
    ms = _number((text or "").rsplit(" ", 1)[-1], 9)
    return 0.0 if ms is None else ms / 1000


def read_start(box: str, agent: str, answer: work_box.Answer) -> AgentStart:
    """What the wait step answered, checked word by word (the box's, untrusted)."""
    if (ended := answer.first("ended")) is not None:
        status = _number(ended.split(" ", 1)[0], 3)
        return AgentStart(
            box, agent, ENDED, _ms(ended), status=status, words=last_words(answer.said)
        )
    if (took := answer.first("took")) is not None:
        event = took.split(" ", 1)[0]
        event = event if event.replace("_", "").isalpha() and len(event) <= 40 else "an event"
        return AgentStart(box, agent, TOOK, _ms(took), event=event)
    if (running := answer.first("running")) is not None:
        return AgentStart(box, agent, RUNNING, _ms(running), words=last_words(answer.said))
    if (gone := answer.first("gone")) is not None:
        return AgentStart(box, agent, ENDED, _ms(gone), words="its window closed")
    if answer.first("nopane") is not None:
        return AgentStart(box, agent, UNSEEN, 0.0, words="its launcher never said its pane")
    return AgentStart(box, agent, UNSEEN, 0.0, words=f"the wait step failed: {answer.why()}")


async def await_start(
    boxes: BoxCore, name: str, host_name: str, clone: str, agent: str, seconds: float,
    *, launch: str | None = None, up: bool = False,
) -> AgentStart:  # fmt: skip
    """Wait (at most `seconds`) until the agent started in `clone` (its launcher's files
    in `launch`, the clone's .git without) is seen on its task (`up`: seen at all) or
    ended; a box that cannot be asked is UNSEEN, never an error."""
    argv = [launch or f"{clone}/.git", agent, str(int(seconds * 1000)), "up" if up else "task"]
    try:
        host = await boxes.hosts.get(host_name)
        answer = await work_box.run_step(
            host, name, work_box.WAIT_SCRIPT, argv, cap=64 * 1024, timeout=seconds + 60
        )
    except (HbtuiError, OSError) as exc:
        return AgentStart(name, agent, UNSEEN, 0.0, words=boxtext.line(str(exc))[:200])
    return read_start(name, agent, answer)


async def started(
    boxes: BoxCore, name: str, host_name: str, clone: str, agent: str, report: Report
) -> AgentStart:
    """`new`'s wait on its agent, once the box is whole: seen on the task is a phase,
    the rest a notice, and an agent that ended is AgentEnded (the box stays). A cancel
    meanwhile only ends the wait: the box is made, and `new` says so."""
    task = asyncio.ensure_future(await_start(boxes, name, host_name, clone, agent, wait_seconds()))
    try:
        start = await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()  # the box's step is ended with it
        with contextlib.suppress(asyncio.CancelledError):
            await task
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        start = AgentStart(name, agent, UNSEEN, 0.0, words="the wait was interrupted")
    if start.ended:
        raise AgentEnded(start)
    report(Phase(start.message) if start.took else Notice(start.message))
    return start
