"""Bases and branches end to end against the simulator.

`hbtui base build` then `hbtui new` makes a ready box from the base with only the
recipe's per-box step; a changed recipe makes `new` refuse the stale base; `hbtui
branch` gives a box with the source's /data, through the engine's branch when the
source runs branchable and by stop-pack-create otherwise. Every failure leaves
nothing behind.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest

from hbtui.core.foundation.basebook import StaleBase
from hbtui.core.foundation.specs import NewSpec
from hbtui.errors import Cancelled, HbtuiError
from hbtui.events import Notice, Phase, Step

from support import SIM_RECIPE
from support.cli import answers, hbtui, in_box, ls_json, machines, run_ok

pytestmark = pytest.mark.sim


def recipe_copy(tmp_path: Path, name: str = "recipe") -> Path:
    copy = tmp_path / name
    shutil.copytree(SIM_RECIPE, copy, symlinks=False)
    return copy


def test_a_box_from_a_base_is_ready_with_its_own_name_and_port(sim_env, tmp_path):
    recipe = recipe_copy(tmp_path)
    env = {**sim_env, "HBTUI_RECIPE": str(recipe)}
    built = json.loads(run_ok("base", "build", "-q", "--json", env=env))
    assert built["image"] == "ubuntu:24.04" and built["host"] == "local"
    assert re.fullmatch(rf"ubuntu-24\.04-[0-9a-f]{{8}}-{built['recipe']}", built["id"])
    assert Path(built["pack"]).is_file() and Path(built["pack"]).stat().st_size == built["size"]
    assert built["engine"].count(".") == 2
    # The builder box is gone, from the registry and the engine.
    assert ls_json(env) == [] and machines(env) == []

    out = hbtui("new", "b2", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"from the base {built['id']}" in out.stdout
    assert "step 1/4 box-identity" in out.stdout and "executor-standin" not in out.stdout
    [box] = ls_json(env)
    assert (box["name"], box["state"], box["provisioning"], box["base"]) == (
        "b2",
        "running",
        "ready",
        built["id"],
    )
    assert answers(box["port"])
    assert in_box("b2", "id", "-un", env=env) == "agent"
    assert in_box("b2", "cat", "/etc/hostname", env=env) == "b2"
    settings = in_box("b2", "cat", "/etc/hermes-box.env", env=env)
    assert "HB_BOX=b2" in settings and f"HB_PORT={box['port']}" in settings
    # Nothing of the builder box came along: its name, executor state, logs.
    assert "base-" not in settings
    starts = json.loads(in_box("b2", "cat", "/data/home/agent/.executor/standin.json", env=env))
    assert starts["starts"] == 1


def test_base_ls_verify_and_rm(sim_env, tmp_path):
    env = {**sim_env, "HBTUI_RECIPE": str(recipe_copy(tmp_path))}
    assert "No bases yet" in run_ok("base", "ls", env=env)
    built = json.loads(run_ok("base", "build", "-q", "--json", env=env))
    [listed] = json.loads(run_ok("base", "ls", "--json", env=env))
    assert listed == built
    assert built["id"] in run_ok("base", "ls", env=env)
    [ok] = json.loads(run_ok("base", "verify", "--json", env=env))
    assert ok == {"id": built["id"], "host": "local", "ok": True, "problem": None}

    pack = Path(built["pack"])
    with open(pack, "r+b") as fh:  # one byte changed, same size
        first = fh.read(1)
        fh.seek(0)
        fh.write(bytes([first[0] ^ 1]))
    bad = hbtui("base", "verify", built["id"], env=env)
    assert bad.returncode == 1 and "SHA-256 differs" in bad.stdout

    gone = hbtui("base", "rm", "ubuntu-24.04-000000000000", env=env)
    assert gone.returncode != 0 and gone.stderr.count("\n") == 1
    assert "no base 'ubuntu-24.04-000000000000'" in gone.stderr
    assert hbtui("base", "rm", "../../etc", env=env).returncode != 0
    run_ok("base", "rm", built["id"], env=env)
    assert not pack.parent.exists()
    assert json.loads(run_ok("base", "ls", "--json", env=env)) == []


def test_a_changed_recipe_makes_new_refuse_the_stale_base(sim_env, tmp_path):
    recipe = recipe_copy(tmp_path)
    env = {**sim_env, "HBTUI_RECIPE": str(recipe)}
    run_ok("base", "build", "-q", env=env)
    script = recipe / "provision" / "provision.sh"
    script.write_text(script.read_text() + "# a new version of the recipe\n")

    refused = hbtui("new", "s1", env=env)
    assert refused.returncode != 0
    assert "was built from an older version of the recipe" in refused.stderr
    assert "hbtui base build" in refused.stderr and "--no-base" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert ls_json(env) == [] and machines(env) == []

    out = run_ok("new", "s1", "--no-base", "-q", env=env)
    assert "s1" in out
    [box] = ls_json(env)
    assert box["base"] == "" and box["provisioning"] == "ready"


async def test_the_plan_says_how_new_will_make_a_box(sim_service, tmp_path):
    recipe = recipe_copy(tmp_path)
    plan = sim_service.boxes.plan(recipe=recipe)
    assert not plan.fast and "no base of ubuntu:24.04" in plan.why and "base build" in plan.hint
    base = await sim_service.bases.build(recipe=recipe)
    plan = sim_service.boxes.plan(recipe=recipe)
    assert plan.fast and plan.base == base
    assert "full provisioning" in sim_service.boxes.plan(recipe=recipe, use_base=False).why
    (recipe / "guest" / "profile.sh").write_text("# changed\n")
    stale = sim_service.boxes.plan(recipe=recipe)
    assert stale.stale and not stale.fast
    with pytest.raises(StaleBase):
        await sim_service.new(NewSpec("s2", recipe=recipe))


async def test_a_recipe_without_a_per_box_step_has_no_base(sim_service, tmp_path):
    recipe = recipe_copy(tmp_path)
    (recipe / "provision" / "first-boot.sh").unlink()
    with pytest.raises(HbtuiError, match=r"no provision/first-boot\.sh"):
        await sim_service.bases.build(recipe=recipe)
    plan = sim_service.boxes.plan(recipe=recipe)
    assert not plan.fast and "first-boot.sh" in plan.why


async def test_a_failing_per_box_step_rolls_the_new_box_back(sim_service, sim_env, tmp_path):
    recipe = recipe_copy(tmp_path)
    first_boot = recipe / "provision" / "first-boot.sh"
    first_boot.write_text(first_boot.read_text().replace("hb_first_boot", "exit 7"))
    base = await sim_service.bases.build(recipe=recipe)
    with pytest.raises(HbtuiError, match=r"first-boot\.sh f1 failed"):
        await sim_service.new(NewSpec("f1", recipe=recipe))
    assert (await sim_service.boxes.listing()).boxes == []
    assert machines(sim_env) == []
    assert Path(base.pack).is_file()  # the base is not harmed by a box that failed


async def test_a_failing_or_cancelled_base_build_leaves_nothing(sim_service, sim_env, tmp_path):
    broken = recipe_copy(tmp_path, "broken")
    script = broken / "provision" / "provision.sh"
    script.write_text(script.read_text().replace("hb_run_steps host-tools", "exit 3; hb_run_steps"))
    with pytest.raises(HbtuiError):
        await sim_service.bases.build(recipe=broken)
    assert sim_service.bases.listing() == [] and machines(sim_env) == []
    assert (await sim_service.boxes.listing()).boxes == []

    recipe = recipe_copy(tmp_path)
    steps: list[Step] = []
    task = asyncio.ensure_future(
        sim_service.bases.build(recipe=recipe, report=lambda e: steps.append(e))
    )
    while not any(isinstance(e, Step) for e in steps):
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(Cancelled, match="was rolled back"):
        await task
    assert sim_service.bases.listing() == [] and machines(sim_env) == []
    assert (await sim_service.boxes.listing()).boxes == []
    bases_dir = Path(sim_env["HBTUI_HOME"]) / "bases" / "local"
    assert not bases_dir.exists() or list(bases_dir.iterdir()) == []


@pytest.mark.parametrize("phase", ["quiescing services", "packing the builder box"])
async def test_a_base_build_cancelled_after_provisioning_leaves_nothing(
    sim_service, sim_env, tmp_path, phase
):
    """Past the builder's provisioning (its own rollback), the build rolls back itself:
    the builder box and the half-written pack go, and it says so in one line."""
    seen: list[str] = []
    task = asyncio.ensure_future(
        sim_service.bases.build(
            recipe=recipe_copy(tmp_path),
            report=lambda e: seen.append(e.message) if isinstance(e, Phase) else None,
        )
    )
    while not any(m.startswith(phase) for m in seen):
        assert not task.done(), seen
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(Cancelled, match=r"the base build in base-\S+ was rolled back"):
        await task
    assert sim_service.bases.listing() == [] and machines(sim_env) == []
    assert (await sim_service.boxes.listing()).boxes == []
    bases_dir = Path(sim_env["HBTUI_HOME"]) / "bases" / "local"
    assert not bases_dir.exists() or list(bases_dir.iterdir()) == []


def test_branch_of_a_box_not_running_branchable_copies_its_disk(sim_env, tmp_path):
    env = {**sim_env, "HBTUI_RECIPE": str(recipe_copy(tmp_path))}
    run_ok("new", "b2", "-q", env=env)
    in_box("b2", "sh", "-c", "echo kept > /data/home/agent/workspace/note", env=env)
    out = run_ok("branch", "b2", "b3", env=env)
    assert "it starts again; its running processes (its agents too) end" in out
    boxes = {b["name"]: b for b in ls_json(env)}
    assert boxes["b3"]["parent"] == "b2" and boxes["b3"]["provisioning"] == "ready"
    assert boxes["b2"]["state"] == "running" and answers(boxes["b2"]["port"])
    assert boxes["b3"]["port"] != boxes["b2"]["port"] and answers(boxes["b3"]["port"])
    assert in_box("b3", "cat", "/data/home/agent/workspace/note", env=env) == "kept"
    assert in_box("b3", "cat", "/etc/hostname", env=env) == "b3"
    assert f"HB_PORT={boxes['b3']['port']}" in in_box("b3", "cat", "/etc/hermes-box.env", env=env)
    # Independent copies: a change in one is not in the other.
    in_box("b3", "sh", "-c", "echo mine > /data/home/agent/workspace/note", env=env)
    assert in_box("b2", "cat", "/data/home/agent/workspace/note", env=env) == "kept"


def test_branch_of_a_branchable_box_goes_through_the_engine(sim_env, tmp_path):
    env = {**sim_env, "HBTUI_RECIPE": str(recipe_copy(tmp_path))}
    run_ok("new", "b4", "--branchable", "-q", env=env)
    in_box("b4", "sh", "-c", "echo four > /data/home/agent/workspace/note", env=env)
    out = run_ok("branch", "b4", "b5", "--json", env=env)
    child = json.loads(out)
    assert "not carried" not in out and child["parent"] == "b4"
    boxes = {b["name"]: b for b in ls_json(env)}
    assert boxes["b4"]["branchable"] is True and boxes["b4"]["state"] == "running"
    assert answers(boxes["b5"]["port"]) and answers(boxes["b4"]["port"])
    assert in_box("b5", "cat", "/data/home/agent/workspace/note", env=env) == "four"
    assert in_box("b5", "cat", "/etc/hostname", env=env) == "b5"
    # A repair runs the recipe with the port inside the box, which a branch keeps.
    run_ok("repair", "b5", "-q", env=env)
    assert answers(boxes["b5"]["port"])
    # Stopped and started again, a branchable box is branchable again.
    run_ok("stop", "b4", env=env)
    run_ok("start", "b4", env=env)
    assert {b["name"]: b for b in ls_json(env)}["b4"]["branchable"] is True


def test_branch_errors_are_one_line_and_change_nothing(sim_env, tmp_path):
    env = {**sim_env, "HBTUI_RECIPE": str(recipe_copy(tmp_path))}
    missing = hbtui("branch", "nope", "b9", env=env)
    assert missing.returncode != 0 and "no box named 'nope'" in missing.stderr
    run_ok("new", "b1", "-q", env=env)
    taken = hbtui("branch", "b1", "b1", env=env)
    assert taken.returncode != 0 and "already exists" in taken.stderr
    bad = hbtui("branch", "b1", "Bad_Name", env=env)
    assert bad.returncode != 0 and "invalid box name" in bad.stderr
    for done in (missing, taken, bad):
        assert "Traceback" not in done.stderr and done.stderr.count("\n") <= 2
    assert [b["name"] for b in ls_json(env)] == ["b1"] and machines(env) == ["b1"]


async def test_a_cancelled_branch_rolls_back_and_starts_the_source_again(
    sim_service, sim_env, tmp_path
):
    recipe = recipe_copy(tmp_path)
    await sim_service.new(NewSpec("src", recipe=recipe))
    events: list[object] = []
    task = asyncio.ensure_future(
        sim_service.branch("src", "child", report=lambda e: events.append(e))
    )
    # Cancelled while the child is being made (created, not yet ready): the making
    # step is quick, so the cancel is sent the moment it starts.
    while not any(
        isinstance(e, Phase) and e.message.startswith("creating machine child") for e in events
    ):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises((asyncio.CancelledError, HbtuiError)):
        await task
    names = [b.name for b in (await sim_service.boxes.listing()).boxes]
    assert names == ["src"] and machines(sim_env) == ["src"]
    assert (await sim_service.boxes.get("src")).state == "running"
    assert any(isinstance(e, Notice) and "rolling back child" in e.message for e in events)
