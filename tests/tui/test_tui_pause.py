"""Pause and resume in the dashboard, and the ask before a key ends agents at work: `z`
pauses, `Z` and `s` resume; `x` on a box whose agent works or waits for you asks, offering
to pause instead; remove and branch name the agents they would end. Over `FakeService`."""

from __future__ import annotations

from dataclasses import replace

from textual.widgets import Static

from hbtui.core.agents.sessions import IDLE, NEEDS_YOU, WORKING
from hbtui.tui.boxes.branch import BranchDialog
from hbtui.tui.boxes.ending import StopAskDialog
from hbtui.tui.boxes.remove import RemoveDialog
from hbtui.tui.help import HelpScreen

from support.pilot import column, make_app, settled, until
from support.tui_fake_agents import session
from support.tui_fakes import FakeService

SIZE = (160, 45)


def at_work() -> FakeService:
    """alpha's agent waits for a permission; delta@lab's only idles."""
    service = FakeService()
    service.agent_sessions = {
        ("local", "alpha"): [
            session("alpha", "s-alpha-1", NEEDS_YOU, waiting_for="Bash: make"),
            session("alpha", "s-alpha-2", WORKING, agent="codex"),
        ],
        ("lab", "delta"): [session("delta", "s-delta-1", IDLE, host="lab")],
    }
    return service


def state(app, key: str) -> str:
    return column(app, key, 2)


def changes(service: FakeService) -> list[tuple[str, str]]:
    """The box-changing calls made, in order: (call, box)."""
    kinds = ("start", "stop", "pause", "resume", "remove")
    return [(c[0], c[1]) for c in service.calls if c[0] in kinds]


async def agents_heard(pilot, app) -> None:
    panel = app.main.agent_panel
    await until(pilot, lambda: ("local", "alpha") in panel.agents, what="alpha's agents")


async def test_z_pauses_and_Z_or_s_resumes(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await pilot.press("z")  # alpha runs, with no agent: nothing to ask
        await until(pilot, lambda: state(app, "local/alpha") == "paused")
        assert "pausing alpha" in "\n".join(app.activities[("local", "alpha")].lines)
        await pilot.press("Z")
        await until(pilot, lambda: state(app, "local/alpha") == "running")
        await pilot.press("z")
        await until(pilot, lambda: state(app, "local/alpha") == "paused")
        await pilot.press("s")
        await until(pilot, lambda: state(app, "local/alpha") == "running")
        assert changes(static_service) == [
            ("pause", "alpha"),
            ("resume", "alpha"),
            ("pause", "alpha"),
            ("start", "alpha"),
        ]


async def test_stop_of_a_box_with_an_agent_at_work_asks_and_offers_pause():
    service = at_work()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await agents_heard(pilot, app)
        await pilot.press("x")
        await until(pilot, lambda: isinstance(app.screen, StopAskDialog))
        said = str(app.screen.query_one("#sessions", Static).render())
        assert "alpha  claude s-alpha-  needs-you" in said
        assert "alpha  codex s-alpha-  working" in said
        await pilot.press("n")  # keep running: nothing is asked of the Service
        await until(pilot, lambda: not isinstance(app.screen, StopAskDialog))
        await settled(pilot)
        assert changes(service) == [] and state(app, "local/alpha") == "running"

        await pilot.press("x", "p")  # pause instead
        await until(pilot, lambda: state(app, "local/alpha") == "paused")
        assert changes(service) == [("pause", "alpha")]
        await pilot.press("s")
        await until(pilot, lambda: state(app, "local/alpha") == "running")

        await pilot.press("x", "y")  # stop anyway
        await until(pilot, lambda: state(app, "local/alpha") == "stopped")
        assert changes(service)[-1] == ("stop", "alpha")


async def test_stop_of_a_box_whose_agent_idles_asks_nothing():
    service = at_work()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await agents_heard(pilot, app)
        for _ in range(3):
            if app.main.table.selected_key() == ("lab", "delta"):
                break
            await pilot.press("down")
        assert app.main.table.selected_key() == ("lab", "delta")
        await pilot.press("x")
        await until(pilot, lambda: state(app, "lab/delta") == "stopped")
        assert changes(service) == [("stop", "delta")]


async def stop_alpha_once_listed(pilot, app) -> None:
    """`x` on alpha once the agent panel has its row (read, or why it could not be)."""
    await until(pilot, lambda: app.main.table.row_count == 4)
    panel = app.main.agent_panel
    await until(pilot, lambda: ("local", "alpha") in panel.agents, what="alpha's row")
    await pilot.press("x")


async def test_stop_of_a_box_whose_agents_cannot_be_read_asks_too():
    service = FakeService()
    service.agent_errors = {("local", "alpha"): "hb agents exited with 3"}
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await stop_alpha_once_listed(pilot, app)
        await until(pilot, lambda: isinstance(app.screen, StopAskDialog))
        said = str(app.screen.query_one("#unread", Static).render())
        assert "may end agents hbtui could not read: alpha: hb agents exited with 3" in said
        assert not app.screen.query("#sessions")
        await pilot.press("n")
        await until(pilot, lambda: not isinstance(app.screen, StopAskDialog))
        await settled(pilot)
        assert changes(service) == [] and state(app, "local/alpha") == "running"


async def test_stop_of_a_box_whose_recipe_never_finished_asks_nothing():
    """A box whose recipe failed has no agent helper to read: its unread agents are no
    reason to ask, as `hbtui stop` does not."""
    service = FakeService()
    i = next(i for i, v in enumerate(service.views) if v.name == "alpha")
    service.views[i] = replace(service.views[i], provisioning="failed")
    service.agent_errors = {("local", "alpha"): "hb: command not found"}
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await stop_alpha_once_listed(pilot, app)
        await until(pilot, lambda: state(app, "local/alpha") == "stopped")
        assert changes(service) == [("stop", "alpha")]


async def test_remove_and_branch_name_the_agents_they_would_end():
    service = at_work()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        await agents_heard(pilot, app)
        await pilot.press("d")
        await until(pilot, lambda: isinstance(app.screen, RemoveDialog))
        said = str(app.screen.query_one("#ending", Static).render())
        assert "claude s-alpha-  needs-you" in said and "codex s-alpha-  working" in said
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, RemoveDialog))
        await pilot.press("b")  # alpha is not branchable: it stops for the copy
        await until(pilot, lambda: isinstance(app.screen, BranchDialog))
        said = str(app.screen.query_one("#ending", Static).render())
        assert "claude s-alpha-  needs-you" in said


async def test_pause_and_resume_are_in_the_help_and_the_palette(static_service):
    app = make_app(static_service)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Pause box", "Resume box"} <= titles
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one("#keys")
        keys = {
            str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(table.row_count)
        }
        assert (keys["pause"], keys["resume"]) == ("z", "Z")
