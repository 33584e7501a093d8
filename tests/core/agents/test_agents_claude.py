"""Agents in a simulator box, end to end: the real `claude` of the recipe's pin (installed
from the npm registry by .ci/run) against a fake Messages API running in the same box; its
hooks, `hb agents`, and `hbtui agents / approve / deny / send` on the host.

The box has its own network namespace, so the fake listens on the box's loopback.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import time

import pytest

from support import HBTUI_BIN, SIM_RECIPE
from support.agents import (
    CLAUDE,
    FAKE_API,
    SETUP,
    WORKSPACE,
    exists,
    in_box,
    sessions,
    wait_session,
)
from support.cli import hbtui, ok

pytestmark = [
    pytest.mark.real_agent,
    pytest.mark.sim,
    pytest.mark.skipif(
        shutil.which("node") is None, reason="node is missing (the box's agent helpers need it)"
    ),
]

STATE = "/data/home/agent/.local/state/hermes-box/agents"


def as_root(sim_env, argv: list[str]) -> None:
    subprocess.run(
        [
            sim_env["HBTUI_SMOLVM"],
            "--state-dir",
            sim_env["HBTUI_SMOLVM_STATE_DIR"],
            "machine",
            "exec",
            "--name",
            "b1",
            "--",
            *argv,
        ],
        check=True,
        capture_output=True,
    )


def one_error_line(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def ask(env, command: str) -> tuple[dict, float]:
    """Type a prompt whose fake reply asks to run `command`; wait until hbtui shows the
    request. Returns the session and how long after the agent asked hbtui showed it."""
    sent = hbtui("send", "b1", f"run: {command}", env=env)
    assert sent.returncode == 0, sent.stderr
    missed = []  # when each query that did not show it began
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        began = time.time()
        found = [s for s in sessions(env) if s["status"] == "needs-you"]
        if not found:
            missed.append(began)
            continue
        [s] = found
        assert s["waiting_for"] == f"Bash: {command}"
        # Nothing stale: no query that began after the agent asked missed it.
        assert not [t for t in missed if t > s["since"] + 0.2], (missed, s["since"])
        return s, time.time() - s["since"]
    raise AssertionError(f"claude never asked to run {command!r}")


@pytest.mark.timeout(900)
@pytest.mark.skipif(CLAUDE is None, reason="claude is not installed (.ci/run installs the pin)")
@pytest.mark.skipif(
    CLAUDE is not None and CLAUDE < (2, 1, 139),
    reason=f"claude {CLAUDE} predates the session files and hooks these tests drive (2.1.139)",
)
def test_real_claude_asks_and_hbtui_approves_denies_and_sees_it_end(sim_env):
    made = hbtui("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    in_box(sim_env, "cat > ~/fake_api.py", input=FAKE_API.read_text())
    in_box(sim_env, SETUP)
    # SessionStart: the managed settings' hook reports the session, in its pane.
    started = wait_session(sim_env, lambda s: s["status"] == "idle" and s["pane"])
    assert started["agent"] == "claude" and started["pane"].startswith("%")

    # 1. Approve through the waiting hook: the command runs; working (until the test lets
    # it end: a fixed `sleep 4` was over before a loaded machine's poll saw it), then idle.
    in_box(sim_env, "mkfifo ~/gate")
    asked, shown_after = ask(sim_env, f"cat ~/gate; touch {WORKSPACE}/ran")
    assert asked["request"], "the hook should be waiting for hbtui's decision"
    print(f"needs-you shown {shown_after:.2f} s after claude asked")
    ok = hbtui("approve", "b1", env=sim_env)
    assert ok.returncode == 0 and "through its hook" in ok.stdout, ok.stdout + ok.stderr
    wait_session(sim_env, lambda s: s["status"] == "working", timeout=30)
    in_box(sim_env, "echo go > ~/gate")
    done = wait_session(sim_env, lambda s: s["status"] == "idle", timeout=60)
    assert exists(sim_env, f"{WORKSPACE}/ran")
    # What the session did: tokens from its transcript, the workspace's git state.
    assert done["tokens_in"] > 0 and done["tokens_out"] > 0
    assert done["git"] == {"branch": "main", "changed": 1, "commits": 0}
    in_box(sim_env, "git add ran && git -c user.name=t -c user.email=t@b commit -qm ran")
    [after] = sessions(sim_env)
    assert after["git"] == {"branch": "main", "changed": 0, "commits": 1}

    # 2. Deny through the hook: the command never runs, the turn ends.
    ask(sim_env, f"touch {WORKSPACE}/denied")
    no = hbtui("deny", "b1", env=sim_env)
    assert no.returncode == 0 and "through its hook" in no.stdout, no.stdout + no.stderr
    wait_session(sim_env, lambda s: s["status"] == "idle", timeout=60)
    assert not exists(sim_env, f"{WORKSPACE}/denied")

    # Nothing pending now: one line, non-zero.
    one_error_line(hbtui("approve", "b1", env=sim_env), "nothing is pending")

    # 3. The hook stops waiting (a 1 s box setting): hbtui answers Claude's own prompt.
    as_root(
        sim_env,
        ["sed", "-i", "s/^HB_AGENT_DECISION_SECONDS=.*/HB_AGENT_DECISION_SECONDS=1/",
         "/etc/hermes-box.env"],
    )  # fmt: skip
    asked, _ = ask(sim_env, f"touch {WORKSPACE}/bykeys")
    wait_session(sim_env, lambda s: s["status"] == "needs-you" and not s["request"], timeout=30)
    ok = hbtui("approve", "b1", env=sim_env)
    assert ok.returncode == 0 and "at its prompt" in ok.stdout, ok.stdout + ok.stderr
    wait_session(sim_env, lambda s: s["status"] == "idle", timeout=60)
    assert exists(sim_env, f"{WORKSPACE}/bykeys")
    ask(sim_env, f"touch {WORKSPACE}/bykeys-denied")
    wait_session(sim_env, lambda s: s["status"] == "needs-you" and not s["request"], timeout=30)
    no = hbtui("deny", "b1", env=sim_env)
    assert no.returncode == 0 and "at its prompt" in no.stdout, no.stdout + no.stderr
    # A prompt cancelled in the pane fires no hook: Claude's session file says idle.
    wait_session(sim_env, lambda s: s["status"] == "idle", timeout=60)
    assert not exists(sim_env, f"{WORKSPACE}/bykeys-denied")

    # 5. A closed session is ended, and nothing can be sent to it.
    assert hbtui("send", "b1", "/exit", env=sim_env).returncode == 0
    wait_session(sim_env, lambda s: s["status"] == "ended", timeout=60)
    one_error_line(hbtui("send", "b1", "hello", env=sim_env), "no live agent session")
    one_error_line(hbtui("approve", "nosuch", env=sim_env), "nosuch")
    assert hbtui("stop", "b1", env=sim_env).returncode == 0
    one_error_line(hbtui("deny", "b1", env=sim_env), "stopped")


# Status files a confused or hostile box could hold, each next to a live process: a live
# `sleep` stands for an agent (its pid and kernel start time are what a hook records).
HOSTILE = f"""
set -e
mkdir -p {STATE} && cd {STATE}
setsid sleep 600 </dev/null >/dev/null 2>&1 &
pid=$!
start=$(python3 -c 'import sys; s=open(f"/proc/{{sys.argv[1]}}/stat").read(); print(s[s.rindex(")")+2:].split()[19])' $pid)
now=$(date +%s)
head -c 10485760 /dev/zero | tr '\\0' 'x' > big.json
printf 'not json\\n{{"status":' > notjson.json
printf '{{"session_id":"dead","status":"working","pid":3999999,"proc_start":"1","since":%s}}' $now > dead.json
printf '{{"session_id":"reused","status":"working","pid":%s,"proc_start":"12","since":%s}}' $pid $now > reused.json
printf '{{"session_id":"escape","status":"needs-you","pid":%s,"proc_start":"%s","since":%s,"waiting_for":"Bash: ls \\\\u001b]52;c;ZXZpbA==\\\\u0007\\\\u001b[2J\\\\u001b]0;pwned\\\\u0007done"}}' $pid "$start" $now > escape.json
printf '{{"session_id":"second","status":"needs-you","pid":%s,"proc_start":"%s","since":%s,"waiting_for":"Bash: true"}}' $pid "$start" $now > second.json
"""

# Works for a while (its screen changes), asks, does what it was allowed, then waits.
FAKE_CODEX = """
import time
for i in range(12):
    print(f"thinking {i}", flush=True)
    time.sleep(0.4)
if input("Allow command `touch codex-ran`? (y/n) ").strip() == "y":
    open("codex-ran", "w").close()
    print("done", flush=True)
time.sleep(600)
"""


def test_hostile_status_files_each_give_a_sane_row_and_bad_input_one_line(sim_env):
    made = hbtui("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env, timeout=300)
    assert made.returncode == 0, made.stdout + made.stderr
    [listed] = json.loads(hbtui("ls", "--json", env=sim_env).stdout)
    assert listed["agent_permissions"] == "ask"
    settings = in_box(sim_env, "cat /etc/claude-code/managed-settings.json")
    assert json.loads(settings)["permissions"]["defaultMode"] == "default"
    codex = in_box(sim_env, "cat /etc/codex/managed_config.toml /etc/hermes/config.yaml")
    assert 'approval_policy = "on-request"' in codex and "hb-agent-hook --agent hermes" in codex
    refused = hbtui("new", "b2", "--recipe", str(SIM_RECIPE), "--agent-permissions", "skip",
                    env=sim_env)  # fmt: skip
    one_error_line(refused, "allow-list")
    assert [b["name"] for b in json.loads(hbtui("ls", "--json", env=sim_env).stdout)] == ["b1"]
    in_box(sim_env, HOSTILE)
    rows = {s["session_id"]: s for s in sessions(sim_env)}
    assert rows["big"]["status"] == "error" and "too large" in rows["big"]["error"]
    assert rows["notjson"]["status"] == "error" and "not JSON" in rows["notjson"]["error"]
    assert rows["dead"]["status"] == "ended"  # its process is gone: never `working`
    assert rows["reused"]["status"] == "ended"  # the pid is another process now
    escape = rows["escape"]
    assert escape["status"] == "needs-you"
    assert "\x1b" not in escape["waiting_for"] and "\x07" not in escape["waiting_for"]
    assert escape["waiting_for"].startswith("Bash: ls") and escape["waiting_for"].endswith("done")
    table = hbtui("agents", env=sim_env)
    assert table.returncode == 0 and "\x1b]" not in table.stdout and "too large" in table.stdout

    # A pane that prints terminal commands: only its colours reach the host.
    in_box(
        sim_env,
        "tmux new-session -d -s shady -x 80 -y 10 "
        "\"printf '\\033]0;pwned\\007\\033[31mred\\033[0m \\033]52;c;ZXZpbA==\\007"
        "ok\\n'; sleep 600\"",
    )
    pane_id = in_box(sim_env, "tmux list-panes -t shady -F '#{pane_id}'").strip()

    async def screen() -> str:
        from hbtui.wiring import build_service

        service = build_service()
        try:
            return await service.agents.pane("b1", pane_id)
        finally:
            await service.close()

    deadline = time.monotonic() + 30
    shown = asyncio.run(screen())
    while "ok" not in shown and time.monotonic() < deadline:
        shown = asyncio.run(screen())
    assert "\x1b[31mred\x1b[39m ok" in shown  # tmux re-encodes the colours it kept
    assert "\x1b]" not in shown and "pwned" not in shown and "ZXZpbA" not in shown

    # Two sessions wait and none is named: one line, nothing done.
    one_error_line(hbtui("approve", "b1", env=sim_env), "2 sessions", "--session")
    one_error_line(hbtui("send", "b1", "hi", env=sim_env), "2 agent sessions")
    # Named, but it runs in no pane hbtui can reach, and its hook is not waiting.
    one_error_line(
        hbtui("approve", "b1", "--session", "escape", env=sim_env),
        "session escape",
        "waits for you in no tmux pane",
        "hbtui enter b1",
    )
    one_error_line(hbtui("approve", "b1", "--session", "dead", env=sim_env), "no live")
    one_error_line(hbtui("send", "b1", "a\x1b]0;x\x07", env=sim_env), "control")
    one_error_line(hbtui("agents", "nosuch", env=sim_env), "nosuch")
    # The agent disappears while its request is pending: one line, nothing done.
    in_box(sim_env, "pkill -x sleep")
    gone = {s["session_id"]: s["status"] for s in sessions(sim_env)}
    assert gone["escape"] == gone["second"] == "ended"
    one_error_line(hbtui("approve", "b1", "--session", "escape", env=sim_env), "no live")
    one_error_line(hbtui("approve", "b1", env=sim_env), "nothing is pending")

    # An agent with no hooks (a stand-in named codex): its screen says what it does.
    in_box(sim_env, "cat > ~/fake_codex.py", input=FAKE_CODEX)
    in_box(sim_env, "tmux new-session -d -s cx -x 80 -y 20 'exec -a codex python3 ~/fake_codex.py'")
    wait_session(sim_env, lambda s: s["agent"] == "codex" and s["status"] == "working")
    asked = wait_session(sim_env, lambda s: s["agent"] == "codex" and s["status"] == "needs-you")
    assert asked["waiting_for"] == "Allow command `touch codex-ran`? (y/n)"
    assert hbtui("send", "b1", "y", env=sim_env).returncode == 0
    wait_session(sim_env, lambda s: s["agent"] == "codex" and s["status"] == "idle")
    assert exists(sim_env, f"{WORKSPACE}/codex-ran")

    assert hbtui("stop", "b1", env=sim_env).returncode == 0
    one_error_line(hbtui("approve", "b1", env=sim_env), "stopped")
    stopped = json.loads(hbtui("agents", "b1", "--json", env=sim_env).stdout)
    assert stopped == [
        {"box": "b1", "host": "local", "error": "the box is stopped", "sessions": []}
    ]


def test_watch_shows_the_table_and_ends_on_ctrl_c(sim_env):
    """No box: one empty list (JSON comes again only on a change), until Ctrl-C."""
    import signal

    proc = subprocess.Popen(
        [HBTUI_BIN, "agents", "--watch", "--json"],
        env=sim_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "[]"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert proc.stdout.read() == ""
    finally:
        proc.kill()
        proc.wait()


# A session of a stand-in agent: `cat` in a tmux pane keeps every line typed into it, and a
# status file names the pane, as hb-agent-hook would write it.
STAND_IN = f"""
set -e
mkdir -p {STATE}
tmux new-session -d -s main -x 80 -y 10 'cat > ~/typed'
pane=$(tmux list-panes -t main -F '#{{pane_id}}')
pid=$(tmux list-panes -t main -F '#{{pane_pid}}')
start=$(python3 -c 'import sys; s=open(f"/proc/{{sys.argv[1]}}/stat").read(); print(s[s.rindex(")")+2:].split()[19])' $pid)
printf '{{"session_id":"s-%s","status":"needs-you","pid":%s,"proc_start":"%s","since":%s,"pane":"%s","waiting_for":"Bash: make"}}' \\
    "$(hostname)" $pid "$start" $(date +%s) $pane > {STATE}/s-$(hostname).json
"""


def test_agents_across_hosts_and_text_sent_over_ssh_stays_text(trusted_host, sim_env):
    env, _state, _server = trusted_host
    local = {k: sim_env[k] for k in ("HBTUI_SMOLVM", "HBTUI_SMOLVM_STATE_DIR")}
    env = dict(env, HBTUI_RECIPE=str(SIM_RECIPE), **local)
    ok(hbtui("new", "lb1", "-q", env=env, timeout=300))
    ok(hbtui("new", "rb1", "--host", "r1", "-q", env=env, timeout=300))
    for box, host in (("lb1", "local"), ("rb1", "r1")):
        ok(hbtui("exec", box, "--host", host, "--", "sh", "-c", STAND_IN, env=env))
    rows = json.loads(ok(hbtui("agents", "--json", env=env)).stdout)
    got = {(r["host"], r["box"]): [s["session_id"] for s in r["sessions"]] for r in rows}
    assert got == {("local", "lb1"): ["s-lb1"], ("r1", "rb1"): ["s-rb1"]}

    # Text for the agent goes as argv through the engine and SSH: no shell sees it.
    text = 'it\'s $(touch /tmp/pwned) `id` "quoted" ; echo x | cat && rm -rf ~'
    ok(hbtui("send", "rb1", text, "--host", "r1", env=env))
    typed = ""
    for _ in range(100):  # until the pane's `cat` has written the line
        typed = hbtui("exec", "rb1", "--host", "r1", "--", "cat", "../typed", env=env).stdout
        if typed:
            break
    assert typed == text + "\n"
    gone = hbtui("exec", "rb1", "--host", "r1", "--", "test", "-e", "/tmp/pwned", env=env)
    assert gone.returncode != 0
    for box, host in (("lb1", "local"), ("rb1", "r1")):
        ok(hbtui("rm", box, "--host", host, "--force", env=env))
