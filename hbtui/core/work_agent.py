"""The agent a box made with `--repo --agent` starts on its task: the launcher that runs
it in tmux "main" (and keeps its window when it ends), and the word before it starts
when the box holds no key for it."""

from __future__ import annotations

from pathlib import Path

from hbtui.core import credentials as creds
from hbtui.core import work_box
from hbtui.core.boxes import BoxOperations
from hbtui.core.hosts import Host

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


def _after(agent: str) -> str:
    """After the agent: its window stays, saying how it ended (an agent that could not
    start, say for want of a login, leaves its words on screen), with a shell in the
    clone, its terminal as a shell wants it (Hermes's start turned off line editing)."""
    return (
        "status=$?\nstty sane 2>/dev/null\n"
        f"printf '\\n[hbtui] {agent} ended (exit status %s); this is a shell in the clone.\\n'"
        ' "$status"\nexec bash -l\n'
    )


# The variable each agent reads its API key from: without a credential bound to it, the
# agent asks to log in instead of working.
_KEY_VARS = {"claude": "ANTHROPIC_API_KEY", "codex": "OPENAI_API_KEY"}


def launcher(agent: str, task_file: str) -> str:
    """The agent's start in its tmux window; the task is read from a file in the box."""
    if agent == "hermes":
        return f"set -- '{task_file}'\n{_HERMES}{_after(agent)}"
    if not agent:
        return "exec bash -l\n"
    return f'task=$(cat {task_file})\n{agent} "$task"\n{_after(agent)}'


def unkeyed(boxes: BoxOperations, name: str, host_name: str, agent: str) -> str | None:
    """What to tell the user when the box binds no credential to the variable its agent
    reads its key from (None: it does, or the agent reads none we know). Not refused: a
    user may log the agent in inside the box."""
    var = _KEY_VARS.get(agent)
    record = boxes.registry.read().get(name, host_name)
    if var is None or record is None:
        return None
    known = creds.presets(boxes.config)
    if any(known[n].env_var == var for n in record.credentials.split(",") if n in known):
        return None
    preset = next((p.name for p in known.values() if p.env_var == var), "")
    hint = f"--credential {preset} when making it, or" if preset else ""
    return (
        f"box {name} binds no credential to {var}: {agent} will ask to log in "
        f"({hint} log it in inside the box: hbtui enter {name})"
    )


async def start(
    host: Host, name: str, clone: str, agent: str, task: str, folder: Path
) -> str | None:
    """Start `agent` on `task` in tmux "main" of box `name`, in `clone`; None, or why it
    did not start. The task and the launcher travel as files (never argv of a shell on
    the host)."""
    task_file = f"{clone}/.git/hbtui-task"
    start_file = f"{clone}/.git/hbtui-start"
    (folder / "task").write_text(task)
    (folder / "start").write_text(launcher(agent, task_file))
    for local, guest in ((folder / "task", task_file), (folder / "start", start_file)):
        await host.engine.cp_in(name, local, guest, mode="0644")
        await host.engine.exec(name, ["chown", f"{work_box.AGENT}:", "--", guest], timeout=60)
    answer = await work_box.run_step(
        host, name, work_box.START_SCRIPT, [clone, start_file], cap=64 * 1024
    )
    return None if answer.returncode == 0 else answer.why()
