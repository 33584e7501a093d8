"""Bases, branches and credentials on a remote host (the simulator behind an SSH server):
a base's pack is made, hashed and removed there, beside the host's engine state, its
manifest kept here; a credential's value travels only into the remote engine's start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import SIM_RECIPE
from support.cli import KEY, PASS, ArgvWatch, files_holding, hbtui, ok, remote_machines

pytestmark = [pytest.mark.sim, pytest.mark.remote]


def test_base_build_new_and_branch_on_a_remote_host(trusted_host, tmp_path):
    env, state, _server = trusted_host
    env = dict(env, HBTUI_RECIPE=str(SIM_RECIPE))
    base = json.loads(ok(hbtui("base", "build", "--host", "r1", "-q", "--json", env=env)).stdout)
    pack = Path(base["pack"])
    assert base["host"] == "r1" and pack.is_relative_to(state / "hbtui-bases")
    assert pack.is_file() and pack.stat().st_size == base["size"]
    assert remote_machines(state) == []
    [listed] = json.loads(ok(hbtui("base", "ls", "--host", "r1", "--json", env=env)).stdout)
    assert listed["id"] == base["id"]
    assert json.loads(ok(hbtui("base", "ls", "--host", "local", "--json", env=env)).stdout) == []
    [checked] = json.loads(ok(hbtui("base", "verify", "--host", "r1", "--json", env=env)).stdout)
    assert checked["ok"] is True

    made = ok(hbtui("new", "rb1", "--host", "r1", env=env))
    assert f"from the base {base['id']}" in made.stdout
    who = ok(hbtui("exec", "rb1", "--host", "r1", "--", "cat", "/etc/hostname", env=env))
    assert who.stdout.strip() == "rb1"

    ok(hbtui("branch", "rb1", "rb2", "--host", "r1", "-q", env=env))
    boxes = {b["name"]: b for b in json.loads(ok(hbtui("ls", "--json", env=env)).stdout)}
    assert boxes["rb2"]["parent"] == "rb1" and boxes["rb2"]["provisioning"] == "ready"
    assert boxes["rb1"]["state"] == "running"
    # The pack of rb1's disk made for the branch is gone from the remote host.
    assert [p.name for p in (state / "hbtui-bases").iterdir()] == [pack.parent.name]

    ok(hbtui("base", "rm", base["id"], "--host", "r1", env=env))
    assert not pack.parent.exists()
    for name in ("rb1", "rb2"):
        ok(hbtui("rm", name, "--host", "r1", "--force", env=env))
    assert remote_machines(state) == []


def test_a_credential_on_a_remote_box_travels_only_in_the_engine_start(trusted_host):
    """The value goes over SSH on the start's stdin into the remote engine's environment:
    never into a remote argv or file; the guest sees the placeholder."""

    env, state, _server = trusted_host
    env = dict(env, HBTUI_RECIPE=str(SIM_RECIPE), HBTUI_SECRETS_PASSPHRASE=PASS)
    ok(hbtui("secrets", "set", "anthropic", input=KEY + "\n", env=env))
    with ArgvWatch(KEY) as watch:
        ok(hbtui("new", "rk1", "--host", "r1", "--credential", "anthropic", "-q", env=env))
        ok(hbtui("stop", "rk1", "--host", "r1", env=env))
        ok(hbtui("start", "rk1", "--host", "r1", env=env))
        seen = ok(
            hbtui(
                "exec", "rk1", "--host", "r1", "--", "sh", "-c", "echo $ANTHROPIC_API_KEY", env=env
            )
        ).stdout.strip()
    assert watch.samples > 20 and watch.hits == []
    assert seen.startswith("SMOL_PLACEHOLDER_ANTHROPIC_")
    assert files_holding(KEY, state, Path(env["HBTUI_HOME"])) == []
    ok(hbtui("rm", "rk1", "--host", "r1", "--force", env=env))
