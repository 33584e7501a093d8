"""The agents' status stream (`Service.agents.watch`, `hb agents --watch`) against the
simulator: a status file written in the box shows in the stream, the stream ends with the
box, a helper without --watch is polled, and a hostile stream is bounded and says why."""

from __future__ import annotations

import asyncio
import json
import queue
import shutil
import signal
import subprocess
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from support import HBTUI_BIN, SIM_RECIPE
from support.agents import LIVE_PROCESS, STATE, in_box
from support.cli import as_root, hbtui, ok

pytestmark = [
    pytest.mark.sim,
    pytest.mark.skipif(shutil.which("node") is None, reason="the box's agent helpers need node"),
]

ROOT = Path(__file__).resolve().parents[3]
HELPER = "/opt/hermes-box/bin/hb-agents"

# A live process and a status file naming it, written as hb-agent-hook writes one (to a
# temporary name, then renamed): a session that needs the user.
ASK = (
    LIVE_PROCESS
    + f"""
printf '{{"session_id":"s1","status":"needs-you","pid":%s,"proc_start":"%s","since":%s,"waiting_for":"Bash: make test"}}' \\
    $pid "$start" $(date +%s) > {STATE}/s1.json.tmp
mv {STATE}/s1.json.tmp {STATE}/s1.json
"""
)


async def until(
    events: AsyncIterator[object], wanted: Callable[[object], bool], timeout: float = 60
) -> object:
    """The first event `wanted` accepts (the timeout only ends a test that hangs)."""
    async with asyncio.timeout(timeout):
        async for event in events:
            if wanted(event):
                return event
    raise AssertionError("the watch ended")


def row_of(event: object, box: str = "b1"):
    from hbtui.core.agents.sessions import AgentsChanged

    return event.row if isinstance(event, AgentsChanged) and event.row.box == box else None


def replace_helper(sim_env: dict[str, str], source: str) -> None:
    """The box's hb-agents, as root (it is the recipe's file)."""
    as_root(sim_env, "b1", f"cat > {HELPER}.new && mv {HELPER}.new {HELPER}", input=source.encode())


@pytest.fixture
def box(sim_env):
    ok(hbtui("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env, timeout=300))
    return sim_env


async def test_a_status_file_shows_in_the_stream_and_the_stream_ends_with_the_box(box, sim_service):
    from hbtui.core.agents.sessions import AgentsChanged, AgentsGone

    watch = sim_service.agents.watch(relist=0.5)
    events = watch.events()
    try:
        first = await until(events, lambda e: row_of(e) is not None)
        assert isinstance(first, AgentsChanged) and first.via == "stream"
        assert first.row.error == "" and first.row.sessions == ()
        await asyncio.to_thread(in_box, box, ASK)
        asked = await until(events, lambda e: bool(row_of(e) and row_of(e).sessions))
        [session] = asked.row.sessions
        assert (session.session_id, session.status) == ("s1", "needs-you")
        assert session.waiting_for == "Bash: make test"
        assert watch.streams == 1
        await asyncio.to_thread(lambda: ok(hbtui("stop", "b1", "--yes", env=box)))
        gone = await until(events, lambda e: isinstance(e, AgentsGone))
        assert (gone.host, gone.box) == ("local", "b1")
        assert watch.streams == 0
    finally:
        await events.aclose()


async def test_agents_takes_a_streamed_box_from_its_stream(box, sim_service):
    """While a watch streams a box, `Service.agents.listing()` (`hbtui agents`, the dashboard's
    fallback poll) takes the box's row from the stream instead of an exec in the box;
    once the stream ends it asks the box again."""
    watch = sim_service.agents.watch(relist=0.5)
    events = watch.events()
    try:
        await asyncio.to_thread(in_box, box, ASK)
        await until(events, lambda e: bool(row_of(e) and row_of(e).sessions))
        replace_helper(box, "process.exit(7);")  # a new exec of the helper fails now
        [row] = await sim_service.agents.listing()
        assert row.error == "" and row.sessions[0].status == "needs-you"
    finally:
        await events.aclose()
    [row] = await sim_service.agents.listing()
    assert row.error == "hb agents exited with 7" and row.sessions == ()


class Watching:
    """`hbtui agents --watch --json` running: each list it prints, in order."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [HBTUI_BIN, "agents", "--watch", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.docs: queue.Queue[list | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        text = ""
        for line in self.proc.stdout:
            text += line
            if line.rstrip("\n") in ("]", "[]"):  # the end of one list (print_json)
                self.docs.put(json.loads(text))
                text = ""
        self.docs.put(None)

    def next(self) -> list:
        doc = self.docs.get(timeout=120)  # the timeout only ends a test that hangs
        assert doc is not None, self.proc.stderr.read()
        return doc

    def until(self, wanted: Callable[[dict], bool]) -> dict:
        while True:
            doc = self.next()
            [row] = [r for r in doc if r["box"] == "b1"]
            assert row["error"] == "", row  # nothing the test did makes an error show
            if wanted(row):
                return row

    def end(self, signum: int) -> int:
        self.proc.send_signal(signum)
        return self.proc.wait(timeout=60)

    def __enter__(self) -> Watching:
        return self

    def __exit__(self, *_exc: object) -> None:
        """A test that failed leaves no watch behind (it would poll or stream for good)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def test_the_cli_watch_follows_the_stream_and_ends_cleanly(box):
    """`hbtui agents --watch` shows a status change as the box's stream says it: the box's
    helper is broken once the stream runs, so an ask shows only through the stream (a
    poll would show the helper's error); Ctrl-C and SIGTERM end it, and its stream with
    it, in the box too; a box whose stream fails is polled."""
    with Watching(box) as watching:
        assert watching.until(lambda row: True)["sessions"] == []  # at once, asked of the box
        watching.until(lambda row: True)  # the stream's first listing (the same: drawn again)
        replace_helper(box, "process.exit(7);")
        in_box(box, ASK)
        row = watching.until(lambda row: bool(row["sessions"]))
        assert row["sessions"][0]["status"] == "needs-you"
        assert row["sessions"][0]["waiting_for"] == "Bash: make test"
        assert watching.end(signal.SIGINT) == 0
    helper_gone(box)

    replace_helper(box, (ROOT / "guest" / "hb-agents").read_text())
    with Watching(box) as watching:
        watching.until(lambda row: True)
        watching.until(lambda row: True)
        assert watching.end(signal.SIGTERM) == 128 + signal.SIGTERM
    helper_gone(box)

    # A box whose stream fails is asked directly until its stream is back.
    shebang, rest = (ROOT / "guest" / "hb-agents").read_text().split("\n", 1)
    replace_helper(
        box, f"{shebang}\nif (process.argv.includes('--watch')) process.exit(1);\n{rest}"
    )
    with Watching(box) as watching:
        failed = False
        while True:
            [row] = [r for r in watching.next() if r["box"] == "b1"]
            failed = failed or "--watch exited with 1" in row["error"]
            if failed and not row["error"]:
                break
        assert row["sessions"][0]["status"] == "needs-you"
        assert watching.end(signal.SIGINT) == 0


async def test_a_helper_without_watch_is_polled_and_a_hostile_stream_is_bounded(box, sim_service):
    # The helper of a box made before --watch: `hb agents --watch` is bad usage there.
    old = subprocess.run(
        ["git", "-C", str(ROOT), "show", "80454e9:guest/hb-agents"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "--watch" not in old
    replace_helper(box, old)
    await asyncio.to_thread(in_box, box, ASK)
    watch = sim_service.agents.watch(relist=0.5)
    events = watch.events()
    try:
        polled = await until(events, lambda e: bool(row_of(e) and row_of(e).sessions))
        assert polled.via == "poll" and polled.row.sessions[0].status == "needs-you"
    finally:
        await events.aclose()

    hostile = {
        # one 10 MB line
        "more than 1024 KB": "process.stdout.write('x'.repeat(10 << 20) + '\\n');"
        "setTimeout(() => {}, 600000);",
        # a listing, then lines that are not JSON
        "not JSON": 'process.stdout.write(\'{"v":1,"sessions":[]}\\n\');'
        "setInterval(() => process.stdout.write('\\x1b]0;pwned\\x07 garbage\\n'), 200);",
        # valid listings as fast as it can
        "floods": "const l = JSON.stringify({v: 1, sessions: []}) + '\\n';"
        "const go = () => { while (process.stdout.write(l)); process.stdout.once('drain', go); };"
        "go();",
    }
    for why, script in hostile.items():
        replace_helper(box, script)
        watch = sim_service.agents.watch(relist=0.5)
        events = watch.events()
        try:
            bad = await until(events, lambda e: bool(row_of(e) and row_of(e).error))
            assert why in bad.row.error and "\x1b" not in bad.row.error, bad.row.error
            assert bad.row.sessions == ()
        finally:
            await events.aclose()
        assert watch.streams == 0  # closing the watch ended the exec, in the box too:
        await asyncio.to_thread(helper_gone, box)


def helper_gone(sim_env: dict[str, str]) -> None:
    """Wait until no hb-agents runs in the box (the pattern does not match itself)."""
    while hbtui("exec", "b1", "--", "pgrep", "-f", "node [/]opt", env=sim_env).returncode == 0:
        pass


async def test_the_dashboard_shows_needs_you_from_the_stream(box, sim_service):
    from textual.widgets import Static

    from hbtui.core.agents.sessions import NEEDS_YOU
    from hbtui.tui.agents.state import lead
    from hbtui.tui.app import HbtuiApp

    from support.pilot import rows
    from support.pilot import until as pilot_until

    polled = []

    async def no_poll(*args: object, **kwargs: object) -> list:
        polled.append(args)
        raise AssertionError("the dashboard polled")

    sim_service.agents.listing = no_poll  # what shows must come from the stream
    app = HbtuiApp(sim_service, refresh_seconds=1)
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot_until(pilot, lambda: ("local", "b1") in app.main.agent_panel.agents, timeout=60)
        await asyncio.to_thread(in_box, box, ASK)

        def asked() -> bool:
            row = app.main.agent_panel.agents.get(("local", "b1"))
            first = lead(row) if row is not None else None
            return first is not None and first.status == NEEDS_YOU

        await pilot_until(pilot, asked, timeout=60, what="needs-you")
        assert "needs-you" in rows(app)["local/b1"]
        assert "1 needs you" in str(app.main.query_one("#host-status", Static).render())
    assert polled == []


async def test_a_remote_stream_comes_back_after_the_connection_drops(
    trusted_host, sim_env, monkeypatch
):
    from hbtui.wiring import build_service

    env, _state, server = trusted_host
    local = {k: sim_env[k] for k in ("HBTUI_SMOLVM", "HBTUI_SMOLVM_STATE_DIR")}
    env = dict(env, HBTUI_RECIPE=str(SIM_RECIPE), **local)
    ok(hbtui("new", "rb1", "--host", "r1", "-q", env=env, timeout=300))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    service = build_service()
    watch = service.agents.watch(relist=0.5)
    events = watch.events()
    try:
        first = await until(events, lambda e: row_of(e, "rb1") is not None)
        assert first.via == "stream" and first.row.host == "r1" and first.row.error == ""
        server.drop_connections()
        script = ASK.replace("s1", "s-remote")
        await asyncio.to_thread(
            lambda: ok(hbtui("exec", "rb1", "--host", "r1", "--", "sh", "-c", script, env=env))
        )
        asked = await until(events, lambda e: bool(row_of(e, "rb1") and row_of(e, "rb1").sessions))
        assert asked.via == "stream"
        assert [s.session_id for s in asked.row.sessions] == ["s-remote"]
    finally:
        await events.aclose()
        await service.close()
    ok(hbtui("rm", "rb1", "--host", "r1", "--force", env=env))
