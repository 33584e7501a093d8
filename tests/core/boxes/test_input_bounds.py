"""Inputs bounded where the user types them: each is refused at the door,
with its rule, before anything is made, by the CLI and the Service (the dashboard's door)."""

from __future__ import annotations

import json
import subprocess

import pytest

from hbtui.core.foundation.specs import NewSpec
from hbtui.errors import UsageError

from support import HBTUI_BIN, SIM_RECIPE


def hbtui(*args: str, env: dict[str, str], input: str | bytes = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [HBTUI_BIN, *args],
        env=env,
        capture_output=True,
        input=input,
        timeout=120,
        text=isinstance(input, str),
    )


def one_line(done: subprocess.CompletedProcess) -> str:
    err = done.stderr if isinstance(done.stderr, str) else done.stderr.decode()
    assert done.returncode != 0 and err.count("\n") == 1 and err.startswith("error: "), err
    assert len(err) < 400, err
    return err


REFUSED_NEW = [
    (["--cpus", "257"], "--cpus must be 1-256 (got 257)"),
    (["--cpus", "0"], "--cpus must be 1-256 (got 0)"),
    (["--mem", "99999999999"], "--mem must be 256-4194304 MiB"),
    (["--mem", "100"], "--mem must be 256-4194304 MiB"),
    (["--port", "0"], "--port 0: a port number is 1-65535; leave it out for a free one"),
    (["--port", "70000"], "--port 70000: a port number is 1-65535"),
    (["--image", "x" * 5000], "an image reference has at most 512"),
    (["--egress", "allow-list", "--allow", "1.2.3.4"], "'1.2.3.4': an IP address"),
    (["--egress", "allow-list", "--allow", "a" * 64 + ".example.com"], "63 between dots"),
]


@pytest.mark.sim
@pytest.mark.parametrize(("flags", "rule"), REFUSED_NEW, ids=lambda v: str(v)[:30])
def test_new_refuses_out_of_bounds_input_before_making_anything(sim_env, flags, rule):
    env = {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE)}
    err = one_line(hbtui("new", "web", *flags, env=env))
    assert rule in err
    assert json.loads(hbtui("ls", "--json", env=env).stdout) == []


@pytest.mark.sim
def test_branch_refuses_port_zero(sim_env):
    err = one_line(hbtui("branch", "src", "web", "--port", "0", env=sim_env))
    assert "--port 0: a port number is 1-65535" in err


@pytest.mark.sim
def test_base_build_refuses_an_overlong_image(sim_env):
    err = one_line(hbtui("base", "build", "--image", "u" * 5000, env=sim_env))
    assert "at most 512" in err and "(5000 characters)" in err


@pytest.mark.sim
@pytest.mark.parametrize(
    ("kwargs", "rule"),
    [
        ({"cpus": 257}, "--cpus must be 1-256"),
        ({"memory_mib": 2**40}, "--mem must be 256-"),
        ({"port": 0}, "--port 0"),
        ({"image": "y" * 5000}, "at most 512"),
        ({"egress": "allow-list", "allow": ("10.0.0.1",)}, "an IP address"),
    ],
)
async def test_the_service_refuses_them_too(sim_service, kwargs, rule):
    with pytest.raises(UsageError, match=rule):
        await sim_service.new(NewSpec("web", recipe=SIM_RECIPE, **kwargs))
    assert (await sim_service.boxes.listing()).boxes == []


# -- secret values --------------------------------------------------------------------------

SECRETS_PASS = "a passphrase for the tests"


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        (b"k" * 70_000 + b"\n", "is 70000 bytes; at most 65536"),
        (b"sk-abc\rdef\n", "holds a line break (LF or CR)"),
        (b"sk-abc\0def\n", "holds a NUL byte, which no environment variable can carry"),
        (b"sk-abc\x1b[31mdef\n", "holds a control character (U+001B)"),
        (b"\n", "is empty"),
    ],
    ids=["oversize", "CR", "NUL", "escape", "empty"],
)
def test_a_secret_value_is_checked_before_it_is_stored(hbtui_home, value, rule):
    import os

    env = {**os.environ, "HBTUI_SECRETS_PASSPHRASE": SECRETS_PASS}
    (hbtui_home / "config.toml").write_text('[secrets]\nstore = "file"\n')
    err = one_line(hbtui("secrets", "set", "github", env=env, input=value))
    assert rule in err and "nothing was stored" in err
    assert json.loads(hbtui("secrets", "ls", "--json", env=env).stdout) == []


def test_a_secret_at_the_limit_is_stored(hbtui_home):
    import os

    from hbtui.core.keys.secrets import VALUE_MAX

    env = {**os.environ, "HBTUI_SECRETS_PASSPHRASE": SECRETS_PASS}
    (hbtui_home / "config.toml").write_text('[secrets]\nstore = "file"\n')
    done = hbtui("secrets", "set", "github", env=env, input="k" * VALUE_MAX + "\r\n")
    assert done.returncode == 0, done.stderr


# -- a preset's variable ----------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["PATH", "HOME", "LD_PRELOAD", "LC_ALL", "HB_PORT"])
def test_a_preset_may_not_take_a_variable_the_box_needs(hbtui_home, variable):
    import os

    (hbtui_home / "config.toml").write_text(
        f'[credentials.mine]\nenv_var = "{variable}"\nhosts = "api.example.com"\n'
    )
    err = one_line(hbtui("ls", env=dict(os.environ)))
    assert f"{variable} is a variable the box itself needs" in err
    assert "credentials.mine.env_var" in err


def test_a_preset_of_its_own_variable_is_fine(hbtui_home):
    import os

    (hbtui_home / "config.toml").write_text(
        '[credentials.mine]\nenv_var = "MY_TOKEN"\nhosts = "api.example.com"\n'
    )
    assert hbtui("config", "show", env=dict(os.environ)).returncode == 0
