"""A box of a try removed with `hbtui rm` leaves the try usable: `try ls` shows the
others and says that one was removed, `try keep` of another succeeds. Before, `try ls`
failed whole ("no box named 't-1'") and `try keep` exited 1, "t-1 was not removed".
And two keeps of one try at once never remove each other's kept box."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from support import recipe_with
from support.cli import hbtui, ok
from support.work import LIVE_AGENT, host_repo

pytestmark = pytest.mark.sim


@pytest.mark.timeout(600)
def test_a_removed_box_leaves_its_try_listed_and_keepable(sim_env, tmp_path: Path):
    env = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)))
    repo = host_repo(tmp_path)
    ok(hbtui("try", "2", "t", "--repo", str(repo), "--task", "x", "-q", env=env))
    ok(hbtui("rm", "t-1", "--force", env=env))

    listed = ok(hbtui("try", "ls", "t", "--json", env=env))
    rows = {r["box"]: r for r in json.loads(listed.stdout)["boxes"]}
    assert rows["t-1"]["error"] == "box t-1 is not in hbtui ls (removed, or never made)"
    assert rows["t-2"]["error"] == "" and rows["t-2"]["commits"] == 0, rows

    kept = ok(hbtui("try", "keep", "t-2", "--yes", env=env))
    assert "t-1 was removed already" in kept.stdout, kept.stdout
    assert [b["name"] for b in json.loads(ok(hbtui("ls", "--json", env=env)).stdout)] == ["t-2"]


@pytest.mark.timeout(600)
async def test_two_keeps_of_one_try_at_once_never_remove_a_kept_box(
    sim_env, sim_service, tmp_path: Path
):
    """`try keep t-1` and `try keep t-2` run together: each pulled its box, then removed
    the other's, so both said "kept" and the box one of them kept was gone. One keep of a
    try runs at a time; the other is refused and changes nothing."""
    env = dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, LIVE_AGENT)))
    repo = host_repo(tmp_path)
    ok(hbtui("try", "2", "t", "--repo", str(repo), "--task", "x", "-q", env=env))

    results = await asyncio.gather(
        sim_service.tries.keep("t-1"), sim_service.tries.keep("t-2"), return_exceptions=True
    )

    left = [b["name"] for b in json.loads(ok(hbtui("ls", "--json", env=env)).stdout)]
    kept = [box for box, done in zip(("t-1", "t-2"), results, strict=True)
            if not isinstance(done, BaseException)]  # fmt: skip
    assert len(kept) == 1, results
    assert left == kept, (left, results)
    [refused] = [done for done in results if isinstance(done, BaseException)]
    assert str(refused) == "try t is busy with another keep; try again when it is done"
