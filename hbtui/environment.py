"""The environment hbtui hands to child processes (its own, minus any secret), and
whether another process is still there.

The archive passphrase may arrive in one of SECRET_ENV; hbtui.core.keys.passphrase
takes it out of os.environ at start, and every child is spawned with
child_env() besides, so no engine, tar, zstd, gpg or ssh process sees it.
"""

from __future__ import annotations

import os

from hbtui.errors import UsageError

SECRET_ENV = ("HBTUI_PASSPHRASE", "BOX_PASSPHRASE")  # checked in this order
# Unlocks the encrypted file of credential values when there is no OS keyring.
SECRETS_PASSPHRASE_ENV = "HBTUI_SECRETS_PASSPHRASE"
SCRUBBED_ENV = (*SECRET_ENV, SECRETS_PASSPHRASE_ENV)


def child_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}


def pid_alive(pid: int) -> bool:
    """Is process `pid` still there (a record's owner, a lock's holder)?"""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # there, but someone else's
    return True


def env_seconds(name: str, default: float, most: float) -> float:
    """A bound in seconds from the environment variable `name` (unset or empty: `default`);
    anything but a number above 0 and at most `most` is a usage error."""
    text = os.environ.get(name, "")
    if not text:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= most:
        raise UsageError(
            f"{name} must be a number of seconds, above 0 and at most {most:g}, not {text!r}"
        )
    return seconds
