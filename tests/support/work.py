"""Helpers of the work tests (repositories on the host, clones in simulator boxes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hbtui.core import gitops, intake
from hbtui.core.intake import CheckedBundle

CLONE = "/data/home/agent/work/proj"  # where a box keeps the clone of a repository "proj"


def stand_in(*body: str) -> str:
    """A recipe line (see support.recipe_with) that makes `body` the box's `claude`: a
    shell script that answers `claude mcp ...` (run by `hb wire-mcp`) at once and writes
    the first prompt it was given, and the folder it ran in, where a test can read them."""
    lines = [
        "#!/bin/sh",
        '[ "$1" = mcp ] && exit 0',
        'printf %s "$1" > /data/home/agent/claude-prompt',
        "pwd > /data/home/agent/claude-cwd",
        *body,
    ]
    script = "\n".join(lines)
    return (
        f"mkdir -p /usr/local/bin && cat > /usr/local/bin/claude <<'STANDIN'\n{script}\nSTANDIN\n"
        "chmod 755 /usr/local/bin/claude"
    )


# Takes its prompt and ends its turn as Claude Code does where hbtui sees it (the box's
# hook hears UserPromptSubmit, then Stop: the agent is idle), then waits for the next.
LIVE_AGENT = stand_in(
    "for event in UserPromptSubmit Stop; do",
    """    printf '{"session_id":"stand-in-%s","hook_event_name":"%s","cwd":"%s"}' \\""",
    '        "$$" "$event" "$PWD" | /opt/hermes-box/bin/hb-agent-hook',
    "done",
    "exec sleep 600",
)
# Says nothing of its prompt (it asks to log in), and never ends.
SILENT_AGENT = stand_in("printf 'Sign in to go on? (y/n) '", "exec sleep 600")
# Ends at once, as Claude Code does when it cannot reach its API, saying why (with a
# title and colour sequences among its words, which must not reach the host's terminal).
ENDING_AGENT = stand_in(
    "printf 'Starting up\\n\\n'",
    "printf '\\033]0;evil title\\007\\033[31mUnable to connect\\033[0m to the API\\n'",
    "printf 'Failed to connect: EAI_AGAIN\\n'",
    "exit 3",
)


def git(repo: Path, *args: str) -> str:
    """`git -C repo ARGS`, which must succeed; its output, stripped."""
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def box_sh(env: dict[str, str], box: str, script: str) -> str:
    """A shell script in a box, as its agent, in the clone (as the agent would work),
    straight through the engine; it must succeed."""
    done = subprocess.run(
        [
            env["HBTUI_SMOLVM"], "--state-dir", env["HBTUI_SMOLVM_STATE_DIR"], "machine", "exec",
            "--name", box, "-u", "agent", "-w", CLONE, "--", "bash", "-c", script,
        ],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.strip()


def host_repo(folder: Path, commits: int = 1, *, dirty: bool = False) -> Path:
    """A host repository `folder`/proj on main with `commits` commits of a.txt ("host N");
    `dirty`: then an edit not committed and an untracked file (what a pull must not
    touch)."""
    repo = folder / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n in range(1, commits + 1):
        (repo / "a.txt").write_text(f"line {n}\n")
        git(repo, "add", "a.txt")
        git(repo, "-c", "user.name=h", "-c", "user.email=h@h", "commit", "-qm", f"host {n}")
    if dirty:
        (repo / "a.txt").write_text("host edit, not committed\n")
        (repo / "scratch.txt").write_text("untracked on the host\n")
    return repo


async def check_file(
    repo: Path, bundle: Path, folder: Path, *, seed: str, blob_max: int = 1 << 20, wip: bool = False
) -> CheckedBundle:
    """A bundle file through the pull's intake in pieces, as a box's stream brings it,
    then through every check (the intake's copy of it goes to `folder`)."""
    data = bundle.read_bytes()
    async with intake.PackIntake(repo, gitops.objects_dir(repo), folder) as taking:
        for at in range(0, len(data), 48 * 1024):
            await taking.feed(data[at : at + 48 * 1024])
        return await intake.check_bundle(taking, seed=seed, blob_max=blob_max, wip=wip)
