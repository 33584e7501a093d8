"""Typed failures of the smolvm engine.

The engine is always called with `--error-format json`, so a failure is
`{"error": {"code": ..., "message": ...}}` on stderr; `from_stderr` turns it
into the most specific exception it can.
"""

from __future__ import annotations

import json
import re

from hbtui.errors import HbtuiError


class EngineError(HbtuiError):
    """The engine refused or failed a call."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "SMOLVM_ERROR",
        argv: list[str] | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.code = code
        self.argv = argv or []


class MachineNotFound(EngineError):
    """No machine by that name (the engine's NOT_FOUND, or its "... not found")."""


class MachineExists(EngineError):
    """create with a name the engine already has."""


class MachineNotRunning(EngineError):
    """exec, cp or pause of a machine that is not running: the engine does not start it
    for us."""


class MachinePaused(EngineError):
    """A call the engine refuses while the machine holds a paused execution: resume it
    (or delete it) first."""


class MachineNotPaused(EngineError):
    """resume of a machine that holds no paused execution: it is started, not resumed."""


class EngineTimeout(EngineError):
    """The call outlived its timeout; its whole process group was killed."""


class EngineLineTooLong(EngineError):
    """A line of a streamed call's output went past the line limit; the call was ended."""


class EngineOutputTooLong(EngineError):
    """A call printed more than its bound; it was ended, and nothing it said is used."""


class EngineMissing(EngineError):
    """No usable engine binary was found, or it is too old."""


def _json_error(stderr: str) -> tuple[str, str] | None:
    for line in reversed(stderr.splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            body = json.loads(line)["error"]
            return str(body["code"]), str(body["message"])
        except (ValueError, KeyError, TypeError):
            continue
    return None


MESSAGE_MAX = 1000  # characters of a plain-text failure kept (its end: the cause)


def _plain_message(stderr: str, returncode: int) -> str:
    """A failure the engine printed as text, every line of it as one: `Error: X`, then
    `Caused by:` and numbered causes, become `X: cause: cause` (the first line says what
    failed, the last why; either alone misleads)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        lines = lines[-1:]  # a crash's frames say where, its last line what
    parts = []
    for line in lines:
        if line.startswith("note: ") or line == "Caused by:":
            continue
        parts.append(re.sub(r"^(Error: |\d+: )", "", line))
    text = ": ".join(parts) or f"engine exited with status {returncode}"
    return text if len(text) <= MESSAGE_MAX else "…" + text[-MESSAGE_MAX:]


def from_stderr(stderr: str, argv: list[str], returncode: int) -> EngineError:
    parsed = _json_error(stderr)
    if parsed is None:
        code, message = "SMOLVM_ERROR", _plain_message(stderr, returncode)
    else:
        code, message = parsed
    # `status --json` reports a missing machine as a CONFIG_ERROR "... not found".
    if code == "NOT_FOUND" or (code == "CONFIG_ERROR" and message.endswith("' not found")):
        cls: type[EngineError] = MachineNotFound
    elif "already exists" in message:
        cls = MachineExists
    elif "is not running" in message or message.endswith("' must be running"):
        cls = MachineNotRunning
    elif "is not paused" in message:
        cls = MachineNotPaused
    elif "use resume" in message:
        cls = MachinePaused
    else:
        cls = EngineError
    return cls(message, code=code, argv=argv)
