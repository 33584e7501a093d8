"""How much faster a box from a base or a branch is ready, with the real engine and recipe.

On a host that boots guests (with the network the recipe needs) this runs tests/bench/new.py
--real once: `hbtui new` with the whole shipped recipe, `base build`, `new` from the base,
`branch` of a box started --branchable, and `branch` of a plain one, each timed as a user
waits for it. The figures are printed (`pytest -s`) and kept as JSON in the test's tmp dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hbtui.core.doctor.checks import boot_problems

from support import ROOT

pytestmark = [pytest.mark.needs_boot, pytest.mark.real_engine]

GOAL = 5.0  # times faster than the whole recipe


@pytest.mark.timeout(3600)
def test_a_box_from_a_base_or_a_branch_is_ready_five_times_sooner(real_smolvm, tmp_path):
    problems = boot_problems()
    if problems:
        pytest.skip("guests cannot boot here: " + problems[0][0])
    env = dict(os.environ, HBTUI_SMOLVM=real_smolvm)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "bench" / "new.py"), "--real", "--runs", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=3500,
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    *table, last = done.stdout.strip().splitlines()
    figures = json.loads(last)
    record = tmp_path / "new-speed.json"
    record.write_text(json.dumps(figures, indent=2) + "\n")
    print("\n".join(table), f"figures kept in {record}", sep="\n")

    assert figures["engine"] == "real" and figures["runs"] == 1
    assert figures["scratch_s"] > figures["base_s"] > 0 and figures["branch_s"] > 0
    assert figures["base_speedup"] >= GOAL, figures
    assert figures["branch_speedup"] >= GOAL, figures
