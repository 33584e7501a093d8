"""Codex and Hermes report their state through hb-agent-hook (guest/), read back by
`hb agents`.

The Codex payloads below are what the real codex 0.171.0 sent to its hooks and its
`notify` program (recorded from a run against tests/sim/fake_openai.py); the last test runs
that real binary, when it is installed, in tmux with the recipe's own managed config. The
Hermes payloads are what hermes-agent 0.19.0's shell-hook bridge
(agent/shell_hooks.py, `_serialize_payload`) made of its own call sites' arguments; no
Hermes runs here.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
GUEST = ROOT / "guest"
FAKE_API = ROOT / "tests" / "sim" / "fake_openai.py"

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs node")

SID = "01a2342f-be6b-7af1-91f1-7592a1160c5e"
TURN = "01a2342f-c0b5-7d12-8a66-3b1d2e7f9a10"
TRANSCRIPT = (
    "/root/.codex/sessions/2026/12/02/rollout-2026-12-02T00-37-53-"
    "01a2342f-be6b-7af1-91f1-7592a1160c5e.jsonl"
)
COMMON = {
    "session_id": SID,
    "transcript_path": TRANSCRIPT,
    "cwd": "/data/home/agent/workspace",
    "model": "gpt-6-sol",
    "permission_mode": "default",
}
# codex 0.171.0, in the order it sent them for one prompt that asked to run a command.
SESSION_START = {**COMMON, "hook_event_name": "SessionStart", "source": "startup"}
PROMPT = {**COMMON, "turn_id": TURN, "hook_event_name": "UserPromptSubmit", "prompt": "run: ls"}
PRE_TOOL = {
    **COMMON,
    "turn_id": TURN,
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "touch ran"},
    "tool_use_id": "call_2",
}
PERMISSION = {
    **COMMON,
    "turn_id": TURN,
    "hook_event_name": "PermissionRequest",
    "tool_name": "Bash",
    "tool_input": {"command": "touch ran", "description": "Run what the user asked"},
}
STOP = {
    **COMMON,
    "turn_id": TURN,
    "hook_event_name": "Stop",
    "stop_hook_active": False,
    "last_assistant_message": "done",
}
# Escape at Codex's approval prompt interrupts the turn: no Stop, no notify, only this.
INTERRUPT = {**COMMON, "turn_id": TURN, "hook_event_name": "Interrupt"}
SESSION_END = {**{k: v for k, v in COMMON.items() if k != "model"}, "reason": "other"}
SESSION_END["hook_event_name"] = "SessionEnd"
# Its notify program gets this as its last argument (`notify = [...]` in config.toml).
NOTIFY = {
    "type": "agent-turn-complete",
    "thread-id": SID,
    "turn-id": TURN,
    "cwd": "/data/home/agent/workspace",
    "client": "codex-tui",
    "input-messages": ["run: ls"],
    "last-assistant-message": "done",
}
# ... and this for a thread of its own (the title it asks the model for): no session.
TITLE_NOTIFY = {
    **NOTIFY,
    "thread-id": "01a2342e-9909-7442-95d5-0ebce2d65d42",
    "turn-id": "01a2342e-992d-7001-873d-c32c8bb032c3",
    "input-messages": ["Generate a concise, single-line task title ..."],
}


HERMES_SID = "20261202_004512_6c1f9a"
HERMES_CWD = "/data/home/agent/workspace"


def hermes_event(event: str, session_id: str = HERMES_SID, **extra: object) -> dict:
    """One payload as Hermes's shell-hook bridge sends it (tool calls add tool_name and
    tool_input; the approval hooks have no session_id)."""
    return {
        "hook_event_name": event,
        "tool_name": None,
        "tool_input": None,
        "session_id": session_id,
        "cwd": HERMES_CWD,
        "extra": extra,
    }


HERMES_TURN = [
    hermes_event("on_session_start", model="gpt-5.5", platform="cli"),
    hermes_event("pre_llm_call", user_message="clean up", conversation_history=[],
                 is_first_turn=True, model="gpt-5.5", platform="cli"),
    {**hermes_event("pre_tool_call", task_id="", tool_call_id="call_1", turn_id="t1",
                    api_request_id="r1", middleware_trace=[]),
     "tool_name": "terminal", "tool_input": {"command": "rm -rf build"}},
]  # fmt: skip
HERMES_ASKS = hermes_event(
    "pre_approval_request",
    "",
    command="rm -rf build",
    description="recursive delete",
    pattern_key="rm_recursive",
    pattern_keys=["rm_recursive"],
    session_key="default",
    surface="cli",
    turn_id="t1",
    tool_call_id="call_1",
)
HERMES_ANSWERED = hermes_event(
    "post_approval_response", "", **{**HERMES_ASKS["extra"], "choice": "once"}
)
HERMES_TURN_END = hermes_event(
    "on_session_end", task_id="", turn_id="t1", completed=True, interrupted=False,
    model="gpt-5.5", platform="cli",
)  # fmt: skip
HERMES_CLOSED = hermes_event("on_session_finalize", platform="cli", reason="exit")


@pytest.fixture
def box(tmp_path: Path) -> dict[str, str]:
    """The environment of an agent in a box: its own HOME (the status files) and a tmux
    pane; no tmux server, so `hb agents` reads only the status files."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TMUX")}
    env.update(HOME=str(tmp_path), TMUX_TMPDIR=str(tmp_path), TMUX_PANE="%3")
    env.pop("XDG_STATE_HOME", None)
    return env


def state(env: dict[str, str]) -> Path:
    return Path(env["HOME"]) / ".local" / "state" / "hermes-box" / "agents"


def hook(env, *args: str, event: object = None, stdin: bytes | None = None):
    """Run hb-agent-hook as Codex does: the event on stdin (or the note as last argument)."""
    data = stdin if stdin is not None else json.dumps(event).encode()
    return subprocess.run(
        ["node", str(GUEST / "hb-agent-hook"), *args],
        input=data,
        env=env,
        capture_output=True,
        timeout=60,
    )


def notify(env, note: object, agent: str = "codex"):
    text = note if isinstance(note, str) else json.dumps(note)
    return hook(env, "--agent", agent, "--notify", text, stdin=b"")


def listing(env) -> dict[str, dict]:
    done = subprocess.run(
        ["node", str(GUEST / "hb-agents"), "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return {s["session_id"]: s for s in json.loads(done.stdout)["sessions"]}


def until(predicate, what: str, timeout: float = 120.0, show=lambda: ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}\n{show()}")


def test_a_codex_turn_is_working_then_idle(box):
    assert hook(box, "--agent", "codex", event=SESSION_START).returncode == 0
    s = listing(box)[SID]
    assert (s["agent"], s["status"], s["pane"], s["source"]) == ("codex", "idle", "%3", "hook")
    hook(box, "--agent", "codex", event=PROMPT)
    hook(box, "--agent", "codex", event=PRE_TOOL)
    assert listing(box)[SID]["status"] == "working"
    hook(box, "--agent", "codex", event=STOP)
    assert listing(box)[SID]["status"] == "idle"
    hook(box, "--agent", "codex", event=PROMPT)
    assert listing(box)[SID]["status"] == "working"
    hook(box, "--agent", "codex", event=INTERRUPT)
    assert listing(box)[SID]["status"] == "idle"
    hook(box, "--agent", "codex", event=SESSION_END)
    assert listing(box)[SID]["status"] == "ended"


def test_notify_ends_the_turn_of_a_session_a_hook_recorded(box):
    hook(box, "--agent", "codex", event=PROMPT)
    assert listing(box)[SID]["status"] == "working"
    assert notify(box, NOTIFY).returncode == 0
    record = json.loads((state(box) / f"{SID}.json").read_text())
    assert (record["status"], record["event"], record["agent"]) == (
        "idle",
        "agent-turn-complete",
        "codex",
    )
    assert listing(box)[SID]["status"] == "idle"


def test_notify_ignores_what_no_hook_recorded(box):
    notify(box, NOTIFY)  # no hook saw this session: nothing to mark
    notify(box, TITLE_NOTIFY)  # Codex's own title thread
    assert not state(box).exists() or not list(state(box).glob("*.json"))
    hook(box, "--agent", "codex", event=PROMPT)
    notify(box, {**NOTIFY, "turn-id": "01a2342f-ffff-7000-8000-000000000000"})  # another turn
    notify(box, {**NOTIFY, "type": "approval-requested"})
    notify(box, NOTIFY, agent="claude")  # a session of another agent
    assert listing(box)[SID]["status"] == "working"
    assert [p.name for p in state(box).glob("*.json")] == [f"{SID}.json"]


def test_a_hermes_turn_asks_and_ends(box):
    for event in HERMES_TURN:
        assert hook(box, "--agent", "hermes", event=event).returncode == 0
    s = listing(box)[HERMES_SID]
    assert (s["agent"], s["status"], s["cwd"], s["pane"]) == ("hermes", "working", HERMES_CWD, "%3")
    smart = {**HERMES_ASKS, "extra": {**HERMES_ASKS["extra"], "surface": "smart"}}
    hook(box, "--agent", "hermes", event=smart)  # its auxiliary model decides, not the user
    assert listing(box)[HERMES_SID]["status"] == "working"
    hook(box, "--agent", "hermes", event=HERMES_ASKS)  # no session_id: this process's session
    s = listing(box)[HERMES_SID]
    assert (s["status"], s["waiting_for"]) == ("needs-you", "terminal: rm -rf build")
    assert "request" not in s  # Hermes cannot take hbtui's decision
    hook(box, "--agent", "hermes", event=HERMES_ANSWERED)
    assert listing(box)[HERMES_SID]["status"] == "working"
    hook(box, "--agent", "hermes", event=HERMES_TURN_END)
    assert listing(box)[HERMES_SID]["status"] == "idle"
    hook(box, "--agent", "hermes", event=HERMES_CLOSED)
    assert listing(box)[HERMES_SID]["status"] == "ended"
    assert [p.name for p in state(box).glob("*.json")] == [f"{HERMES_SID}.json"]


def test_a_hermes_approval_with_no_session_of_its_process_is_dropped(box):
    hook(box, "--agent", "hermes", event=HERMES_ASKS)
    codex_session = {**PROMPT}
    hook(box, "--agent", "codex", event=codex_session)  # another agent's session
    hook(box, "--agent", "hermes", event=HERMES_ASKS)
    assert [p.name for p in state(box).glob("*.json")] == [f"{SID}.json"]
    assert listing(box)[SID]["status"] == "working"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(("--agent", "codex"), id="stdin"),
        pytest.param(("--agent", "codex", "--notify"), id="notify"),
    ],
)
@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(b"{" * 10_000_000, id="10MB"),
        pytest.param(b"not json", id="not-json"),
        pytest.param(b"[1, 2]", id="array"),
        pytest.param(b"\xff\xfe\x00", id="binary"),
        pytest.param(b"", id="empty"),
    ],
)
def test_garbage_is_ignored_quietly(box, args, payload):
    hook(box, "--agent", "codex", event=PROMPT)
    before = (state(box) / f"{SID}.json").read_bytes()
    if "--notify" in args:
        text = payload[:100_000].decode("latin-1").replace("\x00", "")  # what argv can hold
        done = notify(box, text)
    else:
        done = hook(box, *args, stdin=payload)
    assert done.returncode == 0 and done.stdout == b""
    assert (state(box) / f"{SID}.json").read_bytes() == before


def test_huge_fields_are_capped_and_not_copied(box):
    command = "rm -rf /\x1b]52;c;ZXZpbA==\x07" + "x" * 200_000
    hook(box, "--agent", "codex", event={**PRE_TOOL, "tool_input": {"command": command}})
    big_note = {**NOTIFY, "last-assistant-message": "y" * 120_000}
    hook(box, "--agent", "codex", event=PROMPT)
    notify(box, big_note)
    assert (state(box) / f"{SID}.json").stat().st_size < 4096
    for agent in ("evil", ""):
        assert hook(box, "--agent", agent, event=PROMPT).returncode == 0
    before = (state(box) / f"{SID}.json").read_bytes()
    for name in ("constructor", "__proto__", "toString", 7, None):
        done = hook(box, "--agent", "codex", event={**PROMPT, "hook_event_name": name})
        assert done.returncode == 0 and done.stderr == b""
    assert (state(box) / f"{SID}.json").read_bytes() == before  # no event, no change
    assert json.loads((state(box) / f"{SID}.json").read_text())["status"] == "idle"


def test_a_permission_request_waits_for_hbtuis_answer(box):
    """Codex takes the same decision JSON as Claude: hb-agents decide answers it."""
    hook(box, "--agent", "codex", event=PROMPT)
    asking = subprocess.Popen(
        ["node", str(GUEST / "hb-agent-hook"), "--agent", "codex"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=box,
    )
    try:
        assert asking.stdin is not None
        asking.stdin.write(json.dumps(PERMISSION).encode())
        asking.stdin.close()
        waiting = until(lambda: listing(box)[SID].get("request") and listing(box)[SID], "a request")
        assert (waiting["status"], waiting["waiting_for"]) == ("needs-you", "Bash: touch ran")
        shown = [SID, waiting["request"], "deny", waiting["waiting_for"]]
        decided = subprocess.run(
            ["node", str(GUEST / "hb-agents"), "decide", *shown],
            env=box,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert json.loads(decided.stdout) == {"via": "hook", "decision": "deny"}, decided.stderr
        assert asking.stdout is not None
        out = asking.stdout.read()
        assert asking.wait(timeout=60) == 0
    finally:
        asking.kill()
    assert json.loads(out) == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "Denied from hbtui"},
        }
    }
    assert listing(box)[SID]["status"] == "working"


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_a_request_nobody_answered_still_asks_since_it_asked(box, tmp_path):
    """The hook's wait for hbtui running out leaves the request to the agent's own prompt:
    the session still needs you, since the moment it asked (not since the wait ended)."""
    (tmp_path / "event.json").write_text(json.dumps(PERMISSION))
    hook(box, "--agent", "codex", event=PROMPT)
    asked = time.time()
    in_etc_overlay(
        tmp_path,
        "echo HB_AGENT_DECISION_SECONDS=1 > /etc/hermes-box.env\n"
        f"node {GUEST}/hb-agent-hook --agent codex < {tmp_path}/event.json\n",
        env=box,
    )
    waited = time.time()
    record = json.loads((state(box) / f"{SID}.json").read_text())
    assert (record["status"], record["waiting_for"]) == ("needs-you", "Bash: touch ran")
    assert "request" not in record  # nobody waits for hbtui's answer any more
    assert asked <= record["since"] <= waited - 1.0


def test_an_agent_gone_without_a_word_ended_when_it_was_first_seen_gone(box):
    """A box stopped 8 minutes after its agent's last event and started again: the session
    ended when the listing first saw its process gone, and stays ended since then."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    long_ago = time.time() - 480
    state(box).mkdir(parents=True)
    status = state(box) / f"{SID}.json"
    status.write_text(
        json.dumps({"v": 1, "agent": "codex", "session_id": SID, "pid": dead.pid,
                    "proc_start": "1", "status": "working", "since": long_ago,
                    "started": long_ago, "cwd": "/data/home/agent/workspace"})
    )  # fmt: skip
    os.utime(status, (long_ago, long_ago))
    before = time.time()
    first = listing(box)[SID]
    assert first["status"] == "ended"
    assert first["since"] >= before  # not the file's age, not the last event's
    assert listing(box)[SID]["since"] == first["since"]  # the first sighting is kept


# -- the real codex ----------------------------------------------------------------------------


def codex_against_fake_api(box: dict[str, str], tmp_path: Path) -> tuple[Path, int, dict]:
    """A git workspace, and a CODEX_HOME whose provider is the fake OpenAI API on a free
    port (trusting that workspace): the workspace, the port, the environment."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    port = free_port()
    (codex_home / "config.toml").write_text(
        'model = "gpt-6-sol"\nmodel_provider = "fake"\ndisable_paste_burst = true\n'
        "\n[model_providers.fake]\n"
        f'name = "fake"\nbase_url = "http://127.0.0.1:{port}/v1"\nwire_api = "responses"\n'
        f'env_key = "FAKE_OPENAI_KEY"\n\n[projects."{workspace}"]\ntrust_level = "trusted"\n'
    )
    env = {**box, "CODEX_HOME": str(codex_home), "FAKE_OPENAI_KEY": "sk-fake"}
    env.pop("TMUX_PANE")
    return workspace, port, env


def codex_pin() -> str:
    text = (ROOT / "provision" / "versions.env").read_text()
    return next(line.split("=", 1)[1] for line in text.splitlines() if line.startswith("CODEX_"))


def codex_ready() -> str:
    """Why the real codex cannot run here, or ''."""
    if shutil.which("codex") is None:
        return "codex is not installed"
    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("tmux") is None:
        return "needs root, unshare and tmux (Codex's managed config lives in /etc)"
    version = subprocess.run(["codex", "--version"], capture_output=True, text=True).stdout
    if version.split()[-1:] != [codex_pin()]:
        return f"codex {version.strip()} is not the recipe's pin {codex_pin()}"
    return ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def in_etc_overlay(tmp_path: Path, script: str, env=None) -> str:
    """Run a bash script as root in a mount namespace whose /etc is a copy-on-write overlay
    (Codex's managed config has a fixed path in /etc); returns its output."""
    for d in ("upper", "work"):
        (tmp_path / d).mkdir(exist_ok=True)
    mount = (
        "set -e\nmount -t overlay overlay -o "
        f"lowerdir=/etc,upperdir={tmp_path}/upper,workdir={tmp_path}/work /etc\n"
        f". {ROOT}/provision/lib.sh\nHB_BIN={GUEST}\n"
    )
    done = subprocess.run(
        ["unshare", "-m", "bash", "-c", mount + script],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
@pytest.mark.parametrize(("mode", "policy"), [("ask", "on-request"), ("skip", "never")])
def test_the_recipe_gives_codex_hooks_notify_and_the_boxs_mode(tmp_path, mode, policy):
    import tomllib

    text = in_etc_overlay(
        tmp_path, f"hb_codex_settings {mode} 60\ncat /etc/codex/managed_config.toml"
    )
    config = tomllib.loads(text)
    hook = f"{GUEST}/hb-agent-hook"
    assert config["notify"] == [hook, "--agent", "codex", "--notify"]
    assert config["approval_policy"] == policy
    assert config["features"] == {"daemon_auto_start": False}
    events = ["SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest"]
    events += ["PostToolUse", "Stop", "Interrupt", "SessionEnd"]
    assert list(config["hooks"]) == events
    for event, [group] in config["hooks"].items():
        [handler] = group["hooks"]
        assert handler["command"] == f"{hook} --agent codex"
        assert handler["timeout"] == {"PermissionRequest": 60, "Interrupt": 3, "SessionEnd": 3}.get(
            event, 10
        )


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_the_recipe_gives_hermes_its_hooks_in_the_managed_scope(tmp_path):
    text = in_etc_overlay(tmp_path, "hb_hermes_settings\ncat /etc/hermes/config.yaml")
    events = ["on_session_start", "pre_llm_call", "pre_tool_call", "post_tool_call"]
    events += ["pre_approval_request", "post_approval_response", "on_session_end"]
    events += ["on_session_finalize"]
    entry = f"    - command: {GUEST}/hb-agent-hook --agent hermes\n      timeout: 10\n"
    expected = "hooks_auto_accept: true\nhooks:\n" + "".join(f"  {e}:\n{entry}" for e in events)
    assert text.split("\n", 1)[1] == expected  # under the comment line


@pytest.mark.real_agent
@pytest.mark.skipif(bool(codex_ready()), reason=codex_ready() or "ready")
def test_the_real_codex_asks_is_approved_and_denied(box, tmp_path):
    """codex of the pin in tmux, /etc/codex/managed_config.toml written by the recipe's own
    step (in a mount namespace of its own, over a copy-on-write /etc), against a fake API."""
    workspace, port, env = codex_against_fake_api(box, tmp_path)
    api = subprocess.Popen([sys.executable, str(FAKE_API), str(port)], env=env)
    try:
        in_etc_overlay(
            tmp_path,
            f"hb_codex_settings ask 60\ncd {workspace}\n"
            "tmux -f /dev/null new-session -d -s cx -x 150 -y 45 codex\n",
            env,
        )

        def screen() -> str:
            return subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", "cx"], env=env, capture_output=True, text=True
            ).stdout

        def prompt(text: str) -> None:
            subprocess.run(["tmux", "send-keys", "-t", "cx", "-l", text], env=env, check=True)
            until(lambda: text in screen(), "the prompt typed")
            subprocess.run(["tmux", "send-keys", "-t", "cx", "Enter"], env=env, check=True)

        def asking(command: str, hook: bool = True):
            """The session once it asks to run `command`: through the hook (which waits for
            hbtui's answer) or, once the hook gave up, at Codex's own prompt."""

            def check():
                s = next((s for s in listing(env).values() if s["agent"] == "codex"), None)
                ok = s and s["status"] == "needs-you" and bool(s.get("request")) == hook
                ok = ok and (hook or "Would you like to run" in screen())
                return s if ok and s["waiting_for"] == f"Bash: {command}" else None

            return until(
                check, f"codex asking to run {command}", show=lambda: (screen(), listing(env))
            )

        def decide(shown: dict, decision: str, via: str = "hook") -> None:
            done = subprocess.run(
                ["node", str(GUEST / "hb-agents"), "decide", shown["session_id"],
                 shown.get("request") or "-", decision, shown["waiting_for"]],
                env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert json.loads(done.stdout) == {"via": via, "decision": decision}, done.stderr

        def idle(sid: str):
            return until(lambda: listing(env)[sid]["status"] == "idle", "codex idle again")

        until(lambda: "Ask Codex" in screen(), "codex's prompt")
        ran, denied = workspace / "ran", workspace / "denied"
        prompt(f"run: touch {ran}")
        session = asking(f"touch {ran}")
        assert session["pane"].startswith("%") and session["source"] == "hook"
        decide(session, "allow")
        until(ran.exists, "the approved command to run")
        idle(session["session_id"])

        prompt(f"run: touch {denied}")
        decide(asking(f"touch {denied}"), "deny")
        idle(session["session_id"])
        assert not denied.exists()

        # The hook waits no more: Codex's own prompt, answered through the pane's keys; its
        # Escape interrupts the turn, which only the Interrupt hook reports.
        server = subprocess.run(
            ["tmux", "display-message", "-p", "-t", "cx", "#{pid}"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        subprocess.run(
            ["nsenter", "-t", server, "-m", "sh", "-c",
             "echo HB_AGENT_DECISION_SECONDS=0 > /etc/hermes-box.env"],
            check=True,
        )  # fmt: skip
        keyed, refused = workspace / "keyed", workspace / "refused"
        prompt(f"run: touch {keyed}")
        decide(asking(f"touch {keyed}", hook=False), "allow", via="keys")
        until(keyed.exists, "the command approved at Codex's prompt to run")
        idle(session["session_id"])
        prompt(f"run: touch {refused}")
        decide(asking(f"touch {refused}", hook=False), "deny", via="keys")
        idle(session["session_id"])
        assert not refused.exists()
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        api.kill()
        api.wait()


@pytest.mark.real_agent
@pytest.mark.skipif(bool(codex_ready()), reason=codex_ready() or "ready")
def test_the_real_codex_is_stopped_and_resumed_with_its_conversation(box, tmp_path):
    """codex of the pin in tmux as the test above runs it: `hb agents stop` ends it at its
    own keys, and the command line `hbtui agents resume` builds for it goes on with the
    same session, whose next request holds the earlier prompt."""
    from hbtui.core.agents.lifecycle import resume_command

    workspace, port, env = codex_against_fake_api(box, tmp_path)
    log = tmp_path / "api.log"
    api = subprocess.Popen([sys.executable, str(FAKE_API), str(port), str(log)], env=env)

    def tmux(*args: str) -> str:
        done = subprocess.run(["tmux", *args], env=env, capture_output=True, text=True)
        return done.stdout

    def prompt(window: str, text: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", window, "-l", text], env=env, check=True)
        until(lambda: text in tmux("capture-pane", "-p", "-t", window), "the prompt typed")
        subprocess.run(["tmux", "send-keys", "-t", window, "Enter"], env=env, check=True)

    def codex_session() -> dict | None:
        return next((s for s in listing(env).values() if s["agent"] == "codex"), None)

    try:
        in_etc_overlay(
            tmp_path,
            f"hb_codex_settings ask 60\ncd {workspace}\n"
            # Its window stays when it ends (as hbtui's launcher's does), and tmux with it.
            "tmux -f /dev/null new-session -d -s cx -x 150 -y 45 'codex; exec sleep 600'\n",
            env,
        )
        until(lambda: "Ask Codex" in tmux("capture-pane", "-p", "-t", "cx"), "codex's prompt")
        prompt("cx", "remember the word teal")
        first = until(
            lambda: (s := codex_session()) and s["status"] == "idle" and log.exists() and s,
            "codex idle after its first turn",
        )
        sid = first["session_id"]
        stopped = subprocess.run(
            ["node", str(GUEST / "hb-agents"), "stop", sid, "5000"],
            env=env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        ended = json.loads(stopped.stdout)  # at its own /quit, or (a loaded machine) SIGTERM
        assert ended["stopped"] == sid and ended["how"] in ("exit", "SIGTERM"), stopped.stderr
        until(lambda: listing(env)[sid]["status"] == "ended", "codex's session ended")

        line = resume_command("codex", sid, fork=False)
        assert line == f"codex resume {sid}"
        tmux("new-window", "-t", "cx:1", "-c", str(workspace), f"{line}; exec sleep 600")
        # Codex runs no hook as it resumes (only at the next prompt): its screen says it.
        until(
            lambda: "• ok" in tmux("capture-pane", "-p", "-t", "cx:1"),
            "the resumed session showing its earlier turn",
        )
        asked = len(log.read_text().splitlines())
        prompt("cx:1", "which word?")
        until(lambda: len(log.read_text().splitlines()) > asked, "the resumed session's request")
        said = json.loads(log.read_text().splitlines()[asked])["user"]
        assert any("remember the word teal" in t for t in said), said
        assert any("which word?" in t for t in said), said
        again = until(lambda: listing(env)[sid]["pane"] != first["pane"] and listing(env)[sid],
                      "the same session, in its new pane")  # fmt: skip
        assert again["status"] in ("working", "idle"), again
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        api.kill()
        api.wait()


def hermes_ready() -> str:
    """Why the real hermes cannot run here, or ''."""
    if shutil.which("hermes") is None or shutil.which("tmux") is None:
        return "hermes (hermes-agent) and tmux are not installed"
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare (the recipe writes /etc/hermes)"
    pin = next(
        line.split("=", 1)[1]
        for line in (ROOT / "provision" / "versions.env").read_text().splitlines()
        if line.startswith("HERMES_AGENT_VERSION=")
    )
    version = subprocess.run(["hermes", "--version"], capture_output=True, text=True).stdout
    if pin not in version.split() and f"v{pin}" not in version.split():
        return f"hermes {version.strip()[:60]!r} is not the recipe's pin {pin}"
    return ""


@pytest.mark.real_agent
@pytest.mark.skipif(bool(hermes_ready()), reason=hermes_ready() or "ready")
def test_the_real_hermes_reports_and_is_answered_at_its_prompt(box, tmp_path):
    """hermes of the pin in tmux with the recipe's managed scope, against a fake API: its
    hooks say what it does; its own prompt takes hbtui's answer through the pane's keys."""
    managed = tmp_path / "managed"
    managed.mkdir()
    text = in_etc_overlay(tmp_path, "hb_hermes_settings\ncat /etc/hermes/config.yaml")
    (managed / "config.yaml").write_text(text)
    port = free_port()
    hermes_home = tmp_path / "hermes-home"
    hermes_home.mkdir()
    (hermes_home / "config.yaml").write_text(
        f"model:\n  default: fake-model\n  provider: custom\n"
        f"  base_url: http://127.0.0.1:{port}/v1\n  api_key: sk-fake\n"
    )
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = {k: v for k, v in box.items() if k not in ("TMUX_PANE", "PYTEST_CURRENT_TEST")}
    env.update(HERMES_HOME=str(hermes_home), HERMES_MANAGED_DIR=str(managed))
    api = subprocess.Popen([sys.executable, str(FAKE_API), str(port)], env=env)
    try:
        subprocess.run(
            ["tmux", "-f", "/dev/null", "new-session", "-d", "-s", "h", "-x", "150", "-y", "45",
             "-c", str(workspace), "hermes"],
            env=env, check=True,
        )  # fmt: skip

        def screen() -> str:
            return subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", "h"], env=env, capture_output=True, text=True
            ).stdout

        def asking(target: Path) -> dict:
            subprocess.run(["tmux", "send-keys", "-t", "h", "-l", f"run: rm -rf {target}"],
                           env=env, check=True)  # fmt: skip
            until(lambda: f"run: rm -rf {target}" in screen(), "the prompt typed")
            subprocess.run(["tmux", "send-keys", "-t", "h", "Enter"], env=env, check=True)

            def check():
                s = next((s for s in listing(env).values() if s["agent"] == "hermes"), None)
                ok = s and s["status"] == "needs-you" and "Dangerous Command" in screen()
                return s if ok and s["waiting_for"] == f"terminal: rm -rf {target}" else None

            return until(check, "hermes asking", 120, show=lambda: (screen(), listing(env)))

        def decide(shown: dict, decision: str) -> None:
            done = subprocess.run(
                ["node", str(GUEST / "hb-agents"), "decide", shown["session_id"], "-", decision,
                 shown["waiting_for"]],
                env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert json.loads(done.stdout) == {"via": "keys", "decision": decision}, done.stderr

        def idle(sid: str) -> None:
            until(lambda: listing(env)[sid]["status"] == "idle", "hermes idle again", 120)

        until(lambda: "Welcome to Hermes" in screen(), "hermes's prompt", 120, show=screen)
        removed, kept = workspace / "removed", workspace / "kept"
        removed.mkdir()
        kept.mkdir()
        session = asking(removed)
        assert session["pane"].startswith("%") and session["source"] == "hook"
        assert "request" not in session  # its hooks only observe
        decide(session, "allow")
        until(lambda: not removed.exists(), "the approved command to run", 120)
        idle(session["session_id"])
        decide(asking(kept), "deny")
        idle(session["session_id"])
        assert kept.exists()
    finally:
        subprocess.run(["tmux", "kill-server"], env=env, capture_output=True)
        api.kill()
        api.wait()
