"""A failure as the dashboard shows it, made from the exception that says it.

What the dashboard does with a failure comes from the error's class (a cancellation is a
notice, a locked secrets file asks for its passphrase, a refused passphrase is asked for
again), what it says from the error's one line and its hint: never from words matched or
flags set beside a string. The value keeps the class, not the exception, so a failure
kept on a box's row holds no traceback's frames.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from hbtui import boxtext
from hbtui.core.keys import SecretsPassphraseNeeded
from hbtui.errors import Cancelled, HbtuiError, PassphraseRefused

ROLLED_BACK = "cancelled; whatever it made was rolled back"  # a worker cancelled mid-call


def describe(exc: BaseException) -> str:
    """The one plain line the dashboard shows for a failure (a bug's type when it says
    nothing): an error may quote what a box said (git's stderr, a file name in an archive)."""
    if isinstance(exc, asyncio.CancelledError):
        return ROLLED_BACK
    if isinstance(exc, HbtuiError):
        return boxtext.line(exc.message)
    return boxtext.line(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


@dataclass(frozen=True)
class Failure:
    """Why something failed: the error's class, its one plain line, its hint."""

    kind: type[BaseException]
    text: str
    hint: str = ""  # as the core wrote it: the log draws it plain (hbtui.tui.plain)

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        hint = (exc.hint or "") if isinstance(exc, HbtuiError) else ""
        return cls(type(exc), describe(exc), hint)

    @property
    def cancelled(self) -> bool:
        """The user cancelled it, and the core rolled back what it made: a notice."""
        return issubclass(self.kind, Cancelled | asyncio.CancelledError)

    @property
    def made(self) -> bool:
        """Only what followed the making failed: the box is made, whole, and stays; the
        operation is told as done, with what failed said (`after_making`)."""
        return bool(self.after_making)

    @property
    def after_making(self) -> str:
        """What failed once the box was made ("its setup failed": the repository's setup;
        "its agent ended": the agent ended before it took its task), else ""."""
        from hbtui.core.work import AgentEnded, SetupFailed  # loaded with the Service

        if issubclass(self.kind, SetupFailed):
            return "its setup failed"
        if issubclass(self.kind, AgentEnded):
            return "its agent ended"
        return ""

    @property
    def locked(self) -> bool:
        """It stopped before doing anything, for want of the secrets file's passphrase."""
        return issubclass(self.kind, SecretsPassphraseNeeded)

    @property
    def wrong_passphrase(self) -> bool:
        """The passphrase it was given does not open what it was given for."""
        return issubclass(self.kind, PassphraseRefused)
