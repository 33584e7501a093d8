"""A try's check never counts as the agent's work: what it writes in the clone is taken
out again after it (the step run here with real git, as the engine's exec runs it in a
box; tests/core/work/test_work_in_out.py runs a try's check in a simulator box), while its
output and exit status are the check's, as before."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hbtui.core.foundation.git import CHECK_REF
from hbtui.core.work.box import CHECK_SCRIPT

from support.work import git, host_repo

# Adds a file in a new folder (a compiled module), changes a tracked file, removes
# another, writes one git ignores, says something and fails.
CHECK = (
    "mkdir -p pkg/__pycache__ && echo pyc > pkg/__pycache__/calc.pyc && "
    "echo 'check was here' >> a.txt && rm b.txt && echo log > run.log && "
    "echo 'checked 3 tests'; echo 'one failed' >&2; exit 3"
)


def work_state(clone: Path) -> tuple[str, ...]:
    """What diff, try ls and a pull see of the agent's work, and its index."""
    return (
        git(clone, "status", "--porcelain", "--untracked-files=all"),
        git(clone, "diff"),
        git(clone, "diff", "--cached"),
        (clone / "a.txt").read_text(),
        (clone / "notes.txt").read_text(),
    )


def test_a_check_leaves_the_agents_work_as_it_found_it(tmp_path: Path):
    clone = host_repo(tmp_path, 2)
    (clone / ".gitignore").write_text("*.log\n")
    (clone / "b.txt").write_text("b\n")
    (clone / "pkg").mkdir()
    (clone / "pkg" / "calc.py").write_text("x = 1\n")
    git(clone, "add", ".")
    git(clone, "-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "agent's work")
    # Work in progress: a staged change, an edit not staged, an untracked file.
    (clone / "pkg" / "calc.py").write_text("x = 2\n")
    git(clone, "add", "pkg/calc.py")
    (clone / "a.txt").write_text("agent edit\n")
    (clone / "notes.txt").write_text("agent notes\n")
    before = work_state(clone)

    done = subprocess.run(
        ["bash", "-c", CHECK_SCRIPT, "hbtui", CHECK], cwd=clone, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (3, "checked 3 tests\n", "one failed\n")
    assert work_state(clone) == before
    assert not (clone / "pkg" / "__pycache__").exists()
    assert (clone / "b.txt").read_text() == "b\n"
    assert (clone / "run.log").read_text() == "log\n"  # ignored: no one sees it as work
    # What was undone is kept, not lost.
    kept = git(clone, "ls-tree", "-r", "--name-only", CHECK_REF).splitlines()
    assert "pkg/__pycache__/calc.pyc" in kept and "b.txt" not in kept
    assert git(clone, "show", f"{CHECK_REF}:a.txt") == "agent edit\ncheck was here"


def test_a_check_that_writes_nothing_leaves_no_trace(tmp_path: Path):
    clone = host_repo(tmp_path, 1)
    before = git(clone, "for-each-ref")
    done = subprocess.run(
        ["bash", "-c", CHECK_SCRIPT, "hbtui", "test -e a.txt"], cwd=clone, capture_output=True
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert git(clone, "for-each-ref") == before
    assert git(clone, "status", "--porcelain", "--untracked-files=all") == ""
