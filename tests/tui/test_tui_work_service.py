"""The dashboard's work keys over the real Service and simulator boxes, with real git on
both sides: `u` shows what was committed in a box made with
`--repo`, `P` pulls it into the host repository beside the user's checked-out branch, and
in the compare view of a two-box try `k` keeps one after asking.
(tests/tui/test_tui_work.py drives the same keys over FakeService.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from hbtui.names import LOCAL
from hbtui.tui.dialogs.confirm import ConfirmDialog
from hbtui.tui.work.compare import TryScreen
from hbtui.tui.work.diff import DiffScreen, PatchView

from support import SIM_RECIPE
from support.cli import hbtui
from support.pilot import SIZE, make_app, notes, operations_done, settled, until
from support.work import box_sh, git, host_repo

pytestmark = pytest.mark.sim

WAIT = 120.0  # a box's answer on a loaded machine


def the_users_side(repo: Path) -> tuple[str, ...]:
    """What a pull must never touch: the checked-out branch and where it is, the index and
    work tree (an edit and an untracked file), the files' contents."""
    return (
        git(repo, "symbolic-ref", "HEAD"),
        git(repo, "rev-parse", "HEAD"),
        git(repo, "status", "--porcelain", "--untracked-files=all"),
        (repo / "a.txt").read_text(),
        (repo / "scratch.txt").read_text(),
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A host repository on main, with an edit not committed and an untracked file."""
    return host_repo(tmp_path, dirty=True)


def boxes_shown(app) -> set[str]:
    return {name for host, name in app.main.table.keys_in_order() if host == LOCAL}


async def select(pilot, app, name: str) -> None:
    await until(pilot, lambda: name in boxes_shown(app), timeout=WAIT, what=f"{name}'s row")
    assert app.main.table.select((LOCAL, name))
    await settled(pilot)


@pytest.mark.timeout(900)
async def test_diff_pull_and_keep_from_the_dashboard(sim_env, sim_service, repo: Path):
    env = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    made = hbtui("new", "b1", "--repo", str(repo), "-q", env=env, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    box_sh(env, "b1", "echo 'agent line' > b.txt && git add b.txt && git commit -qm 'agent: add b'")
    head = box_sh(env, "b1", "git rev-parse HEAD")
    # A two-box try of b1's work so far, and work in one of its boxes.
    branched = hbtui("branch", "b1", "--count", "2", "-q", env=env, timeout=600)
    assert branched.returncode == 0, branched.stdout + branched.stderr
    box_sh(env, "b1-2", "echo kept > k.txt && git add k.txt && git commit -qm 'b1-2: add k'")
    kept_head = box_sh(env, "b1-2", "git rev-parse HEAD")
    users = the_users_side(repo)

    app = make_app(sim_service, refresh=1)
    async with app.run_test(size=SIZE) as pilot:
        # u: the diff view shows the committed file and its patch.
        await select(pilot, app, "b1")
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen), timeout=WAIT)
        screen = app.screen
        await until(pilot, lambda: screen.shown is not None, timeout=WAIT, what="the diff")
        await settled(pilot)
        files = screen.query_one("#diff-files", DataTable)
        assert [[str(c) for c in files.get_row_at(y)] for y in range(files.row_count)] == [
            ["A", "b.txt", "+1", "-0"]
        ]
        summary = str(screen.query_one("#diff-summary", Static).render())
        assert "b1 on hb/b1: 1 commit(s)" in summary and "agent: add b" in summary
        patch = screen.query_one(PatchView).rows
        assert "diff --git a/b.txt b/b.txt" in patch and "+agent line" in patch
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)

        # P: the box's branch lands under refs/remotes/box/b1/, the user's side as it was.
        await pilot.press("P")
        await until(
            pilot, lambda: any("pull b1: done" in n for n in notes(app)), timeout=WAIT,
            what=lambda: notes(app),
        )  # fmt: skip
        await operations_done(pilot, app)
        assert git(repo, "rev-parse", "refs/remotes/box/b1/hb/b1") == head
        assert the_users_side(repo) == users
        [note] = [n for n in notes(app) if "pull b1: done" in n]
        assert f"refs/remotes/box/b1/hb/b1 → {head[:12]}" in note

        # T on a box of the try, k: asked first; n changes nothing, y keeps b1-2.
        await select(pilot, app, "b1-2")
        await pilot.press("T")
        await until(pilot, lambda: isinstance(app.screen, TryScreen), timeout=WAIT)
        compare = app.screen
        await until(pilot, lambda: compare.rows, timeout=WAIT, what="the try's rows")
        await settled(pilot)
        rows = compare.query_one("#try-rows", DataTable)
        shown = {str(rows.get_row_at(y)[0]): str(rows.get_row_at(y)[2]) for y in range(2)}
        assert shown == {"b1-1": "1", "b1-2": "2"}  # commits since the seed
        assert compare.selected() == "b1-2"
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        question = str(app.screen.query_one("#question", Static).render())
        assert f"Pull b1-2's work into {repo} and remove b1-1?" in question
        await pilot.press("n")
        await until(pilot, lambda: app.screen is compare)
        assert "b1-1" in boxes_shown(app)
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await until(
            pilot, lambda: any("keep b1-2: done" in n for n in notes(app)), timeout=WAIT,
            what=lambda: notes(app),
        )  # fmt: skip
        await operations_done(pilot, app)
        await until(pilot, lambda: app.screen is app.main)
        await until(
            pilot, lambda: boxes_shown(app) == {"b1", "b1-2"}, timeout=WAIT,
            what=lambda: boxes_shown(app),
        )  # fmt: skip
    await sim_service.close()
    assert git(repo, "rev-parse", "refs/remotes/box/b1-2/hb/b1-2") == kept_head
    assert the_users_side(repo) == users
    listed = hbtui("ls", "--json", env=env)
    assert '"b1-1"' not in listed.stdout and '"b1-2"' in listed.stdout
