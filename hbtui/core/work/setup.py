"""The repository's own setup: an executable `.hbtui/setup.sh` of the clone, run in the box
once the clone (and the files `--copy` named) is in, as the agent, in the clone, before the
agent starts. A file that is absent, or not executable, runs nothing.

What it prints is the box's: each line reaches the host as a LogLine with only its colours,
and a failure names the setup with its last lines made one safe line. It is bounded twice:
by silence (no line within the box idle bound, `HBTUI_BOX_IDLE_SECONDS`) and by its whole
time (`HBTUI_SETUP_SECONDS`); given up, its process group in the box is ended. A failed
setup is SetupFailed: the box stays, made with its clone, and its agent is not started (it
would work in a half-set-up tree).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

from hbtui import boxtext
from hbtui.core.boxes.guest import idle_bound, progressing
from hbtui.core.foundation.hosts import Host
from hbtui.core.work.book import WorkError
from hbtui.core.work.box import AGENT, TAG
from hbtui.engine import EngineError, EngineLineTooLong
from hbtui.environment import env_seconds
from hbtui.errors import HbtuiError
from hbtui.events import LogLine, Notice, Phase, Report

SETUP_FILE = ".hbtui/setup.sh"
SECONDS_ENV = "HBTUI_SETUP_SECONDS"
SECONDS_DEFAULT = 1800.0
SECONDS_MAX = 86400.0
LAST_LINES = 3  # of its output, in a failure's message
WORDS_MAX = 300
_PID = ".git/hbtui-setup.pid"

# $1 clone. Before `run`, the step's own tags; after it, every line is the setup's. It runs
# as a job of its own (`set -m`: its own process group, which a give-up ends whole), in a
# login shell (the PATH the agent has), with nothing on its input (a question ends it, not
# hangs it); the step's exit status is the setup's.
SETUP_SCRIPT = f"""set -u
cd "$1" 2>/dev/null || {{ echo "{TAG} noclone"; exit 3; }}
f={SETUP_FILE}
[ -e "$f" ] || [ -L "$f" ] || {{ echo "{TAG} absent"; exit 0; }}
[ -f "$f" ] && [ -x "$f" ] || {{ echo "{TAG} notexec"; exit 0; }}
echo "{TAG} run"
set -m
bash -lc 'exec ./{SETUP_FILE}' < /dev/null 2>&1 &
set +m  # its group is made: no job notices (they would read as its output)
echo $! > {_PID}
wait $!
status=$?
rm -f {_PID}
exit $status
"""

# $1 clone: the setup's process group ended (it was given up).
STOP_SCRIPT = f"""cd "$1" 2>/dev/null && read -r p < {_PID} && kill -KILL -- "-$p" 2>/dev/null
rm -f {_PID}
exit 0
"""


class SetupFailed(HbtuiError):
    """The repository's setup failed, or was given up: the box stays, made with its clone."""


class _Silent(HbtuiError):
    """No line within the idle bound (caught here: the setup is stopped, then named)."""


def setup_seconds() -> float:
    """The whole time a setup may take (`HBTUI_SETUP_SECONDS`, default 30 minutes)."""
    return env_seconds(SECONDS_ENV, SECONDS_DEFAULT, SECONDS_MAX)


def _failed(name: str, how: str, last: deque[str], agent: str) -> SetupFailed:
    said = " | ".join(last)
    if len(said) > WORDS_MAX:
        said = said[: WORDS_MAX - 1] + "…"
    words = f"; its last lines: {said}" if said else ""
    unstarted = f", {agent} not started" if agent else ""
    return SetupFailed(
        f"the setup {SETUP_FILE} in box {name} {how}{words}; the box stays, made with its "
        f"clone{unstarted}: hbtui enter {name}"
    )


async def _read(lines: AsyncIterator[str], name: str, last: deque[str], report: Report) -> bool:
    """The step's lines: its tags until the setup runs, then the setup's output (each
    line to `report`, the last ones kept in `last`). Whether the setup ran."""
    running = False
    async for raw in lines:
        if running:
            report(LogLine(boxtext.colours(raw)))
            if said := boxtext.line(raw).strip():
                last.append(said)
        elif raw == f"{TAG} run":
            running = True
            report(Phase(f"running the repository's {SETUP_FILE} in {name}"))
        elif raw == f"{TAG} notexec":
            report(Notice(f"{SETUP_FILE} in {name}'s clone is not executable: not run"))
    return running


async def run_setup(host: Host, name: str, clone: str, agent: str, report: Report) -> None:
    """Run the clone's setup, if it has one to run; SetupFailed when it fails, is silent
    for the idle bound or runs past its whole time (`agent`: the one it holds back)."""
    seconds, idle = setup_seconds(), idle_bound()
    last: deque[str] = deque(maxlen=LAST_LINES)
    stream = host.engine.exec_stream(
        name, ["bash", "-c", SETUP_SCRIPT, "hbtui", clone], user=AGENT, env={"HB_BOX": name},
        timeout=seconds + 60,
    )  # fmt: skip
    lines = progressing(aiter(stream), idle, lambda _line: True, lambda: _Silent("silent"))
    running = False
    given_up = ""
    whole = asyncio.timeout(seconds)
    try:
        async with whole:
            running = await _read(lines, name, last, report)
    except TimeoutError:
        if not whole.expired():
            raise
        given_up = f"ran longer than {seconds:g} s ({SECONDS_ENV}) and was stopped"
    except _Silent:
        given_up = f"went silent (no output in {idle:g} s) and was stopped"
    except EngineLineTooLong:
        given_up = "wrote a line longer than 1 MiB and was stopped"
    finally:
        with contextlib.suppress(EngineError, RuntimeError, ValueError):
            await lines.aclose()  # type: ignore[attr-defined]
    if given_up:
        with contextlib.suppress(HbtuiError, OSError):
            await host.engine.exec(
                name, ["bash", "-c", STOP_SCRIPT, "hbtui", clone], user=AGENT, timeout=60
            )
        raise _failed(name, given_up, last, agent)
    status = stream.returncode
    if running and status:
        raise _failed(name, f"failed (exit status {status})", last, agent)
    if not running and status:
        raise WorkError(f"looking for {SETUP_FILE} in box {name} failed (exit status {status})")
