"""The keyring: every keyring failure is one line with what to do, and
`secrets rm` says only what it did, even when the keyring holding the value is unusable."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from support import HBTUI_BIN

GH = "ghp_keyringTESTtoken0123"


@pytest.fixture
def keyring_env(hbtui_home, tmp_path):
    """hbtui with the test keyring (tests/support/fake_keyring.py) as the OS keyring."""
    keyring_file = tmp_path / "os-keyring.json"
    return {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "FAKE_KEYRING_FILE": str(keyring_file),
        "PYTHON_KEYRING_BACKEND": "support.fake_keyring.FileKeyring",
        "HBTUI_SECRETS_PASSPHRASE": "a passphrase for the tests",
    }


def hbtui(*args: str, env: dict[str, str], backend: str = "", input: str = ""):
    if backend:
        env = {**env, "PYTHON_KEYRING_BACKEND": backend}
    return subprocess.run(
        [HBTUI_BIN, *args], env=env, capture_output=True, text=True, input=input, timeout=60
    )


def one_line_error(done) -> str:
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    return done.stderr


def stored(env) -> dict[str, str]:
    path = Path(env["FAKE_KEYRING_FILE"])
    return json.loads(path.read_text()) if path.exists() else {}


def listed(env) -> list[str]:
    return [s["name"] for s in json.loads(hbtui("secrets", "ls", "--json", env=env).stdout)]


@pytest.mark.parametrize(
    ("backend", "said"),
    [
        ("support.fake_keyring.LockedKeyring", "is locked, so hbtui could not store 'github'"),
        (
            "support.fake_keyring.RefusingKeyring",
            "could not store 'github': the collection is read-only",
        ),
    ],
)
def test_a_keyring_that_refuses_a_new_secret_is_one_line(keyring_env, backend, said):
    err = one_line_error(
        hbtui("secrets", "set", "github", env=keyring_env, backend=backend, input=GH + "\n")
    )
    assert said in err and '[secrets] store = "file"' in err
    assert listed(keyring_env) == []


def test_rm_of_a_secret_in_a_locked_keyring_says_the_value_stays(keyring_env):
    assert hbtui("secrets", "set", "github", env=keyring_env, input=GH + "\n").returncode == 0
    done = hbtui(
        "secrets", "rm", "github", env=keyring_env, backend="support.fake_keyring.LockedKeyring"
    )
    assert done.returncode == 0, done.stderr
    assert "forgotten" not in done.stdout and "its value was not deleted" in done.stdout
    assert "is locked" in done.stderr and done.stderr.count("\n") == 1
    assert listed(keyring_env) == [] and stored(keyring_env) == {"hbtui/github": GH}


def test_rm_says_forgotten_only_when_the_value_is_gone(keyring_env):
    assert hbtui("secrets", "set", "github", env=keyring_env, input=GH + "\n").returncode == 0
    done = hbtui("secrets", "rm", "github", env=keyring_env)
    assert done.returncode == 0 and "forgotten (its value deleted)" in done.stdout
    assert stored(keyring_env) == {} and listed(keyring_env) == []


def test_a_secret_in_a_keyring_now_unusable_can_be_set_again_and_removed(keyring_env):
    """The keyring went away (no backend): `auto` now keeps secrets in the file, and the
    messages never tell the user to choose the file store they already have."""
    assert hbtui("secrets", "set", "github", env=keyring_env, input=GH + "\n").returncode == 0
    gone = "keyring.backends.fail.Keyring"
    again = hbtui("secrets", "set", "github", env=keyring_env, backend=gone, input="ghp_new\n")
    assert again.returncode == 0, again.stderr
    assert "stored in the file" in again.stdout
    assert "former copy was not deleted" in again.stderr and "not usable here" in again.stderr
    assert 'store = "file"' not in again.stderr
    done = hbtui("secrets", "rm", "github", env=keyring_env, backend=gone)
    assert done.returncode == 0 and "forgotten (its value deleted)" in done.stdout
    assert listed(keyring_env) == []


def test_rm_of_a_value_in_an_unusable_keyring_says_where_it_stays(keyring_env):
    assert hbtui("secrets", "set", "github", env=keyring_env, input=GH + "\n").returncode == 0
    done = hbtui(
        "secrets", "rm", "github", env=keyring_env, backend="keyring.backends.fail.Keyring"
    )
    assert done.returncode == 0, done.stderr
    assert "its value was not deleted" in done.stdout
    assert "kept in the OS keyring, which is not usable here" in done.stderr
    assert 'store = "file"' not in done.stderr and listed(keyring_env) == []


def test_a_keyring_failing_with_its_own_error_is_one_line(keyring_env):
    """A platform error (D-Bus gone) reading a stored secret, as a box's start would."""
    assert hbtui("secrets", "set", "github", env=keyring_env, input=GH + "\n").returncode == 0
    script = (
        "from hbtui.wiring import build_service\n"
        "from hbtui.errors import HbtuiError\n"
        "try:\n"
        "    build_service()._ops.core.secrets.get('github')\n"
        "except HbtuiError as exc:\n"
        "    print(exc.message)\n"
    )
    env = {**keyring_env, "PYTHON_KEYRING_BACKEND": "support.fake_keyring.CrashingKeyring"}
    done = subprocess.run(
        [str(Path(HBTUI_BIN).with_name("python")), "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "ServiceUnknown" in done.stdout and "hbtui secrets set github" in done.stdout
    assert "Traceback" not in done.stderr


def test_a_keyring_set_explicitly_but_missing_says_to_choose_another_store(keyring_env):
    (Path(keyring_env["HBTUI_HOME"]) / "config.toml").write_text('[secrets]\nstore = "keyring"\n')
    err = one_line_error(
        hbtui(
            "secrets",
            "set",
            "github",
            env=keyring_env,
            backend="keyring.backends.fail.Keyring",
            input=GH + "\n",
        )
    )
    assert 'no usable OS keyring here; set [secrets] store = "auto"' in err
