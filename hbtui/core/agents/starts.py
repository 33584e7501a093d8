"""Agents that ended at their start, as the host saw it (`StartBook`): a box made with
`--agent` (by `new` or a try) whose agent ended before its hook said a word has no
session in the box's own listing, so `agents` said `no agent`, the dashboard's Agent
column nothing and `try ls` `ended`. The host keeps what its wait saw, and every listing
shows it as the box's ended session until the box has a session of its own.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from hbtui import boxtext
from hbtui.core.agents.sessions import ENDED, AgentSession, BoxAgents
from hbtui.paths import Paths, UnreadableFile, make_folder, read_state
from hbtui.statefile import write_atomic

START_SESSION = "start"  # the session id an ended start shows under
WORDS_MAX = 300


class StartBook:
    """`<data>/agents/<host>/<box>.start.json`: the agent, when it ended, its last words."""

    def __init__(self, paths: Paths) -> None:
        self.root = paths.data_dir / "agents"

    def _path(self, host: str, box: str) -> Path:
        return self.root / host / f"{box}.start.json"

    def ended(self, host: str, box: str, agent: str, words: str) -> None:
        make_folder(self.root / host)
        note = {"agent": agent, "ended": time.time(), "words": boxtext.line(words)[:WORDS_MAX]}
        write_atomic(self._path(host, box), json.dumps(note).encode())

    def drop(self, host: str, box: str) -> None:
        self._path(host, box).unlink(missing_ok=True)

    def session(self, host: str, box: str) -> AgentSession | None:
        try:
            raw = read_state(self._path(host, box), 4096)
            note = json.loads(raw) if raw else None
        except (UnreadableFile, UnicodeDecodeError, ValueError):
            return None
        if not isinstance(note, dict) or not isinstance(note.get("ended"), int | float):
            return None
        return AgentSession(
            box, host, str(note.get("agent", "?"))[:20], START_SESSION, ENDED,
            since=float(note["ended"]), error=boxtext.line(str(note.get("words", "")))[:WORDS_MAX],
        )  # fmt: skip

    def told(self, row: BoxAgents) -> BoxAgents:
        """The box's row with its ended start, while the box has no session of its own."""
        if row.error or row.sessions:
            return row
        start = self.session(row.host, row.box)
        return row if start is None else BoxAgents(row.box, row.host, (start,))
