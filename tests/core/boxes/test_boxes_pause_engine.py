"""Pause and resume against the real engine, where no boot is needed: the state names it
gives a box that never started reach hbtui's one-line answers, and nothing changes."""

from __future__ import annotations

import asyncio
import os

import pytest

from hbtui.engine import Engine, MachineSpec

from support.cli import hbtui, ls_json, run_ok

pytestmark = pytest.mark.real_engine


def test_pause_and_resume_of_a_box_that_never_started(hbtui_home, real_smolvm, real_state_dir):
    engine = Engine(real_smolvm, state_dir=str(real_state_dir), timeout=60)
    spec = MachineSpec(
        name="c1",
        image="ubuntu:24.04",
        cpus=1,
        memory_mib=512,
        ports=((4811, 4811),),
        labels=(("hbtui", "1"), ("hbtui.port", "4811")),
        workload=("/bin/sh", "-c", "sleep 1"),
    )
    asyncio.run(engine.create(spec))
    env = {
        **os.environ,
        "HBTUI_SMOLVM": real_smolvm,
        "HBTUI_SMOLVM_STATE_DIR": str(real_state_dir),
    }
    run_ok("adopt", "c1", env=env)

    paused = hbtui("pause", "c1", env=env)
    assert (paused.returncode, paused.stderr) == (
        2,
        "error: box 'c1' is created: only a running box can be paused\n",
    )
    resumed = hbtui("resume", "c1", env=env)
    assert (resumed.returncode, resumed.stderr) == (
        2,
        "error: box 'c1' is created, not paused; start it with: hbtui start c1\n",
    )
    [box] = ls_json(env)
    assert box["state"] == "created"
    run_ok("rm", "c1", "--force", env=env)
    assert ls_json(env) == []
