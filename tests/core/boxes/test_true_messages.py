"""Messages that are true: what hbtui says matches what happened."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess

import pytest

from support import HBTUI_BIN, SIM_RECIPE, tiny_fs
from support.cli import hbtui

SIGPIPE_STATUS = 128 + signal.SIGPIPE


def with_reader_gone(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`hbtui ARGS | head -0`, without the race: the pipe's reader is closed before hbtui
    starts, so its first write to stdout finds nobody to read it."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [HBTUI_BIN, *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=300,
        )
    finally:
        os.close(write_end)


QUIET_WITHOUT_A_BOX = [
    ("config", "show"),
    ("config", "path"),
    ("doctor",),
    ("doctor", "--json"),
    ("ls",),
    ("ls", "--json"),
    ("ports",),
    ("ports", "--json"),
    ("version",),
    ("base", "ls"),
    ("base", "ls", "--json"),
    ("secrets", "ls"),
    ("secrets", "ls", "--json"),
    ("hosts", "ls"),
    ("hosts", "ls", "--json"),
]


@pytest.mark.sim
@pytest.mark.parametrize("argv", QUIET_WITHOUT_A_BOX, ids=" ".join)
def test_a_reader_that_leaves_ends_hbtui_quietly(sim_env, argv):
    done = with_reader_gone(*argv, env=sim_env)
    assert (done.returncode, done.stderr) == (SIGPIPE_STATUS, "")


@pytest.mark.parametrize("argv", [("--help",), ("ls", "--help"), ("base", "--help")], ids=" ".join)
def test_help_into_a_closed_pipe_is_quiet(hbtui_home, argv):
    done = with_reader_gone(*argv, env=dict(os.environ))
    assert done.stderr == "" and done.returncode in (0, SIGPIPE_STATUS)


def test_an_error_is_still_told_when_stdout_is_gone(hbtui_home):
    done = with_reader_gone("inspect", "nope", env=dict(os.environ))
    assert done.returncode == 1 and done.stderr == "error: no box named 'nope' (see: hbtui ls)\n"


@pytest.mark.sim
def test_an_operation_whose_reader_leaves_still_ends_whole(sim_env):
    """`hbtui new web | head -1`: the progress has nowhere to go, the box is made all the
    same (never half-made) and its status says so; what the box commands print then is
    quiet too."""
    made = with_reader_gone("new", "web", "--recipe", str(SIM_RECIPE), env=sim_env)
    assert (made.returncode, made.stderr) == (0, "")
    listed = subprocess.run(
        [HBTUI_BIN, "ls", "--json"], env=sim_env, capture_output=True, text=True, check=True
    )
    [box] = json.loads(listed.stdout)
    assert (box["name"], box["provisioning"]) == ("web", "ready")
    for argv in (("inspect", "web"), ("ls",), ("logs", "web", "--provision"), ("ports",)):
        done = with_reader_gone(*argv, env=sim_env)
        assert (done.returncode, done.stderr) == (SIGPIPE_STATUS, ""), argv


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_stopped_box_has_no_services_to_return(hbtui_home):
    """An interrupted operation left a quiesce lease: a running box's services come back
    when it lapses, but a stopped box has none to come back (start resumes them)."""
    import time

    from hbtui.wiring import build_service

    service = build_service()
    boxes = service._ops.core
    boxes.paths.ensure()
    boxes.locks.folder.mkdir(parents=True, exist_ok=True)
    record = {
        "operation": "stop",
        "pid": _dead_pid(),
        "since": time.time() - 5,
        "quiesced_until": time.time() + 600,
    }
    boxes.locks.path("local", "web").write_text(json.dumps(record))
    busy = boxes.busy("web", "local", "running")
    assert busy is not None and not busy.held and busy.lease_end == record["quiesced_until"]
    assert str(busy).startswith("quiesced: stop was interrupted")
    assert boxes.busy("web", "local", "stopped") is None


def _stale_base_of(recipe_dir, sim_service) -> None:
    """A manifest of a base of `recipe_dir` built from an older version of it."""
    from hbtui.core.foundation.basebook import Base

    base = Base(
        id="ubuntu-24.04-000000000000",
        host="local",
        image="ubuntu:24.04",
        recipe="000000000000",
        recipe_dir=str(recipe_dir),
        versions="",
        engine="1.0",
        pack="/nowhere/base.smolmachine",
        size=1,
        sha256="0" * 64,
        created="2024-01-01",
    )
    sim_service._ops.core.bases.put(base)


@pytest.mark.sim
def test_the_base_hints_name_the_recipe_they_need(sim_service, sim_env, tmp_path):
    import shutil

    recipe = tmp_path / "my recipe"
    shutil.copytree(SIM_RECIPE, recipe)
    plain = sim_service.boxes.plan(recipe=recipe)
    assert f"hbtui base build --image ubuntu:24.04 --recipe '{recipe}'" in plain.hint
    _stale_base_of(recipe, sim_service)
    stale = sim_service.boxes.plan(recipe=recipe)
    assert stale.stale
    assert f"rebuild it: hbtui base build --image ubuntu:24.04 --recipe '{recipe}';" in stale.hint
    refused = subprocess.run(
        [HBTUI_BIN, "new", "s1", "--recipe", str(recipe)],
        env=sim_env,
        capture_output=True,
        text=True,
    )
    assert refused.returncode != 0 and f"--recipe '{recipe}'" in refused.stderr
    # The recipe a verb uses by itself needs no flag.
    usual = subprocess.run(
        [HBTUI_BIN, "new", "s1"],
        env={**sim_env, "HBTUI_RECIPE": str(recipe)},
        capture_output=True,
        text=True,
    )
    assert "--recipe" not in usual.stderr and "hbtui base build --image ubuntu:24.04" in (
        usual.stderr
    )


async def _orphan(service, name: str) -> None:
    """The box's row goes; its machine stays (as after a lost registry)."""
    async with service._ops.core.registry.transaction() as boxes:
        boxes.remove(name)


@pytest.mark.sim
async def test_an_adopted_box_shows_the_policy_it_has(sim_service, sim_env):
    env = {**sim_env, "HBTUI_SECRETS_PASSPHRASE": "a passphrase for the tests"}
    run = dict(env=env, capture_output=True, text=True)
    done = subprocess.run([HBTUI_BIN, "secrets", "set", "github"], input="ghp_x\n", **run)
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [
            HBTUI_BIN,
            "new",
            "web",
            "-q",
            "--recipe",
            str(SIM_RECIPE),
            "--credential",
            "github",
            "--egress",
            "allow-list",
            "--allow",
            "api.example.com",
        ],
        **run,
    )
    assert done.returncode == 0, done.stderr
    await _orphan(sim_service, "web")
    assert subprocess.run([HBTUI_BIN, "adopt", "web"], **run).returncode == 0
    egress = json.loads(subprocess.run([HBTUI_BIN, "egress", "web", "--json"], **run).stdout)
    assert egress["egress"] == "allow-list"
    assert set(egress["allow"]) == {"api.example.com", "github.com", "api.github.com"}
    keys = json.loads(subprocess.run([HBTUI_BIN, "credentials", "web", "--json"], **run).stdout)
    assert [c["preset"] for c in keys["credentials"]] == ["github"] and keys["known"]


@pytest.mark.sim
async def test_a_machine_that_does_not_say_is_adopted_as_unknown(sim_service, sim_env):
    """A machine made without hbtui's policy labels: neither open nor without keys."""
    from hbtui.engine import MachineSpec

    host = await sim_service._ops.core.hosts.get()
    await host.engine.create(
        MachineSpec(
            name="old",
            image="ubuntu:24.04",
            cpus=1,
            memory_mib=512,
            labels=(("hbtui", "1"), ("hbtui.port", "4901")),
        )
    )
    run = dict(env=sim_env, capture_output=True, text=True)
    assert subprocess.run([HBTUI_BIN, "adopt", "old"], **run).returncode == 0
    shown = subprocess.run([HBTUI_BIN, "egress", "old"], **run).stdout
    assert "unknown" in shown and "open" not in shown
    keys = subprocess.run([HBTUI_BIN, "credentials", "old"], **run).stdout
    assert "does not say which credentials" in keys and "has no credentials" not in keys
    inspected = json.loads(subprocess.run([HBTUI_BIN, "inspect", "old", "--json"], **run).stdout)
    assert inspected["sections"]["Keys and network"]["credentials"] == "unknown (adopted)"
    # Made again, it would lose the policy it has: credentials add/rm refuse, change nothing.
    changed = subprocess.run([HBTUI_BIN, "credentials", "old", "add", "github"], **run)
    assert changed.returncode != 0 and "egress policy of 'old' is unknown" in changed.stderr
    assert "Traceback" not in changed.stderr
    again = subprocess.run([HBTUI_BIN, "egress", "old", "--json"], **run).stdout
    assert json.loads(again)["egress"] == "unknown"


# -- the engine's own words: timeouts and multi-line failures -----------------------------


def test_a_timeout_names_the_whole_command():
    from hbtui.engine.runner import RunTimeout

    argv = [
        "/opt/x/smolvm",
        "--error-format",
        "json",
        "--state-dir",
        "/s",
        "machine",
        "exec",
        "--name",
        "web",
        "--",
        "sh",
        "-c",
        "echo a b",
    ]
    assert str(RunTimeout(argv, 120)) == (
        "timed out after 120s: smolvm machine exec --name web -- sh -c 'echo a b'"
    )


class Recording:
    """A runner that records each call's timeout and succeeds at once."""

    def __init__(self) -> None:
        self.timeouts: list[float | None] = []

    async def run(self, command):
        from hbtui.engine.runner import Completed

        self.timeouts.append(command.timeout)
        return Completed(command.argv, 0, b"", b"")


@pytest.mark.parametrize(
    ("configured", "start", "pack"), [(120, 180, 1800), (900, 900, 1800), (7200, 7200, 7200)]
)
async def test_the_configured_timeout_reaches_start_branch_and_pack(configured, start, pack):
    from pathlib import Path

    from hbtui.engine import Engine

    runner = Recording()
    engine = Engine("smolvm", runner=runner, timeout=configured)
    await engine.start("web")
    await engine.branch("web", "web2")
    await engine.pack("web", Path("/tmp/nowhere/web"))
    await engine.stop("web")
    assert runner.timeouts == [start, start, pack, configured]


async def test_a_timeout_says_which_setting_to_raise():
    from hbtui.engine import Engine, EngineTimeout
    from hbtui.engine.runner import RunTimeout

    class Slow(Recording):
        async def run(self, command):
            raise RunTimeout(command.argv, command.timeout)

    with pytest.raises(EngineTimeout) as caught:
        await Engine("smolvm", runner=Slow(), timeout=45).stop("web")
    assert caught.value.message == "timed out after 45s: smolvm machine stop --name web"
    assert "[engine] timeout (now 45 s)" in caught.value.hint


def test_a_multi_line_engine_failure_keeps_what_failed_and_why():
    from hbtui.engine.errors import from_stderr

    stderr = (
        "note: using /var/lib/smolvm\n"
        "Error: failed to start machine 'web'\n\nCaused by:\n"
        "    0: could not open the disk\n    1: Permission denied (os error 13)\n"
    )
    error = from_stderr(stderr, ["smolvm"], 1)
    assert error.message == (
        "failed to start machine 'web': could not open the disk: Permission denied (os error 13)"
    )
    assert from_stderr("", ["smolvm"], 3).message == "engine exited with status 3"
    crash = 'Traceback (most recent call last):\n  File "x", line 1\n    f()\nOSError: boom\n'
    assert from_stderr(crash, ["smolvm"], 1).message == "OSError: boom"
    long = from_stderr("x" * 5000 + "\nthe cause\n", ["smolvm"], 1).message
    assert long.endswith(": the cause") and len(long) <= 1001


# -- a full disk names the file -----------------------------------------------------------


def fill(folder) -> None:
    """Write into `folder` until its file system has no space left."""
    with open(folder / "filler", "ab", buffering=0) as fh, contextlib.suppress(OSError):
        while True:
            fh.write(b"\0" * 1024)


@pytest.fixture
def full_folder(tmp_path):
    """A folder on a tiny file system of its own (a tmpfs), to be filled."""
    with tiny_fs(tmp_path / "full") as folder:
        yield folder


def test_a_base_manifest_on_a_full_disk_names_its_file(full_folder):
    from hbtui.core.foundation.basebook import Base, BaseBook

    (full_folder / "local").mkdir(mode=0o700)
    fill(full_folder)
    base = Base(
        id="ubuntu-24.04-000000000000",
        host="local",
        image="ubuntu:24.04",
        recipe="000000000000",
        recipe_dir="/r",
        versions="v" * 20000,
        engine="1",
        pack="/p/base.smolmachine",
        size=1,
        sha256="0" * 64,
        created="2024",
    )
    with pytest.raises(OSError) as caught:
        BaseBook(full_folder).put(base)
    assert caught.value.errno == errno.ENOSPC
    assert str(full_folder / "local") in str(caught.value.filename)


def test_a_provision_log_on_a_full_disk_names_its_file(full_folder):
    from hbtui.paths import naming

    log = full_folder / "provision.log"
    fill(full_folder)
    with pytest.raises(OSError) as caught, open(log, "a") as fh, naming(log):
        fh.write("x" * 100_000)
        fh.flush()
    assert (caught.value.errno, caught.value.filename) == (errno.ENOSPC, str(log))


# -- "interrupted" only when the work was not done ------------------------------------------


@pytest.mark.sim
def test_ctrl_c_while_the_source_starts_again_is_not_interrupted(sim_env, tmp_path):
    """The branch is made; Ctrl-C while its source runs again does not make it a failure."""
    env = {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE)}
    made = subprocess.run([HBTUI_BIN, "new", "src", "-q"], env=env, capture_output=True)
    assert made.returncode == 0, made.stderr
    branching = subprocess.Popen(
        [HBTUI_BIN, "branch", "src", "child"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = []
    for line in branching.stdout:
        seen.append(line)
        if "starting src again" in line:
            branching.send_signal(signal.SIGINT)
            break
    _rest, err = branching.communicate(timeout=300)
    assert any("starting src again" in line for line in seen), seen
    assert branching.returncode == 0 and "interrupted" not in err, err
    listed = subprocess.run([HBTUI_BIN, "ls", "--json"], env=env, capture_output=True, text=True)
    states = {b["name"]: (b["state"], b["provisioning"]) for b in json.loads(listed.stdout)}
    assert states == {"src": ("running", "ready"), "child": ("running", "ready")}


@pytest.mark.sim
def test_a_preset_whose_variable_changed_is_shown_as_the_box_has_it(sim_env, hbtui_home):
    config = hbtui_home / "config.toml"
    config.write_text('[credentials.mine]\nenv_var = "MINE_OLD"\nhosts = "api.example.com"\n')
    env = {**sim_env, "HBTUI_SECRETS_PASSPHRASE": "a passphrase for the tests"}
    run = dict(env=env, capture_output=True, text=True)
    assert subprocess.run([HBTUI_BIN, "secrets", "set", "mine"], input="v\n", **run).returncode == 0
    made = subprocess.run(
        [HBTUI_BIN, "new", "web", "-q", "--recipe", str(SIM_RECIPE), "--credential", "mine"], **run
    )
    assert made.returncode == 0, made.stderr
    config.write_text('[credentials.mine]\nenv_var = "MINE_NEW"\nhosts = "api.example.com"\n')
    keys = json.loads(subprocess.run([HBTUI_BIN, "credentials", "web", "--json"], **run).stdout)
    assert keys["credentials"][0]["env_var"] == "MINE_OLD" and keys["rebound"] == {
        "mine": "MINE_OLD"
    }
    shown = subprocess.run([HBTUI_BIN, "credentials", "web"], **run)
    assert "mine: MINE_OLD for api.example.com" in shown.stdout
    assert "the preset now says MINE_NEW" in shown.stderr
    assert "hbtui credentials web rm mine, then add mine" in shown.stderr


@pytest.mark.sim
async def test_a_box_whose_preset_variable_changed_starts_with_its_own_binding(
    sim_env, hbtui_home, monkeypatch
):
    """The engine reads a credential's value from the variable the machine was made with:
    start hands the value over under that name, not the preset's new one."""
    config = hbtui_home / "config.toml"
    config.write_text('[credentials.mine]\nenv_var = "MINE_OLD"\nhosts = "api.example.com"\n')
    monkeypatch.setenv("HBTUI_SECRETS_PASSPHRASE", "a passphrase for the tests")
    from hbtui.core.foundation.specs import NewSpec
    from hbtui.wiring import build_service

    service = build_service()
    service.secrets.set("mine", "the-value")
    await service.new(NewSpec("web", recipe=SIM_RECIPE, credentials=("mine",)))
    await service.boxes.stop("web")
    config.write_text('[credentials.mine]\nenv_var = "MINE_NEW"\nhosts = "api.example.com"\n')
    service = build_service()
    host = await service._ops.core.hosts.get()
    handed: list[dict[str, str]] = []
    real_start = host.engine.start

    async def start(name, **kwargs):
        handed.append(dict(kwargs.get("secrets") or {}))
        return await real_start(name, **kwargs)

    monkeypatch.setattr(host.engine, "start", start)
    await service.boxes.start("web")
    assert handed == [{"MINE_OLD": "the-value"}]


@pytest.mark.sim
@pytest.mark.parametrize("argv", [("agents", "nope"), ("diff", "nope"), ("start", "nope")])
def test_every_verb_says_no_box_named_the_same_way(sim_env, argv):
    """`agents nope` said it with a semicolon and exit status 2, unlike every other verb."""
    done = hbtui(*argv, env=sim_env)
    assert (done.returncode, done.stderr) == (1, "error: no box named 'nope' (see: hbtui ls)\n")
