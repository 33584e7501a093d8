"""A hostile box's words through every view of the dashboard. Whatever a box says (what its
agent waits for, its screen, its logs, its step names, git's errors, file names in an
archive) shows as plain text: no markup is read (a `[/]` shows as it is, a click on a
`[@click=…]` runs nothing), no escape sequence reaches the terminal, and the dashboard goes
on. Against `FakeService` answering with tests/support/hostile.py's corpus, each thing
passed on as the core passes it (what the core parses is one plain line already, what it
only carries is raw). And the installed dashboard in tmux, against a simulator box whose
workload log is the corpus: the host terminal's title and clipboard stay as they were."""

from __future__ import annotations

import ast
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from textual.drivers.headless_driver import HeadlessDriver
from textual.widgets import DataTable

from hbtui import boxtext
from hbtui.core.agents.sessions import (
    NEEDS_YOU,
    WORKING,
    AgentError,
    AgentSession,
    Answer,
    clean_text,
    parse_session,
)
from hbtui.core.foundation.views import BoxDetails, DetailSection
from hbtui.core.tries.book import CheckResult, TryRecord
from hbtui.core.tries.operations import TryRow
from hbtui.core.work.book import WorkError
from hbtui.core.work.diff import Commit, FileChange, WorkDiff
from hbtui.core.work.pull import PullResult
from hbtui.errors import HbtuiError
from hbtui.events import LogLine, Notice, Phase, Step
from hbtui.names import LOCAL
from hbtui.tui.archives.dialogs import ExtractRequest
from hbtui.tui.archives.progress import ProgressScreen
from hbtui.tui.boxes.details import DetailsScreen
from hbtui.tui.work.compare import TryScreen
from hbtui.tui.work.diff import DiffScreen

from support import HBTUI_BIN, ROOT, SIM_RECIPE
from support.cli import as_root, hbtui, ok, wait_for
from support.hostile import CORPUS, EVERYTHING, unsafe
from support.pilot import SIZE, make_app, notes, operations_done, settled, until
from support.tmux import SOCKET, tmux, tmux_env, wait_screen
from support.tui_fake_agents import NOW_TS, FakeAgents
from support.tui_fakes import (
    FakeArchives,
    FakeBoxes,
    FakeService,
    FakeTries,
    FakeWork,
)

RAW = EVERYTHING  # as a box says it
LINE = clean_text(EVERYTHING)  # as the core passes on what it parses: one plain line
LINES = "\n".join(CORPUS.values())  # a log of it, one attack a line
PATCH = boxtext.lines(  # the core's diff: a file named by the box, a line that says all
    f"diff --git a/{LINE} b/{LINE}\n--- a/{LINE}\n+++ b/{LINE}\n@@ -1 +1 @@\n-old\n+{RAW}\n"
)

# What a terminal acts on, as the corpus carries it: none of it may reach the host's
# terminal (Textual writes none of these itself; the dashboard makes no links).
PAYLOADS = (
    "\x1b]52;",
    "\x1b]0;",
    "\x1b]8;",
    "\x1bP+q",
    "\x1b[2J",
    "\x1b[1A",
    "\x1b[" + "0" * 64,
    "\u202e",
    "\u202c",
    "\u2066",
    "\u2069",
    "\x9b",
    "\x9d",
    "\rEVIL",
)


class Terminal(HeadlessDriver):
    """A headless driver that counts as a terminal, and keeps what the dashboard writes."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.written: list[str] = []

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        self.written.append(data)


def shown(app) -> str:
    """The screen as drawn, toasts and all."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def plain_screen(pilot, app) -> str:
    """The screen as drawn once what came last is laid out, checked: no character a
    terminal acts on, no link, no action a click would run; nothing of the corpus's escapes
    written to the terminal; the dashboard still running. Returns what the screen shows."""
    await settled(pilot)
    assert app.is_running
    for strip in app.screen._compositor.render_strips():
        for segment in strip:
            assert not unsafe(segment.text), segment
            if segment.style is not None:
                assert not segment.style.link, segment
                assert "screenshot" not in str(segment.style.meta.get("@click", "")), segment
    written = "".join(app._driver.written)
    assert not [p for p in PAYLOADS if p in written]
    return shown(app)


def waits(box: str, sid: str, what: str) -> AgentSession:
    """A session that waits for `what`, read by the core's own parser."""
    raw = {
        "session_id": sid,
        "agent": "claude",
        "status": NEEDS_YOU,
        "since": NOW_TS - 4,
        "waiting_for": what,
        "pane": "%1",
        "request": "ab12cd34",
    }
    return parse_session(box, LOCAL, raw)


class HostileBoxes(FakeBoxes):
    """Every box read or started carries the corpus."""

    async def workload_logs(self, name: str, host: str = LOCAL, *, tail: int | None = None) -> str:
        self.fake._called("workload_logs", name, host)
        return f"{LINES}\n{RAW}\n"

    async def details(self, name: str, host: str = LOCAL) -> BoxDetails:
        found = await super().details(name, host)
        said = DetailSection("Box", [("provisioning", f"failed: step 3/6 {RAW}")])
        return replace(found, sections=[said, *found.sections], engine_record={"note": RAW})

    async def ports(self, host: str = LOCAL):
        raise HbtuiError(f"cannot list ports: {RAW}")

    async def start(self, name, host=LOCAL, *, report=None):
        """A start whose provisioning prints the corpus, then fails saying it."""
        self.fake._called("start", name, host)
        assert report is not None
        report(Phase(RAW))
        report(Step(1, 2, RAW))
        for line in CORPUS.values():
            report(LogLine(line))
        report(Notice(RAW))
        raise HbtuiError(f"step 1/2 {RAW} failed")


class HostileAgents(FakeAgents):
    """Answers that carry the corpus, and a decision helper that refuses in it."""

    async def answer(
        self, name, decision, host=LOCAL, *, session=None, request=None, waiting_for=None
    ) -> Answer:
        """The first answer is taken (the request it took says all); after it, the box's
        decision helper refuses, its stderr saying all."""
        fake = self.fake
        fake._called("answer_agent", name, decision, host, session)
        fake.answers += 1
        if fake.answers > 1:
            raise AgentError(f"box {name}: {clean_text(RAW, 200)}")
        return Answer(waits(name, "s-alpha-1", RAW), "hook", decision)

    async def send(self, name, text, host=LOCAL, *, session=None) -> AgentSession:
        self.fake._called("send_to_agent", name, text, host, session)
        raise AgentError(f"box {name}: {clean_text(RAW, 200)}")


class HostileWork(FakeWork):
    """gamma's git fails, saying the corpus."""

    async def diff(self, name: str, host: str = LOCAL, *, patch: bool = True) -> WorkDiff:
        if name == "gamma":
            raise WorkError(f"git log in box gamma failed: {RAW}")
        return await super().diff(name, host, patch=patch)

    async def pull(self, name, host=LOCAL, *, wip=False, repo=None, report=None) -> PullResult:
        if name == "gamma":
            raise WorkError(f"fatal: object [/] is corrupt {RAW}")
        return await super().pull(name, host, wip=wip, repo=repo, report=report)


class HostileTries(FakeTries):
    """A try whose record and checks carry markup and the corpus."""

    def of(self, box: str, host: str = LOCAL) -> tuple[TryRecord, str]:
        return TryRecord("fix", "/src/[/]project", "a" * 40, "pytest [/]", ["alpha", "gamma"]), box

    async def rows(self, name: str, host: str = LOCAL) -> tuple[TryRecord, list[TryRow]]:
        record, _ = self.of("alpha", host)
        check = CheckResult("b" * 40, 1, boxtext.lines(LINES))
        rows = [
            TryRow("alpha", WORKING, 1, 1, 1, 1, check, note=LINE),
            TryRow("gamma", WORKING, None, None, None, None, None, f"git failed: {RAW}"),
        ]
        return record, rows


class HostileArchives(FakeArchives):
    async def extract(self, archive, dest=None, *, passphrase, report=None) -> Path:
        """The first extract meets an entry named by the box and refuses it; the next
        unpacks into a folder whose name has markup in it."""
        fake = self.fake
        fake._called("extract", archive, dest, passphrase)
        assert report is not None
        report(Phase(f"unpacking {RAW}"))
        report(LogLine(RAW, stream="stderr"))
        report(Notice(RAW))
        if sum(call[0] == "extract" for call in fake.calls) == 1:
            raise HbtuiError(f"refused entry home/dev[/]null: {RAW}")
        return Path("/tmp/out[/]dir")


class HostileService(FakeService):
    """Every answer that can carry a box's words carries the corpus."""

    def __init__(self) -> None:
        super().__init__(host_errors={"lab": RAW})
        # The registry keeps the failed step as the box's recipe named it.
        self.views[2] = replace(self.views[2], error=f"step 3/6 {RAW}")
        self.agent_errors = {(LOCAL, "gamma"): clean_text(RAW)}
        self.provision_logs[(LOCAL, "gamma")] = [*CORPUS.values(), f"::hbtui:: step 2/6 {RAW}"]
        self.panes[(LOCAL, "alpha", "%1")] = LINES
        self.diffs[(LOCAL, "alpha")] = WorkDiff(
            box="alpha",
            host=LOCAL,
            repo="/src/[/]project",
            seed="a" * 40,
            head="b" * 40,
            branch=LINE[:200],
            commits=(Commit("c" * 40, LINE[:300]),),
            files=(FileChange(LINE[:1000], 1, 1),),
            uncommitted=1,
            patch=PATCH,
        )
        self.diffs[(LOCAL, "gamma")] = self.diffs[(LOCAL, "alpha")]
        self.answers = 0
        self.boxes = HostileBoxes(self)
        self.agents = HostileAgents(self)
        self.work = HostileWork(self)
        self.tries = HostileTries(self)
        self.archives = HostileArchives(self)


async def started(pilot, service: HostileService):
    app = pilot.app
    await until(pilot, lambda: app.main.table.row_count == 4, what="4 rows")
    await until(pilot, lambda: service.agents_calls >= 1, what="the first ask")
    await settled(pilot)


def hostile_app(service: FakeService):
    return make_app(service, refresh=60, driver_class=Terminal)


async def select(pilot, name: str) -> None:
    assert pilot.app.main.table.select((LOCAL, name))
    await settled(pilot)


async def said(pilot, app, words: str) -> str:
    """The notification that has `words`, once it came; it shows plainly."""
    await until(pilot, lambda: any(words in n for n in notes(app)), what=lambda: notes(app))
    note = next(n for n in notes(app) if words in n)
    assert not unsafe(note)
    return note


# -- the main screen ---------------------------------------------------------------------------


async def test_table_status_line_logs_details_and_a_failing_start_show_box_text_plainly():
    service = HostileService()
    app = hostile_app(service)
    async with app.run_test(size=SIZE, headless=False, notifications=True) as pilot:
        await started(pilot, service)
        screen = await plain_screen(pilot, app)
        assert "host lab unreachable: https://github.com/org/repo big" in screen  # status line
        assert "✗ https://github.com/org/repo" in screen  # gamma's agent cannot be asked: why
        # gamma's last provisioning log, and its workload log (`t`)
        await select(pilot, "gamma")
        await until(pilot, lambda: "echo [/] missing" in shown(app), what=lambda: shown(app))
        screen = await plain_screen(pilot, app)
        assert "[link=https://evil.example]github.com[/link]" in screen
        assert "https://github.com/org/repo" in screen  # OSC 8's text, not its link
        await pilot.press("t")
        await until(pilot, lambda: ("workload_logs", "gamma", LOCAL) in service.calls)
        await until(pilot, lambda: "Workload log" in shown(app) and "big" in shown(app))
        assert "echo [/] missing" in await plain_screen(pilot, app)
        await pilot.press("t")
        # the port map, which cannot be read
        await pilot.press("p")
        await said(pilot, app, "port map cannot list ports: https://github.com/org/repo big")
        await pilot.press("p")
        # a start that prints the corpus and fails saying it
        await select(pilot, "beta")
        await pilot.press("s")
        note = await said(pilot, app, "start beta failed")
        assert "title [@click=app.screenshot('.bashrc','/tmp')]click me[/] test -d" in note
        await operations_done(pilot, app)
        await until(pilot, lambda: "✗ start: step 1/2" in shown(app), what=lambda: shown(app))
        screen = await plain_screen(pilot, app)
        assert "echo [/] missing" in screen and "▶ step 1/2 https://github.com" in screen
        # the details view (`i`)
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, DetailsScreen))
        await until(
            pilot,
            lambda: "failed: step 3/6 https://github.com" in shown(app),
            what=lambda: shown(app),
        )
        assert "echo [/] missing" in await plain_screen(pilot, app)
        await pilot.press("y")  # the engine's record: JSON, every control escaped
        await settled(pilot)
        await plain_screen(pilot, app)


# -- the agents --------------------------------------------------------------------------------


async def test_a_click_on_an_agents_alert_runs_nothing(tmp_path, monkeypatch):
    """What an agent waits for, quoted in the needs-you alert, is text: a click on it runs
    none of the actions it names (a screenshot written, a key pressed, quit)."""
    monkeypatch.chdir(tmp_path)  # where the screenshot would go
    service = FakeService()
    service.views[1] = replace(service.views[1], state="running")  # beta runs too
    app = make_app(service, refresh=60, driver_class=Terminal)
    actions = ("app.screenshot('x.svg','.')", "app.simulate_key('q')", "app.quit")
    async with app.run_test(size=SIZE, headless=False, notifications=True) as pilot:
        await started(pilot, service)
        for box, action in zip(("alpha", "beta", "gamma"), actions, strict=True):
            service.agent_sessions[(LOCAL, box)] = [
                waits(box, f"s-{box}-1", f"[@click={action}]CLICKME[/] {RAW}")
            ]
        await until(pilot, lambda: shown(app).count("CLICKME") >= 3, what=lambda: shown(app))
        screen = await plain_screen(pilot, app)
        assert "needs you: [@click=app.simulate_key('q')]CLICKME[/]" in screen
        clicked = 0
        while "CLICKME" in shown(app):
            lines = shown(app).splitlines()
            y = next(i for i, line in enumerate(lines) if "CLICKME" in line)
            await pilot.click(offset=(lines[y].index("CLICKME") + 2, y))
            await settled(pilot)
            clicked += 1
            assert app.is_running and not list(tmp_path.iterdir())
            assert clicked <= 3, "a clicked alert stays"
        assert clicked == 3
        await plain_screen(pilot, app)


async def test_the_preview_and_the_answers_show_what_the_box_says_plainly():
    service = HostileService()
    service.agent_sessions[(LOCAL, "alpha")] = [waits("alpha", "s-alpha-1", RAW)]
    app = hostile_app(service)
    async with app.run_test(size=SIZE, headless=False, notifications=True) as pilot:
        await started(pilot, service)
        await select(pilot, "alpha")
        await pilot.press("v")  # its screen: colours kept, nothing else
        await until(pilot, lambda: "echo [/] missing" in app.main.agent_panel.preview.screen_text)
        screen = await plain_screen(pilot, app)
        assert "waits for: https://github.com/org/repo big evil iso 2J 0;c1 title [@click" in screen
        assert "https://github.com/org/repo" in screen and "big" in screen
        await pilot.press("v")
        await pilot.press("A")  # taken: the notice names the request
        note = await said(pilot, app, "approved in alpha")
        assert "test -d build || echo [/] missing" in note
        await pilot.press("D")  # refused: the box's stderr says why
        note = await said(pilot, app, "agent box alpha: ")
        assert "[link=https://evil.example]github.com[/link]" in note
        await pilot.press("m")  # a line sent, refused the same way
        await until(pilot, lambda: app.screen is not app.main)
        await pilot.press(*"go on", "enter")
        await until(pilot, lambda: len([n for n in notes(app) if "agent box alpha" in n]) == 2)
        await settled(pilot)
        await plain_screen(pilot, app)


# -- a box's work ------------------------------------------------------------------------------


async def test_diff_pull_and_compare_show_what_git_says_plainly():
    service = HostileService()
    app = hostile_app(service)
    async with app.run_test(size=SIZE, headless=False, notifications=True) as pilot:
        await started(pilot, service)
        await select(pilot, "alpha")
        await pilot.press("u")  # the diff: its commits, its files, its patch
        await until(pilot, lambda: isinstance(app.screen, DiffScreen))
        await until(pilot, lambda: app.screen.shown is not None)
        await settled(pilot)
        screen = await plain_screen(pilot, app)
        assert screen.count("echo [/] missing") >= 2  # the commit's subject, the patch
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)
        await select(pilot, "gamma")
        await pilot.press("u")  # git fails, saying all
        note = await said(pilot, app, "diff gamma git log in box gamma failed: ")
        assert "echo [/] missing" in note
        await pilot.press("P")  # the pull is refused, git saying all
        note = await said(pilot, app, "pull gamma failed")
        assert "fatal: object [/] is corrupt https://github.com/org/repo" in note
        await select(pilot, "alpha")
        await pilot.press("P")  # what landed, and where
        note = await said(pilot, app, "pull alpha: done")
        assert "in /src/[/]project" in note
        await operations_done(pilot, app)
        await pilot.press("T")  # the compare view: its errors, its check's output
        await until(pilot, lambda: isinstance(app.screen, TryScreen))
        screen = app.screen
        await until(pilot, lambda: screen.rows, what="the try's rows")
        await settled(pilot)
        drawn = await plain_screen(pilot, app)
        assert "check: pytest [/]" in drawn and "echo [/] missing" in drawn
        screen.query_one(DataTable).move_cursor(row=1)
        await settled(pilot)
        await plain_screen(pilot, app)


async def test_extract_shows_an_archives_names_plainly():
    """An entry named by the box (`home/dev[/]null`) is refused in one plain line; the
    next extract says where it unpacked."""
    service = HostileService()
    app = hostile_app(service)
    request = ExtractRequest(Path("/backups/alpha.hbx"), None, passphrase=b"pw")
    async with app.run_test(size=SIZE, headless=False, notifications=True) as pilot:
        await started(pilot, service)
        app.archives.extract(request)
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen))
        progress = app.screen
        await until(pilot, lambda: progress.failure is not None, what="the extract to fail")
        await settled(pilot)
        assert "refused entry home/dev[/]null: https://github.com" in await plain_screen(pilot, app)
        await said(pilot, app, "refused entry home/dev[/]null")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)
        app.archives.extract(replace(request, passphrase=b"pw"))
        await said(pilot, app, "extract: done extracted into /tmp/out[/]dir")
        await operations_done(pilot, app)
        await plain_screen(pilot, app)


async def test_ctrl_c_says_how_to_quit_in_plain_words():
    """Textual's own hint is markup; every toast being plain, the dashboard says it plainly."""
    app = make_app(FakeService(), refresh=60)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        note = await said(pilot, app, "Do you want to quit?")
        assert note.startswith("Do you want to quit? Press ") and "[b]" not in note
        assert note.endswith(" to quit the app")


# -- a real terminal ---------------------------------------------------------------------------


@pytest.mark.terminal
@pytest.mark.sim
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_a_workload_log_of_escapes_leaves_the_host_terminal_as_it_was(sim_env, tmp_path):
    """The installed dashboard in tmux shows a simulator box's workload log, which its root
    filled with the corpus: the terminal's title and clipboard (tmux's, set-clipboard on)
    stay as they were, the screen is not cleared, and none of the corpus's escapes is in
    what the dashboard wrote. A printf of the same kind before it shows the terminal acts
    on them."""
    ok(hbtui("new", "b1", "-q", "--recipe", str(SIM_RECIPE), env=sim_env))
    as_root(sim_env, "b1", "cat > /proc/1/fd/1", input=f"{LINES}\n".encode())  # its log
    session, stream = f"hostile-{tmp_path.name}"[:40], tmp_path / "written"
    env = dict(sim_env, TERM="xterm-256color")
    env_args = tmux_env(env)
    probe = r"printf '\033]52;c;cHJvYmU=\007\033]0;probe title\007'"
    try:
        tmux("new-session", "-d", "-s", "first", "sh")  # the server, to set its options
        tmux("set-option", "-s", "set-clipboard", "on")
        tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "45", *env_args, "sh")
        tmux("set-option", "-t", session, "remain-on-exit", "on")  # to see it end
        tmux("pipe-pane", "-o", "-t", session, f"cat >> {stream}")
        tmux("send-keys", "-t", session, f"{probe}; exec {HBTUI_BIN}", "Enter")
        wait_screen(session, lambda s: "Help" in s and " b1 " in s, 30, "the dashboard")
        title = tmux("display-message", "-p", "-t", session, "#{pane_title}").strip()
        assert title == "probe title"  # the terminal acts on OSC 0 and OSC 52
        assert tmux("show-buffer") == "probe"
        tmux("send-keys", "-t", session, "t")
        screen = wait_screen(session, lambda s: "echo [/] missing" in s, 30, "the log")
        assert "Workload log" in screen and "https://github.com/org/repo" in screen
        assert tmux("display-message", "-p", "-t", session, "#{pane_title}").strip() == title
        assert tmux("list-buffers", "-F", "#{buffer_sample}").split() == ["probe"]
        tmux("send-keys", "-t", session, "q")
        dead = ("display-message", "-p", "-t", session, "#{pane_dead}")
        wait_for("the dashboard to quit", lambda: tmux(*dead).strip() == "1", 30)
        wait_for("its last bytes", lambda: b"\x1b[?1049l" in stream.read_bytes(), 30)
        written = stream.read_bytes().decode(errors="replace").split("probe title\x07", 1)[1]
        assert not [p for p in PAYLOADS if p in written]
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)


# -- the guard ---------------------------------------------------------------------------------

TUI = ROOT / "hbtui" / "tui"


def _name(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _is(node: ast.expr | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def test_no_widget_of_the_dashboard_reads_markup_it_was_not_written_with():
    """The dashboard's own text may be markup; text that comes from elsewhere never is. A
    Static or Label built from anything but a literal, or found by its id to be updated
    later, is `markup=False`; nothing asks for markup; Rich's ANSI parser is called only
    in hbtui/tui/plain.py, after `boxtext.colours` (notifications are plain in the App)."""
    found = []
    for path in sorted(TUI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            where, called = f"{path.relative_to(ROOT)}:{node.lineno}", _name(node.func)
            markup = _keyword(node, "markup")
            if _is(markup, True):
                found.append(f"{where}: markup=True")
            if called == "from_markup" and not (
                node.args and isinstance(node.args[0], ast.Constant)
            ):
                found.append(f"{where}: from_markup of text that is not a literal")
            if called == "from_ansi" and path.name != "plain.py":
                found.append(f"{where}: from_ansi outside hbtui/tui/plain.py (use plain.row)")
            if called in ("Static", "Label") and not _is(markup, False):
                first = node.args[0] if node.args else _keyword(node, "content")
                literal = first is None or isinstance(first, ast.Constant)
                if not literal or _keyword(node, "id") is not None:
                    found.append(f"{where}: {called} of changing text without markup=False")
    assert not found, "\n".join(found)
