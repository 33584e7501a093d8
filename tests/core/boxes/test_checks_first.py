"""Checks before changes: every precondition is checked before a box is
stopped or anything is built, and base ids always fit and never collide."""

from __future__ import annotations

import json
import subprocess

import pytest

from hbtui.core.foundation.basebook import BaseBook, base_id

from support import HBTUI_BIN, SIM_RECIPE

DIGEST = "sha256:" + "ab" * 32
LONG_IMAGE = f"registry.example.com/some-team/tools/ubuntu-with-everything@{DIGEST}"


def hbtui(*args: str, env: dict[str, str], input: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [HBTUI_BIN, *args], env=env, capture_output=True, text=True, input=input, timeout=300
    )


def test_base_ids_of_images_that_read_alike_differ(tmp_path):
    recipe = "0123456789ab"
    ids = {base_id(image, recipe) for image in ("ubuntu:24.04", "UBUNTU:24.04", "ubuntu/24.04")}
    assert len(ids) == 3
    assert all(i.startswith("ubuntu-24.04-") and i.endswith(recipe) for i in ids)
    assert base_id("ubuntu:24.04", recipe) == base_id("ubuntu:24.04", recipe)  # stable


@pytest.mark.parametrize(
    "image", [LONG_IMAGE, "x" * 512, "a" * 200 + ":" + "b" * 128, ":::", "/" * 40, "é" * 90]
)
def test_a_base_id_always_fits(tmp_path, image):
    assert len(LONG_IMAGE) >= 131
    ident = base_id(image, "0123456789ab")
    assert BaseBook(tmp_path).get("local", ident) is None  # a valid id: no "not a base id"


@pytest.mark.sim
def test_a_base_of_a_long_image_is_built_and_found(sim_env):
    env = {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE)}
    done = hbtui("base", "build", "-q", "--image", LONG_IMAGE, "--json", env=env)
    assert done.returncode == 0, done.stderr
    built = json.loads(done.stdout)
    assert built["image"] == LONG_IMAGE
    [listed] = json.loads(hbtui("base", "ls", "--json", env=env).stdout)
    assert listed["id"] == built["id"]
    assert hbtui("base", "verify", built["id"], env=env).returncode == 0


@pytest.mark.sim
def test_plain_branch_with_a_missing_secret_leaves_the_source_running(sim_env):
    env = {
        **sim_env,
        "HBTUI_RECIPE": str(SIM_RECIPE),
        "HBTUI_SECRETS_PASSPHRASE": "a passphrase for the tests",
    }
    assert hbtui("secrets", "set", "github", env=env, input="ghp_x\n").returncode == 0
    made = hbtui("new", "src", "-q", "--credential", "github", env=env)
    assert made.returncode == 0, made.stderr
    assert hbtui("secrets", "rm", "github", env=env).returncode == 0
    refused = hbtui("branch", "src", "child", env=env)
    assert refused.returncode != 0 and "no secret 'github'" in refused.stderr
    assert "stopping" not in refused.stdout and "quiescing" not in refused.stdout
    [box] = json.loads(hbtui("ls", "--json", env=env).stdout)
    assert (box["name"], box["state"], box["provisioning"], box["busy"]) == (
        "src",
        "running",
        "ready",
        "",
    )


@pytest.mark.sim
def test_plain_branch_to_a_taken_port_leaves_the_source_running(sim_env):
    env = {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE)}
    assert hbtui("new", "src", "-q", env=env).returncode == 0
    [box] = json.loads(hbtui("ls", "--json", env=env).stdout)
    refused = hbtui("branch", "src", "child", "--port", str(box["port"]), env=env)
    assert refused.returncode != 0 and "already used by box 'src'" in refused.stderr
    assert "not running branchable" not in refused.stdout + refused.stderr
    [box] = json.loads(hbtui("ls", "--json", env=env).stdout)
    assert (box["state"], box["provisioning"]) == ("running", "ready")


@pytest.mark.sim
def test_a_preset_named_twice_is_added_once_without_a_failed_remake(sim_env):
    """`credentials c add github github` stopped, packed and deleted the box, then the
    engine refused the machine ("credential declared twice") and the box was made again
    as it was: a remake for nothing, its processes gone. A preset named twice counts once,
    as `new --credential` already counted it."""
    env = {
        **sim_env,
        "HBTUI_RECIPE": str(SIM_RECIPE),
        "HBTUI_SECRETS_PASSPHRASE": "a passphrase for the tests",
    }
    assert hbtui("secrets", "set", "github", env=env, input="ghp_x\n").returncode == 0
    assert hbtui("new", "c", "-q", env=env).returncode == 0
    done = hbtui("credentials", "c", "add", "github", "github", "-q", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "could not make c again" not in done.stdout + done.stderr
    [box] = json.loads(hbtui("ls", "--json", env=env).stdout)
    assert box["credentials"] == ["github"] and box["state"] == "running", box


@pytest.mark.sim
def test_new_of_a_taken_name_or_port_says_only_that(sim_env):
    """`new` of a name or port another box has told its plan first ("full provisioning: no
    base ... make one for next time", "reserving a port"), then refused."""
    env = {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE)}
    assert hbtui("new", "src", "-q", env=env).returncode == 0
    [box] = json.loads(hbtui("ls", "--json", env=env).stdout)
    for argv, said in (
        (("new", "src"), "error: a box named 'src' already exists (see: hbtui ls)\n"),
        (("new", "b2", "--port", str(box["port"])), f"error: port {box['port']} is already used by box 'src'\n"),
    ):  # fmt: skip
        done = hbtui(*argv, env=env)
        assert (done.returncode, done.stdout, done.stderr) == (2, "", said)
