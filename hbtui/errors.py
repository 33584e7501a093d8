"""Errors a user can act on.

Everything hbtui raises on purpose derives from HbtuiError: the front ends
print its message as one line and exit with `exit_code`, no traceback.
"""


class HbtuiError(Exception):
    """A failure explained in one line to the user."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(HbtuiError):
    """Bad input from the user (a name, a flag value, a missing file)."""

    exit_code = 2


class PassphraseRefused(HbtuiError):
    """The passphrase given does not open what it was given for: a front end may ask for
    it again and keep the rest of the request."""


class Cancelled(HbtuiError):
    """The user interrupted an operation; whatever it made was rolled back."""

    exit_code = 130
