"""hbtui.core.keys.passphrase: environment scrubbing and the no-echo terminal prompt."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import termios
import threading

import pytest

from hbtui.core.keys import passphrase as P


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    for name in P.ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    P._forget()
    yield
    P._forget()


def test_env_read_and_removed(monkeypatch):
    monkeypatch.setenv("HBTUI_PASSPHRASE", "s3cret pässword")
    monkeypatch.setenv("BOX_PASSPHRASE", "old")
    P.scrub_environment()
    assert "HBTUI_PASSPHRASE" not in os.environ and "BOX_PASSPHRASE" not in os.environ
    # children do not inherit it (unsetenv happened, not just a dict update)
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(sorted(os.environ))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "PASSPHRASE" not in out
    assert P.get_passphrase(confirm=True) == "s3cret pässword".encode()


def test_old_tool_variable(monkeypatch):
    monkeypatch.setenv("BOX_PASSPHRASE", "legacy")
    assert P.get_passphrase(confirm=False) == b"legacy"
    assert "BOX_PASSPHRASE" not in os.environ


def test_get_scrubs_even_without_explicit_call(monkeypatch):
    monkeypatch.setenv("HBTUI_PASSPHRASE", "x1")
    assert P.get_passphrase(confirm=False) == b"x1"
    assert "HBTUI_PASSPHRASE" not in os.environ


def test_empty_env_refused(monkeypatch):
    monkeypatch.setenv("HBTUI_PASSPHRASE", "")
    with pytest.raises(P.PassphraseError):
        P.get_passphrase(confirm=False)


def test_no_terminal_no_env(tmp_path):
    with pytest.raises(P.PassphraseUnavailable) as ei:
        P.get_passphrase(confirm=False, tty_path=str(tmp_path / "no-tty"))
    assert "HBTUI_PASSPHRASE" in str(ei.value)


def _answer(master: int, answers: list[bytes], transcript: bytearray) -> None:
    """Play the user: wait for each prompt, type the answer."""
    for i, ans in enumerate(answers):
        while transcript.count(b": ") <= i:
            transcript.extend(os.read(master, 1024))
        os.write(master, ans)


def _prompt_with(answers: list[bytes], confirm: bool):
    master, slave = pty.openpty()
    transcript = bytearray()
    t = threading.Thread(target=_answer, args=(master, answers, transcript), daemon=True)
    t.start()
    try:
        return P.get_passphrase(confirm=confirm, tty_path=os.ttyname(slave)), transcript, slave
    finally:
        t.join(5)
        os.set_blocking(master, False)
        try:
            while chunk := os.read(master, 1024):
                transcript.extend(chunk)
        except (BlockingIOError, OSError):
            pass
        # the terminal's echo setting is restored
        assert termios.tcgetattr(slave)[3] & termios.ECHO
        os.close(master)
        os.close(slave)


def test_prompt_twice_when_encrypting():
    got, transcript, _ = _prompt_with([b"hunter2 hunter2\n", b"hunter2 hunter2\n"], confirm=True)
    assert got == b"hunter2 hunter2"
    assert b"Repeat" in transcript
    assert b"hunter2" not in transcript  # not echoed


def test_prompt_once_when_decrypting():
    got, transcript, _ = _prompt_with([b"abc\n"], confirm=False)
    assert got == b"abc" and b"Repeat" not in transcript


def test_prompt_mismatch():
    with pytest.raises(P.PassphraseMismatch):
        _prompt_with([b"one\n", b"two\n"], confirm=True)


def test_prompt_empty_refused():
    with pytest.raises(P.PassphraseError):
        _prompt_with([b"\n"], confirm=False)


def test_proc_environ_is_wiped():
    """/proc/PID/environ shows the exec-time block: it must not keep the secret."""
    code = (
        "import sys; from hbtui.core.keys.passphrase import scrub_environment, get_passphrase\n"
        "before = open('/proc/self/environ','rb').read()\n"
        "scrub_environment()\n"
        "after = open('/proc/self/environ','rb').read()\n"
        "assert b'wipe-me-0451' in before, 'setup'\n"
        "assert b'wipe-me-0451' not in after and b'old-0451' not in after, after\n"
        "assert b'HBTUI_KEEP=yes' in after\n"
        "assert get_passphrase(confirm=False) == b'wipe-me-0451'\n"
    )
    env = dict(
        os.environ, HBTUI_PASSPHRASE="wipe-me-0451", BOX_PASSPHRASE="old-0451", HBTUI_KEEP="yes"
    )
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
