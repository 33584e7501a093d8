"""The repository's own setup (`.hbtui/setup.sh`) and `--copy` in simulator boxes with real
git: the setup runs as the agent in the clone before the agent starts, its output in the
progress; a failing or hanging one is named with its last lines and keeps the box, without
its agent; `--no-setup` skips it; the copied files land uncommitted; try and branch --count
run it in each box."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import HBTUI_BIN, recipe_with
from support.work import CLONE, box_sh, git, host_repo, stand_in

pytestmark = pytest.mark.sim

# An agent that says whether the setup had run when it started, then takes its prompt.
AGENT = stand_in(
    "cat /data/home/agent/setup-ran > /data/home/agent/agent-saw 2>&1",
    "for event in UserPromptSubmit Stop; do",
    """    printf '{"session_id":"s-%s","hook_event_name":"%s","cwd":"%s"}' \\""",
    '        "$$" "$event" "$PWD" | /opt/hermes-box/bin/hb-agent-hook',
    "done",
    "exec sleep 600",
)


def hbtui(*args: str, env: dict[str, str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [HBTUI_BIN, *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def with_setup(repo: Path, body: str) -> None:
    setup = repo / ".hbtui" / "setup.sh"
    setup.parent.mkdir(exist_ok=True)
    setup.write_text(f"#!/bin/bash\n{body}\n")
    setup.chmod(0o755)
    git(repo, "add", ".hbtui/setup.sh")
    git(repo, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "setup")


def error_line(done: subprocess.CompletedProcess) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stdout + done.stderr
    assert lines[0].startswith("error: "), lines
    return lines[0]


def boxes(env: dict[str, str]) -> dict[str, str]:
    listed = json.loads(hbtui("ls", "--json", env=env).stdout)
    return {b["name"]: b["provisioning"] for b in listed}


def in_box(env: dict[str, str], box: str, script: str) -> str:
    return box_sh(env, box, script + "; true")


@pytest.fixture
def env(sim_env, tmp_path: Path) -> dict[str, str]:
    return dict(sim_env, HBTUI_RECIPE=str(recipe_with(tmp_path, AGENT)))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = host_repo(tmp_path)
    (repo / ".gitignore").write_text(".env\nconf/\n")
    git(repo, "add", ".gitignore")
    git(repo, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "ignore")
    return repo


@pytest.mark.timeout(600)
def test_setup_runs_before_the_agent_with_the_copied_files_and_its_output_shown(
    env, repo: Path, tmp_path: Path
):
    with_setup(
        repo,
        'echo "setting up as $(id -un) in $PWD for $HB_BOX"\n'
        "printf 'env says %s\\n' \"$(cat .env)\"\n"
        "printf '\\033]0;evil title\\007\\033[32mgreen\\033[0m done\\n'\n"
        "echo yes > ~/setup-ran",
    )
    (repo / ".env").write_text("ANTHROPIC_API_KEY=sk-ant-from-the-host\n")
    (repo / "conf").mkdir()
    (repo / "conf" / "local.yml").write_text("mine\n")
    (repo / "conf" / "out").symlink_to(tmp_path / "secret")
    (tmp_path / "secret").write_text("host secret\n")
    made = hbtui(
        "new", "b1", "--repo", str(repo), "--agent", "claude", "--task", "go",
        "--copy", ".env", "--copy", "conf", env=env,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout + made.stderr
    out = made.stdout
    assert f"setting up as agent in {CLONE} for b1" in out, out
    assert "env says ANTHROPIC_API_KEY=sk-ant-from-the-host" in out
    assert "green done" in out and "\x1b]0;" not in out and "evil title" not in out
    assert out.index("running the repository's .hbtui/setup.sh") < out.index("claude started")
    assert in_box(env, "b1", "cat ~/agent-saw") == "yes"  # the agent started after it
    # The copies: as they are, uncommitted; a symlink stays a symlink (never followed).
    assert in_box(env, "b1", "cat conf/local.yml; readlink conf/out") == (
        f"mine\n{tmp_path / 'secret'}"
    )
    assert in_box(env, "b1", "git status --porcelain --untracked-files=all") == ""
    d = json.loads(hbtui("diff", "b1", "--json", env=env).stdout)
    assert d["files"] == [] and d["uncommitted"] == 0
    # A secret copied in is in the box, and `credentials` says where.
    said = json.loads(hbtui("credentials", "b1", "--json", env=env).stdout)
    assert f"{CLONE}/.env sets ANTHROPIC_API_KEY" in json.dumps(said), said


@pytest.mark.timeout(600)
def test_a_failing_setup_keeps_the_box_without_its_agent_and_no_setup_skips_it(env, repo: Path):
    with_setup(repo, "touch ~/ran; echo one; echo two >&2; echo 'three \x1b[31mred'; exit 7")
    failed = hbtui("new", "b1", "--repo", str(repo), "--agent", "claude", "--task", "go", env=env)
    line = error_line(failed)
    assert "the setup .hbtui/setup.sh in box b1 failed (exit status 7)" in line, line
    assert "its last lines: one | two | three red" in line and "\x1b" not in line
    assert "the box stays, made with its clone, claude not started: hbtui enter b1" in line
    assert boxes(env) == {"b1": "ready"}
    assert in_box(env, "b1", "git rev-parse --abbrev-ref HEAD") == "hb/b1"
    assert in_box(env, "b1", "ls ~/agent-saw ~/claude-prompt 2>&1").count("No such") == 2
    assert hbtui("diff", "b1", "--stat", env=env).returncode == 0

    skipped = hbtui("new", "b2", "--repo", str(repo), "--no-setup", "-q", env=env)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert ".hbtui/setup.sh" not in skipped.stdout
    assert in_box(env, "b2", "ls ~/ran 2>&1").count("No such") == 1

    # Not executable: it runs nothing, and new says so.
    git(repo, "update-index", "--chmod=-x", ".hbtui/setup.sh")
    git(repo, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", "not executable")
    plain = hbtui("new", "b3", "--repo", str(repo), env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "! .hbtui/setup.sh in b3's clone is not executable: not run" in plain.stdout
    assert in_box(env, "b3", "ls ~/ran 2>&1").count("No such") == 1
    assert boxes(env) == {"b1": "ready", "b2": "ready", "b3": "ready"}


@pytest.mark.timeout(600)
def test_agents_start_with_setup_runs_it_first_and_a_box_without_a_repository_says_so(
    env, repo: Path
):
    with_setup(repo, 'echo "setting up again in $PWD"\necho yes > ~/setup-ran')
    made = hbtui("new", "b1", "--repo", str(repo), "--no-setup", "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    assert in_box(env, "b1", "ls ~/setup-ran 2>&1").count("No such") == 1
    started = hbtui(
        "agents", "start", "b1", "--agent", "claude", "--keyless", "--setup", "--task", "go",
        env=env,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    out = started.stdout
    assert f"setting up again in {CLONE}" in out, out
    assert out.index("setting up again") < out.index("claude started"), out
    assert in_box(env, "b1", "cat ~/agent-saw") == "yes"  # the agent started after it

    plain = hbtui("new", "b2", "-q", env=env)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    refused = hbtui("agents", "start", "b2", "--agent", "claude", "--keyless", "--setup", env=env)
    assert (refused.returncode, refused.stdout) == (2, ""), refused.stdout + refused.stderr
    assert refused.stderr == "error: --setup: box b2 was not made with a repository\n"
    assert hbtui("agents", "b2", "--json", env=env).stdout.count('"session_id"') == 0


@pytest.mark.timeout(600)
def test_a_setup_that_hangs_is_given_up_named_and_stopped(env, repo: Path):
    with_setup(repo, "echo $$ > ~/setup-pid\necho waiting for input\nexec sleep 600")
    silent = hbtui(
        "new", "b1", "--repo", str(repo), env=dict(env, HBTUI_BOX_IDLE_SECONDS="3"), timeout=120
    )
    line = error_line(silent)
    assert "setup.sh in box b1 went silent (no output in 3 s) and was stopped" in line, line
    assert "its last lines: waiting for input" in line
    assert boxes(env) == {"b1": "ready"}
    assert in_box(env, "b1", "kill -0 $(cat ~/setup-pid) 2>&1 || echo gone").endswith("gone")

    with_setup(repo, "while :; do echo tick; sleep 0.2; done")
    endless = hbtui(
        "new", "b2", "--repo", str(repo), env=dict(env, HBTUI_SETUP_SECONDS="3"), timeout=120
    )
    line = error_line(endless)
    assert "in box b2 ran longer than 3 s (HBTUI_SETUP_SECONDS) and was stopped" in line, line
    assert boxes(env) == {"b1": "ready", "b2": "ready"}
    bad = hbtui("new", "b3", "--repo", str(repo), env=dict(env, HBTUI_SETUP_SECONDS="0"))
    assert bad.returncode == 2 and "HBTUI_SETUP_SECONDS must be" in bad.stderr
    assert "b3" not in boxes(env)


@pytest.mark.timeout(900)
def test_try_and_branch_count_run_the_setup_in_each_box(env, repo: Path):
    with_setup(repo, 'echo "$HB_BOX" > ~/setup-ran\n[ "$HB_BOX" != t-2 ] || exit 4')
    tried = hbtui("try", "2", "t", "--repo", str(repo), "--task", "go", env=env, timeout=600)
    assert tried.returncode == 1, tried.stdout + tried.stderr
    assert "✓ t-1 started claude on the task" in tried.stdout, tried.stdout
    assert "✗ t-2: the setup .hbtui/setup.sh in box t-2 failed (exit status 4)" in tried.stdout
    assert "✓ t-2" not in tried.stdout
    assert boxes(env) == {"t-1": "ready", "t-2": "ready"}  # the failed one stays
    assert in_box(env, "t-1", "cat ~/agent-saw") == "t-1"

    made = hbtui("new", "s", "--repo", str(repo), "--no-setup", "-q", env=env)
    assert made.returncode == 0, made.stdout + made.stderr
    done = hbtui("branch", "s", "--count", "2", env=env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ s-1 branched from s" in done.stdout and "✓ s-2 branched from s" in done.stdout
    for box in ("s-1", "s-2"):
        assert in_box(env, box, "cat ~/setup-ran") == box
