"""The archive passphrase: from the environment (once, then scrubbed) or the terminal.

Call `scrub_environment()` at CLI start, before any child process exists:
it moves `HBTUI_PASSPHRASE` (or the old tool's `BOX_PASSPHRASE`) out of
`os.environ` (so neither /proc/PID/environ of later children nor their
inherited environment hold it) into this process's memory. `get_passphrase()`
returns that value, or prompts on the controlling terminal without echo,
twice when encrypting. The passphrase is never logged, never put in argv.
"""

from __future__ import annotations

import os
import termios
from collections.abc import Callable

from hbtui.environment import SECRET_ENV, SECRETS_PASSPHRASE_ENV
from hbtui.errors import UsageError

__all__ = [
    "ENV_VARS",
    "PassphraseError",
    "PassphraseMismatch",
    "PassphraseSource",
    "PassphraseUnavailable",
    "SecretsPassphraseNeeded",
    "get_passphrase",
    "scrub_environment",
]

#: Checked in this order; both are always removed.
ENV_VARS = SECRET_ENV

_stash: bytes | None = None
_secrets_stash: bytes | None = None
_scrubbed = False


class PassphraseError(UsageError):
    """The passphrase could not be obtained or is unusable."""


class PassphraseUnavailable(PassphraseError):
    """Neither the environment nor a terminal can provide a passphrase."""


class PassphraseMismatch(PassphraseError):
    """The two entries typed when encrypting differ."""


class SecretsPassphraseNeeded(PassphraseError):
    """The secrets file is locked and this front end does not prompt on the terminal
    (the dashboard): it asks in its own way, then calls `Service.unlock_secrets`."""


PassphraseSource = Callable[[bool], bytes]  # (confirm: asked twice) -> the passphrase


def _wipe_initial_environ(names: tuple[str, ...]) -> None:
    """Zero `NAME=value` in the environment block the kernel gave this process.

    unsetenv() only drops the pointer: the original strings stay in memory and
    /proc/PID/environ (readable by the same user) keeps showing them. The block
    lies between env_start and env_end of /proc/self/stat; once unset, nothing
    refers to these entries, so overwriting them is safe. Linux only; a no-op
    elsewhere or when the block cannot be located.
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read()
        fields = stat[stat.rindex(b")") + 2 :].split()
        start, end = int(fields[50 - 3]), int(fields[51 - 3])  # proc(5): fields 50, 51
        with open("/proc/self/environ", "rb") as f:
            block = f.read()
    except (OSError, ValueError, IndexError):
        return
    if not start or end - start != len(block):
        return
    prefixes = tuple(n.encode() + b"=" for n in names)
    offset = 0
    for entry in block.split(b"\0"):
        if entry.startswith(prefixes):
            import ctypes  # only when there is a passphrase to wipe: every verb runs this

            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1


def scrub_environment() -> None:
    """Take the passphrase out of the environment (all ENV_VARS are removed,
    and wiped from this process's initial environment block)."""
    global _stash, _secrets_stash, _scrubbed
    found: bytes | None = None
    present = False
    secrets_value = os.environb.get(SECRETS_PASSPHRASE_ENV.encode())
    if secrets_value is not None:
        _secrets_stash = bytes(secrets_value)
        os.environ.pop(SECRETS_PASSPHRASE_ENV, None)
        _wipe_initial_environ((SECRETS_PASSPHRASE_ENV,))
    for name in ENV_VARS:
        value = os.environb.get(name.encode())
        if value is not None:
            present = True
            if found is None:
                found = bytes(value)
        os.environ.pop(name, None)  # also unsetenv()s it for the C library and children
    if present:
        _wipe_initial_environ(ENV_VARS)
    if found is not None:
        _stash = found
    _scrubbed = True


def _forget() -> None:
    """Drop the stashed passphrases (tests)."""
    global _stash, _secrets_stash, _scrubbed
    _stash = None
    _secrets_stash = None
    _scrubbed = False


def _read_tty_line(fd: int, prompt: bytes) -> bytes:
    old = termios.tcgetattr(fd)
    new = termios.tcgetattr(fd)
    new[3] &= ~termios.ECHO
    new[3] |= termios.ICANON
    termios.tcsetattr(fd, termios.TCSAFLUSH, new)
    try:
        os.write(fd, prompt)
        data = bytearray()
        while True:
            b = os.read(fd, 1)
            if not b or b == b"\n":  # EOF (Ctrl-D) or Enter
                break
            data += b
        if data.endswith(b"\r"):
            del data[-1]
        return bytes(data)
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, old)
        os.write(fd, b"\n")


def _prompt(tty_path: str, prompt: str, confirm: bool, env: str = SECRET_ENV[0]) -> bytes:
    unavailable = f"no passphrase: set {env} or run hbtui from a terminal"
    try:
        fd = os.open(tty_path, os.O_RDWR | os.O_NOCTTY)
    except OSError:
        raise PassphraseUnavailable(unavailable) from None
    try:
        try:
            first = _read_tty_line(fd, prompt.encode())
        except termios.error:
            raise PassphraseUnavailable(unavailable) from None
        if not first:
            raise PassphraseError("the passphrase is empty")
        if confirm:
            second = _read_tty_line(fd, b"Repeat the passphrase: ")
            if second != first:
                raise PassphraseMismatch("the two passphrases do not match")
        return first
    finally:
        os.close(fd)


def get_passphrase(
    *,
    confirm: bool,
    prompt: str = "Archive passphrase: ",
    tty_path: str = "/dev/tty",
) -> bytes:
    """The passphrase as bytes. From the environment if it was set (scrubbing
    it now if `scrub_environment()` was not called yet), else from a no-echo
    prompt on the terminal, asked twice when `confirm` (encrypting)."""
    if not _scrubbed or any(name in os.environ for name in ENV_VARS):
        scrub_environment()
    if _stash is not None:
        if not _stash:
            raise PassphraseError("the passphrase in HBTUI_PASSPHRASE is empty")
        return _stash
    return _prompt(tty_path, prompt, confirm)


def secrets_passphrase_from_environment() -> bytes | None:
    """HBTUI_SECRETS_PASSPHRASE (scrubbed like the archive's), or None when it was not set."""
    if not _scrubbed or SECRETS_PASSPHRASE_ENV in os.environ:
        scrub_environment()
    if _secrets_stash is not None and not _secrets_stash:
        raise PassphraseError(f"the passphrase in {SECRETS_PASSPHRASE_ENV} is empty")
    return _secrets_stash


def get_secrets_passphrase(*, confirm: bool, tty_path: str = "/dev/tty") -> bytes:
    """The passphrase of the encrypted secrets file: HBTUI_SECRETS_PASSPHRASE, else a
    no-echo prompt, twice when the file is new (the CLI's source)."""
    found = secrets_passphrase_from_environment()
    if found is not None:
        return found
    return _prompt(tty_path, "Secrets passphrase: ", confirm, SECRETS_PASSPHRASE_ENV)


def secrets_passphrase_without_prompt(confirm: bool) -> bytes:
    """A front end's source that never reads the terminal (the dashboard's: a prompt
    there would block its event loop): the environment's, else SecretsPassphraseNeeded."""
    found = secrets_passphrase_from_environment()
    if found is None:
        raise SecretsPassphraseNeeded(
            f"the secrets file is locked: type its passphrase, or set {SECRETS_PASSPHRASE_ENV}"
        )
    return found


def read_secret_value(prompt: str, *, tty_path: str = "/dev/tty") -> str:
    """A secret value typed without echo at the terminal (never taken from argv)."""
    try:
        return _prompt(tty_path, prompt, False).decode("utf-8", errors="strict").strip()
    except UnicodeDecodeError:
        raise PassphraseError("the value typed is not UTF-8 text") from None
