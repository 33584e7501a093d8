"""The real `claude` in a simulator box, for the agent tests (tests/core/agents/test_agents_claude.py,
tests/tui/test_tui_agents_claude.py): the fake Messages API it talks to, the set-up that starts
it in tmux "main" of box b1, and waits on `hbtui agents`."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from support import recipe_with
from support.cli import hbtui
from support.work import stand_in

FAKE_API = Path(__file__).parents[1] / "sim" / "fake_anthropic.py"
WORKSPACE = "/data/home/agent/workspace"
KEY = "sk-ant-fake-0123456789abcdefghijklmnop"
API_LOG = "/data/home/agent/api.log"  # the fake API's: one JSON line per request

# Run as the box's `claude`: the real one against the fake Messages API in the box (started
# here, on the box's loopback, once: a second start finds its port taken and ends), its
# first-run dialogs answered ahead for the folder it runs in.
REAL_CLAUDE = stand_in(
    "export ANTHROPIC_BASE_URL=http://127.0.0.1:18555 ANTHROPIC_API_KEY=" + KEY,
    "export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1",
    'mkdir -p "$CLAUDE_CONFIG_DIR"',
    'printf \'{"hasCompletedOnboarding": true, "projects": {"%s": {"hasTrustDialogAccepted":'
    ' true}}, "customApiKeyResponses": {"approved": ["' + KEY[-20:] + '"], "rejected":'
    ' []}}\' "$PWD" > "$CLAUDE_CONFIG_DIR/.claude.json"',
    f"setsid python3 /usr/local/lib/fake_api.py 18555 {API_LOG} >/dev/null 2>&1 </dev/null &",
    'exec /usr/bin/claude --permission-mode default "$@"',
)


def real_claude_recipe(folder: Path) -> Path:
    """The simulator's recipe, with the real `claude` (REAL_CLAUDE) and its fake API."""
    fake = (
        "mkdir -p /usr/local/lib && cat > /usr/local/lib/fake_api.py <<'FAKE'\n"
        f"{FAKE_API.read_text()}\nFAKE"
    )
    return recipe_with(folder, f"{fake}\n{REAL_CLAUDE}")


# Run as agent in the box: Claude's first-run dialogs answered ahead (onboarding, trust
# in ~/workspace, the API key), the fake API started, claude started in tmux "main".
SETUP = f"""
set -e
mkdir -p "$CLAUDE_CONFIG_DIR"
python3 - <<'PY'
import json, os
cfg = {{"hasCompletedOnboarding": True,
       "projects": {{"{WORKSPACE}": {{"hasTrustDialogAccepted": True}}}},
       "customApiKeyResponses": {{"approved": ["{KEY[-20:]}"], "rejected": []}}}}
with open(os.path.join(os.environ["CLAUDE_CONFIG_DIR"], ".claude.json"), "w") as f:
    json.dump(cfg, f)
PY
cat > ~/run-claude.sh <<'SH'
#!/bin/sh
export ANTHROPIC_BASE_URL=http://127.0.0.1:18555 ANTHROPIC_API_KEY={KEY}
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1
cd {WORKSPACE}
exec claude
SH
chmod +x ~/run-claude.sh
git -C {WORKSPACE} init -q -b main
GIT_COMMITTER_DATE=2020-01-01T00:00:00Z \
    git -C {WORKSPACE} -c user.name=t -c user.email=t@b commit -q --allow-empty -m start
setsid python3 ~/fake_api.py 18555 ~/api.log >~/api.out 2>&1 </dev/null &
tmux new-session -d -s main -x 150 -y 50 ~/run-claude.sh
"""


def sessions(env, box: str = "b1") -> list[dict]:
    done = hbtui("agents", box, "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    [row] = json.loads(done.stdout)
    assert row["error"] == "", row
    return row["sessions"]


def wait_session(env, predicate, timeout: float = 90.0) -> dict:
    """Poll `hbtui agents` until a session satisfies `predicate`; returns that session."""
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        for s in sessions(env):
            if predicate(s):
                return s
            seen.append((s["agent"], s["session_id"][:8], s["status"], s["waiting_for"]))
    raise AssertionError(f"no session as wanted within {timeout} s; saw {seen[-10:]}")


def in_box(env, script: str, input: str | None = None) -> str:
    done = hbtui("exec", "b1", "--", "sh", "-c", script, env=env, input=input)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def exists(env, path: str) -> bool:
    return hbtui("exec", "b1", "--", "test", "-e", path, env=env).returncode == 0


def claude_version() -> tuple[int, ...] | None:
    """The installed claude's version, or None when it is missing."""
    if shutil.which("claude") is None:
        return None
    out = subprocess.run(["claude", "--version"], capture_output=True, text=True, timeout=60)
    word = out.stdout.split(" ", 1)[0]
    return tuple(int(p) for p in word.split(".") if p.isdigit()) or None


CLAUDE = claude_version()


STATE = "/data/home/agent/.local/state/hermes-box/agents"
# A live `sleep` stands for an agent (`$pid`, `$start`): its pid and kernel start time are
# what a hook records in a status file.
LIVE_PROCESS = f"""
set -e
mkdir -p {STATE}
setsid sleep 600 </dev/null >/dev/null 2>&1 &
pid=$!
start=$(python3 -c 'import sys; s=open(f"/proc/{{sys.argv[1]}}/stat").read(); print(s[s.rindex(")")+2:].split()[19])' $pid)
"""
# ... and its status file: a claude session at work.
LIVE = (
    LIVE_PROCESS
    + """printf '{"session_id":"5e55104aaa","agent":"claude","status":"working","pid":%s,"""
    + f""""proc_start":"%s","since":%s}}' $pid "$start" $(date +%s) > {STATE}/5e55104aaa.json
"""
)
