"""A box's disk is never only in scratch: `credentials add` SIGKILLed at each step of its
remake (and a remake whose engine disk fills up) leaves a box the next run gets back,
with its /data, through `hbtui repair` where the machine was deleted. The other
operations that stop or pack a box (branch, base build) leave the box it started from
as it was, and nothing the next run does not remove.

The simulator's gates (SMOLSIM_GATES) hold the engine at an exact step; the test kills
hbtui there, then lets the engine command go on (as an engine command outlives a killed
hbtui) or kills it too."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from hbtui.environment import pid_alive

from support import SIM_RECIPE, recipe_with
from support.cli import (
    background,
    hbtui,
    in_box,
    ls,
    machines,
    one_line_error,
    run_ok,
    tmpfs,
    wait_for,
)
from support.work import LIVE_AGENT, host_repo

pytestmark = pytest.mark.sim

NOTE = "/data/home/agent/workspace/note"


@pytest.fixture
def gated_env(sim_env, tmp_path):

    gates = tmp_path / "gates"
    gates.mkdir()
    env = {
        **sim_env,
        "HBTUI_RECIPE": str(SIM_RECIPE),
        "HBTUI_SECRETS_PASSPHRASE": "remake",
        "SMOLSIM_GATES": str(gates),
    }
    run_ok("secrets", "set", "github", env=env, input="ghp_remakeTEST\n")
    return env


@pytest.fixture
def remake_env(gated_env):
    """A running box c1 with a file in its /data."""
    _make_box(gated_env)
    return gated_env


def _make_box(env: dict[str, str]) -> None:
    done = hbtui("new", "c1", "-q", env=env)
    assert done.returncode == 0, done.stderr
    in_box("c1", "sh", "-c", f"echo kept > {NOTE}", env=env)


def _hold(env: dict[str, str], point: str) -> Path:
    hold = Path(env["SMOLSIM_GATES"]) / f"{point}.hold"
    hold.touch()
    return hold


def _kill_at(
    env: dict[str, str],
    point: str,
    *,
    engine_goes_on: bool,
    command: tuple[str, ...] = ("credentials", "c1", "add", "github"),
) -> None:
    """Run `command`, SIGKILL it when the engine reaches `point`."""
    hold = _hold(env, point)
    waiting = hold.with_suffix(".waiting")
    adding = background(*command, env=env)
    wait_for(f"the engine to reach {point}", lambda: waiting.exists() or adding.poll() is not None)
    assert adding.poll() is None, adding.communicate()[0]
    engine = int(waiting.read_text())
    adding.kill()
    adding.communicate(timeout=30)
    if engine_goes_on:
        hold.unlink()
    else:
        os.kill(engine, signal.SIGKILL)
        hold.unlink()
    wait_for("the engine command to end", lambda: not pid_alive(engine))


def _remakes_left(env: dict[str, str]) -> list[Path]:
    home = Path(env["HBTUI_HOME"])
    packs = list((home / "bases" / "local").glob(".remake-*"))
    return packs + list((home / "remakes").glob("*"))


def _credentials_bound(env: dict[str, str]) -> bool:
    path = Path(env["HBTUI_SMOLVM_STATE_DIR"]) / "smolsim" / "machines" / "c1" / "machine.json"
    return "github" in json.dumps(json.loads(path.read_text()).get("credential_policy", {}))


def _back_with_its_data(env: dict[str, str], *, only_box: bool = True) -> dict:
    """The box runs, its /data is there, and the registry says what the machine has."""
    done = hbtui("start", "c1", env=env)  # resumes what a killed operation quiesced
    assert done.returncode == 0, done.stderr
    box = ls(env)["c1"]
    assert box["state"] == "running" and not box["busy"], box
    assert in_box("c1", "cat", NOTE, env=env) == "kept"
    if only_box:
        assert machines(env) == ["c1"]
    assert ("github" in box["credentials"]) == _credentials_bound(env), box
    assert _remakes_left(env) == []
    return box


@pytest.mark.parametrize(
    ("point", "engine_goes_on"),
    [
        ("stop", True),  # quiesced, then stopped by the engine after hbtui died
        ("pack", True),  # a pack made into its folder, but no journal entry yet
    ],
)
def test_killed_before_the_machine_is_deleted_the_box_is_untouched(
    remake_env, point, engine_goes_on
):
    _kill_at(remake_env, point, engine_goes_on=engine_goes_on)
    # The next run sweeps a pack no journal names; the box needs no repair.
    box = ls(remake_env)["c1"]
    assert "repair" not in box["busy"], box
    box = _back_with_its_data(remake_env)
    assert box["credentials"] == []


@pytest.mark.parametrize(
    ("point", "engine_goes_on"),
    [
        ("delete", False),  # journalled; the machine is not deleted
        ("delete", True),  # the machine is deleted; nothing made yet
        ("create", True),  # the new machine made; the registry and journal not updated
    ],
)
def test_killed_once_journalled_the_box_comes_back_with_repair(remake_env, point, engine_goes_on):
    _kill_at(remake_env, point, engine_goes_on=engine_goes_on)
    box = ls(remake_env)["c1"]
    assert "hbtui repair c1" in box["busy"], box
    # Anything else is refused with the way out, and nothing is changed by it.
    refused = hbtui("start", "c1", env=remake_env)
    one_line_error(refused, "pid", "safe")
    assert "hbtui repair c1" in refused.stderr
    refused = hbtui("credentials", "c1", "add", "github", env=remake_env)
    one_line_error(refused, "safe")
    done = hbtui("repair", "c1", env=remake_env)
    assert done.returncode == 0, done.stdout + done.stderr
    box = _back_with_its_data(remake_env)
    assert box["credentials"] == ["github"]


def test_rm_of_a_box_waiting_for_repair_removes_its_kept_disk(remake_env):
    _kill_at(remake_env, "delete", engine_goes_on=True)
    done = hbtui("rm", "c1", "--force", env=remake_env)
    assert done.returncode == 0, done.stderr
    assert "c1" not in ls(remake_env) and machines(remake_env) == []
    assert _remakes_left(remake_env) == []


def test_a_remake_whose_engine_disk_fills_keeps_the_disk_for_repair(gated_env):
    """The engine cannot make the machine again (neither as asked nor as it was): the box's
    disk stays in its pack, the error says so and names `hbtui repair`, which finishes
    once there is room."""
    state = Path(gated_env["HBTUI_SMOLVM_STATE_DIR"])
    with tmpfs(state, "400m"):
        _make_box(gated_env)
        hold = _hold(gated_env, "create")
        adding = background("credentials", "c1", "add", "github", env=gated_env)
        waiting = hold.with_suffix(".waiting")
        wait_for("the engine to make the machine", lambda: waiting.exists() or adding.poll())
        filler = state / "filler"
        with open(filler, "wb") as fh:  # the engine's disk is full from here on
            try:
                while True:
                    fh.write(b"\0" * (1 << 20))
                    fh.flush()
            except OSError:
                pass
        hold.unlink()
        out = adding.communicate(timeout=120)[0]
        assert adding.returncode != 0, out
        assert "Traceback" not in out, out
        assert "No space left" in out and "kept in" in out and "hbtui repair c1" in out, out
        assert machines(gated_env) == []
        assert "hbtui repair c1" in ls(gated_env)["c1"]["busy"]
        filler.unlink()
        done = hbtui("repair", "c1", env=gated_env)
        assert done.returncode == 0, done.stdout + done.stderr
        _back_with_its_data(gated_env)
        hbtui("rm", "c1", "--force", env=gated_env)


def test_credentials_rm_drops_the_hosts_only_it_needed_from_an_allow_list(gated_env):
    done = hbtui(
        "new", "a1", "-q", "--egress", "allow-list", "--allow", "pypi.org",
        "--credential", "github", env=gated_env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(hbtui("egress", "a1", "--json", env=gated_env).stdout)
    assert "api.github.com" in record["allow"], record
    done = hbtui("credentials", "a1", "rm", "github", env=gated_env)
    assert done.returncode == 0, done.stderr
    record = json.loads(hbtui("egress", "a1", "--json", env=gated_env).stdout)
    assert record["allow"] == ["pypi.org"], record
    assert ls(gated_env)["a1"]["credentials"] == []


@pytest.mark.parametrize("point", ["pack", "create"])
def test_a_killed_branch_leaves_its_source_whole(remake_env, point):
    _kill_at(remake_env, point, engine_goes_on=True, command=("branch", "c1", "c2"))
    box = _back_with_its_data(remake_env, only_box=False)
    assert box["credentials"] == []
    left = ls(remake_env).get("c2")
    if left is not None:  # a half-made child is failed, and goes with rm
        assert left["provisioning"] == "failed", left
        assert hbtui("rm", "c2", "--force", env=remake_env).returncode == 0
    assert machines(remake_env) == ["c1"]
    assert list(Path(remake_env["HBTUI_HOME"], "scratch").glob("branch-*")) == []


def test_a_killed_base_build_leaves_no_pack_once_hbtui_runs_again(gated_env):
    _kill_at(gated_env, "pack", engine_goes_on=True, command=("base", "build"))
    bases = Path(gated_env["HBTUI_HOME"]) / "bases" / "local"
    assert [p for p in bases.iterdir() if p.is_dir()], "the build made its pack folder"
    done = hbtui("base", "ls", env=gated_env)
    assert done.returncode == 0, done.stderr
    assert [p for p in bases.iterdir() if p.is_dir()] == []
    # The builder box is left failed, not half-working, and goes with rm.
    builders = [name for name in ls(gated_env) if name.startswith("base-")]
    assert len(builders) == 1 and ls(gated_env)[builders[0]]["provisioning"] == "failed"
    assert hbtui("rm", builders[0], "--force", env=gated_env).returncode == 0


def test_a_killed_repair_leaves_a_box_repair_finishes(remake_env):
    repairing = background("repair", "c1", env=remake_env)
    assert repairing.stdout is not None
    for line in repairing.stdout:  # killed while the recipe runs in the box
        if "step 1/" in line:
            break
    repairing.kill()
    repairing.communicate(timeout=30)
    assert ls(remake_env)["c1"]["provisioning"] == "failed"  # its process is gone: honest
    done = hbtui("repair", "c1", env=remake_env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ls(remake_env)["c1"]["provisioning"] == "ready"
    _back_with_its_data(remake_env)


def test_a_change_interrupted_once_the_box_is_made_again_says_it_was_made(remake_env):
    """Ctrl-C while the machine was made again: the remake ran to its end (as it must),
    the box came back with github, and hbtui said "interrupted", exit status 130."""
    hold = _hold(remake_env, "create")
    adding = background("credentials", "c1", "add", "github", env=remake_env)
    waiting = hold.with_suffix(".waiting")
    wait_for("the engine to make c1 again", lambda: waiting.exists() or adding.poll() is not None)
    adding.send_signal(signal.SIGINT)
    hold.unlink()
    out = adding.communicate(timeout=120)[0]
    bound = "github" in ls(remake_env)["c1"]["credentials"]
    assert (adding.returncode, bound) in ((0, True), (130, False)), out
    assert bound, out  # the remake was past its point of no return
    _back_with_its_data(remake_env)


# ---- work: a repository going in, a try's boxes being made ---------------------------------


def test_a_new_killed_while_its_repository_goes_in_is_failed_not_ready(gated_env, tmp_path):
    """SIGKILLed as the seed bundle was copied in, `new --repo` left a box "ready" without
    its clone; it is failed now (saying why), and `rm` takes it."""
    repo = host_repo(tmp_path)
    _kill_at(
        gated_env, "cp-seed-0.bundle", engine_goes_on=True,
        command=("new", "w", "-q", "--repo", str(repo)),
    )  # fmt: skip
    box = ls(gated_env)["w"]
    assert box["provisioning"] == "failed", box
    done = hbtui("start", "w", env=gated_env)
    assert done.returncode != 0
    assert "its repository never went in; remove it (hbtui rm w)" in one_line_error(done)
    assert "never went in" in one_line_error(hbtui("repair", "w", env=gated_env))
    assert hbtui("rm", "w", "--force", env=gated_env).returncode == 0
    assert machines(gated_env) == []


@pytest.mark.parametrize(
    "command",
    [("new", "w", "-q", "--repo", "REPO"), ("try", "1", "w", "--repo", "REPO", "--task", "x")],
)
def test_a_work_box_killed_before_it_is_provisioned_is_not_repaired_without_its_work(
    gated_env, tmp_path, command
):
    """SIGKILLed while its machine was made (before its repository could go in), a
    `new --repo` or a try left a failed box that `repair` made "ready" without a clone:
    `diff` then said "not made with a repository (hbtui new NAME --repo PATH)". It says
    its repository never went in, as one killed later does, and `rm` takes it."""
    repo = host_repo(tmp_path)
    argv = tuple(str(repo) if arg == "REPO" else arg for arg in command)
    _kill_at(gated_env, "create", engine_goes_on=True, command=argv)
    box = "w" if command[0] == "new" else "w-1"
    assert ls(gated_env)[box]["provisioning"] == "failed"
    for verb in (("repair", box), ("diff", box)):
        assert "its repository never went in; remove it" in one_line_error(
            hbtui(*verb, env=gated_env)
        )
    assert ls(gated_env)[box]["provisioning"] == "failed"
    assert hbtui("rm", box, "--force", env=gated_env).returncode == 0
    assert machines(gated_env) == []


def test_a_try_killed_while_its_boxes_are_made_still_lists_them(gated_env, tmp_path):
    """SIGKILLed while its boxes were made, `try` left them with no try record: nothing
    listed them as a try, `try keep` did not know them. The record is written first."""
    repo = host_repo(tmp_path)
    _kill_at(
        gated_env, "cp-seed-0.bundle", engine_goes_on=True,
        command=("try", "1", "t", "--repo", str(repo), "--agent", "claude", "--task", "x"),
    )  # fmt: skip
    assert ls(gated_env)["t-1"]["provisioning"] == "failed"
    done = hbtui("try", "ls", "t", "--json", env=gated_env)
    assert done.returncode == 0, done.stderr
    rows = {row["box"]: row for row in json.loads(done.stdout)["boxes"]}
    assert list(rows) == ["t-1"] and rows["t-1"]["error"], rows
    assert hbtui("rm", "t-1", "--force", env=gated_env).returncode == 0
    # Nothing is left of it (no box, its maker dead): the name is free again.
    live = dict(gated_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)))
    again = hbtui("try", "1", "t", "--repo", str(repo), "--task", "x", "-q", env=live)
    assert again.returncode == 0, again.stdout + again.stderr
    assert hbtui("rm", "t-1", "--force", env=gated_env).returncode == 0
