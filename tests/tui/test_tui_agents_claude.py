"""The agents in the dashboard with the real `claude` in a simulator box:
the preview shows its screen, a line sent with `m` makes it ask, the Agent column and the
status line say needs-you with the command, `A` runs the command and `D` does not.

The box and its agent are set up as in tests/core/agents/test_agents_claude.py (tests/support/agents.py);
the dashboard runs over the real Service (the simulator's engine).
"""

from __future__ import annotations

import shutil
import time

import pytest
from textual.widgets import Static

from hbtui.core.agents.sessions import NEEDS_YOU
from hbtui.tui.agents.state import lead
from hbtui.tui.app import HbtuiApp

from support import SIM_RECIPE
from support.agents import CLAUDE, FAKE_API, SETUP, WORKSPACE, exists, in_box, wait_session
from support.cli import hbtui
from support.pilot import notes, rows, until

pytestmark = [
    pytest.mark.real_agent,
    pytest.mark.sim,
    pytest.mark.skipif(
        shutil.which("node") is None, reason="node is missing (the box's agent helpers need it)"
    ),
]

SIZE = (160, 45)
KEY = ("local", "b1")


def status_of(app) -> str:
    row = app.main.agent_panel.agents.get(KEY)
    session = lead(row) if row is not None else None
    return session.status if session is not None else ""


async def prompt(pilot, text: str) -> None:
    """`m`, the line, enter: as a user types it."""
    await pilot.press("m")
    await until(pilot, lambda: pilot.app.screen is not pilot.app.main)
    await pilot.press(*text, "enter")
    await until(pilot, lambda: pilot.app.screen is pilot.app.main)


@pytest.mark.timeout(900)
@pytest.mark.skipif(CLAUDE is None, reason="claude is not installed (.ci/run installs the pin)")
@pytest.mark.skipif(
    CLAUDE is not None and CLAUDE < (2, 1, 139),
    reason=f"claude {CLAUDE} predates the session files and hooks these tests drive (2.1.139)",
)
async def test_the_dashboard_shows_claude_asking_and_approves_and_denies(sim_env, sim_service):
    made = hbtui("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    in_box(sim_env, "cat > ~/fake_api.py", input=FAKE_API.read_text())
    in_box(sim_env, SETUP)
    wait_session(sim_env, lambda s: s["status"] == "idle" and s["pane"])

    app = HbtuiApp(sim_service, refresh_seconds=1)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: status_of(app) == "idle", timeout=30, what="idle")
        await pilot.press("v")
        preview = app.main.agent_panel.preview
        await until(pilot, lambda: "\n" in preview.screen_text, timeout=30, what="claude's screen")
        assert "\x1b" not in preview.screen_text

        # Approve: the command runs in the box.
        await prompt(pilot, f"run: touch {WORKSPACE}/ran")
        # The stream shows every state: Claude's session file may say "permission prompt"
        # a moment before its PermissionRequest hook names the command.
        command = f"Bash: touch {WORKSPACE}/ran"
        await until(
            pilot,
            lambda: (
                status_of(app) == NEEDS_YOU
                and lead(app.main.agent_panel.agents[KEY]).waiting_for == command
            ),
            timeout=60,
            what="needs-you with the command",
        )
        shown = time.time()
        asked = lead(app.main.agent_panel.agents[KEY])
        assert asked is not None and asked.waiting_for == command
        print(f"needs-you shown {shown - (asked.since or shown):.2f} s after claude asked")
        assert "needs-you" in rows(app)["local/b1"]
        assert "1 needs you" in str(app.main.query_one("#host-status", Static).render())
        await until(
            pilot,
            lambda: "waits for: Bash" in str(preview.query_one("#agent-header", Static).render()),
        )
        await pilot.press("A")
        await until(
            pilot,
            lambda: any("approved in b1" in n for n in notes(app)),
            timeout=60,
        )
        await until(pilot, lambda: status_of(app) == "idle", timeout=60, what="idle again")
        assert exists(sim_env, f"{WORKSPACE}/ran")

        # Deny: it never runs.
        await prompt(pilot, f"run: touch {WORKSPACE}/denied")
        await until(pilot, lambda: status_of(app) == NEEDS_YOU, timeout=60, what="needs-you")
        await pilot.press("D")
        await until(pilot, lambda: any("denied in b1" in n for n in notes(app)), timeout=60)
        await until(pilot, lambda: status_of(app) == "idle", timeout=60, what="idle after deny")
        assert not exists(sim_env, f"{WORKSPACE}/denied")
