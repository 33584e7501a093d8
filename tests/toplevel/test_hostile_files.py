"""Hostile files are errors, not hangs or tracebacks: a FIFO, socket or
device in place of a state file, and a symlink loop in a recipe, are one line naming the
path, at once."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from hbtui.paths import UnreadableFile, read_state

from support import HBTUI_BIN, SIM_RECIPE

BASE = "bases/local/ubuntu-24.04-000000000000.json"
# Each state file, and verbs that read it.
STATE_FILES = [
    ("config.toml", ("ls",)),
    ("config.toml", ("base", "ls")),
    ("registry.toml", ("ls",)),
    ("registry.toml", ("new", "web", "-q")),
    ("secrets.json", ("secrets", "ls")),
    ("secrets.json", ("secrets", "set", "github")),
    ("secrets.hbx", ("secrets", "set", "github")),
    (BASE, ("base", "ls")),
    (BASE, ("new", "web", "-q")),
    ("locks/boxes/local--web.lock", ("new", "web", "-q")),
]


# Runs the command as its own child and reports what that child used. A child that
# pytest starts itself inherits the worker's peak memory in ru_maxrss (Linux keeps the
# high-water mark of the memory it leaves at exec), so the measure must come from a
# grandchild forked by this small process.
MEASURE = """
import json, os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[2], sys.argv[2:])
_, status, used = os.wait4(pid, 0)
with open(sys.argv[1], "w") as fh:
    json.dump([used.ru_utime, used.ru_stime, used.ru_maxrss], fh)
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


@dataclass(frozen=True)
class Used:
    ru_utime: float
    ru_stime: float
    ru_maxrss: int  # KiB


def run(
    *args: str, env: dict[str, str], input: str = ""
) -> tuple[subprocess.CompletedProcess, Used]:
    """The command's result and what it used: reading a whole 1 GB file shows in its
    memory and CPU, where a loaded machine's waits do not (a hang is the deadline)."""
    with tempfile.TemporaryDirectory() as tmp:
        usage = Path(tmp) / "usage.json"
        argv = [sys.executable, "-S", "-c", MEASURE, str(usage), HBTUI_BIN, *args]
        child = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            out, err = child.communicate(input, timeout=60)
        except subprocess.TimeoutExpired as exc:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            raise AssertionError(f"hbtui {' '.join(args)} still ran after 60 s") from exc
        utime, stime, maxrss = json.loads(usage.read_text())
    done = subprocess.CompletedProcess([HBTUI_BIN, *args], child.returncode, out, err)
    return done, Used(utime, stime, maxrss)


def cpu(used: Used) -> float:
    return used.ru_utime + used.ru_stime


def fifo_at(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)


@pytest.mark.sim
@pytest.mark.parametrize(
    ("relative", "argv"), STATE_FILES, ids=lambda v: " ".join(v) if isinstance(v, tuple) else v
)
def test_a_fifo_for_a_state_file_is_one_line_naming_it(sim_env, relative, argv):
    env = {
        **sim_env,
        "HBTUI_RECIPE": str(SIM_RECIPE),
        "HBTUI_SECRETS_PASSPHRASE": "pass",
    }
    if relative == "secrets.hbx":  # the file store, so that the value goes there
        (Path(env["HBTUI_HOME"]) / "config.toml").write_text('[secrets]\nstore = "file"\n')
    path = Path(env["HBTUI_HOME"]) / relative
    fifo_at(path)
    done, took = run(*argv, env=env, input="value\n")
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: ")
    assert str(path) in done.stderr and "not a regular file" in done.stderr
    assert cpu(took) < 5, f"{cpu(took):.1f}s of CPU"  # hbtui's start-up; no read of it all
    assert "Traceback" not in done.stderr


def test_every_kind_of_non_file_is_refused_at_once(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    link = tmp_path / "link-to-fifo"
    link.symlink_to(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    try:
        for path, kind in [
            (fifo, "a FIFO"),
            (link, "a FIFO"),
            (Path("/dev/zero"), "a character device"),
            (folder, "a folder"),
        ]:
            with pytest.raises(UnreadableFile, match=kind) as caught:
                read_state(path)
            assert str(path) in caught.value.message
        with pytest.raises(UnreadableFile, match="cannot read it"):
            read_state(sock_path)  # a socket cannot even be opened
    finally:
        sock.close()
    assert read_state(tmp_path / "absent") is None
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(UnreadableFile, match="over 10 bytes"):
        read_state(big, limit=10)


def test_a_fifo_for_a_box_lock_is_no_busy_note(hbtui_home):
    """Listings read each box's lock record: a FIFO there reads as no record."""
    from hbtui.wiring import build_service

    boxes = build_service()._ops.core
    fifo_at(boxes.locks.path("local", "web"))
    assert boxes.busy("web", "local") is None


def test_a_fifo_left_in_scratch_does_not_hang_the_sweep(hbtui_home):
    from hbtui.core.foundation import scratch
    from hbtui.paths import resolve_paths

    paths = resolve_paths()
    top = scratch.root(paths)
    top.mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    note = top / f"extract-{dead.pid}-x{scratch.NOTE_SUFFIX}"
    os.mkfifo(note)
    assert note in scratch.sweep(paths) and not note.exists()


def test_a_fifo_for_known_hosts_is_one_line(tmp_path):
    from hbtui.remote.knownhosts import load_known_hosts

    fifo_at(tmp_path / "known_hosts")
    with pytest.raises(UnreadableFile, match="known_hosts: it is a FIFO"):
        load_known_hosts(tmp_path / "known_hosts")


# -- a symlink loop in a recipe -----------------------------------------------------------


def looping_recipe(tmp_path: Path) -> tuple[Path, Path]:
    recipe = tmp_path / "recipe"
    shutil.copytree(SIM_RECIPE, recipe)
    link = recipe / "guest" / "loop"
    link.symlink_to(recipe / "guest" / "loop2")
    (recipe / "guest" / "loop2").symlink_to(link)
    return recipe, link


@pytest.mark.sim
def test_a_symlink_loop_in_a_recipe_is_one_line_naming_the_link(sim_env, tmp_path):
    env = {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE)}
    done, _ = run("new", "web", "-q", env=env)
    assert done.returncode == 0, done.stderr
    recipe, _link = looping_recipe(tmp_path)
    looping = {**env, "HBTUI_RECIPE": str(recipe)}
    for argv in (("new", "web2", "-q"), ("base", "build", "-q"), ("repair", "web", "-q")):
        done, _took = run(*argv, env=looping)
        assert done.returncode != 0, argv
        assert done.stderr.count("\n") == 1 and "symlink loop" in done.stderr, (argv, done.stderr)
        assert str(recipe / "guest" / "loop") in done.stderr and "Traceback" not in done.stderr
    # inspect shows the recipe as unreadable and goes on.
    done, _ = run("inspect", "web", "--json", env=looping)
    assert done.returncode == 0, done.stderr
    assert "symlink loop" in json.loads(done.stdout)["sections"]["Recipe"]["configured recipe"]
    # The box the repair refused is as it was: running and ready, not "failed".
    listed = json.loads(run("ls", "--json", env=env)[0].stdout)
    assert [(b["name"], b["state"], b["provisioning"]) for b in listed] == [
        ("web", "running", "ready")
    ]
    assert run("ls", "--json", env=looping)[0].returncode == 0
    assert not any(b["name"] == "web2" for b in json.loads(run("ls", "--json", env=env)[0].stdout))


@pytest.mark.parametrize(
    "kind, words",
    [("fifo", "a FIFO"), ("huge", "over 65536 bytes"), ("loop", "symbolic links")],
)
def test_a_hostile_task_file_is_one_line_at_once(hbtui_home, tmp_path: Path, kind, words):
    """`new --task-file` read a FIFO until someone wrote to it (a hang), and all of a
    1 GB file before it said the task was too long."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    task = tmp_path / "task"
    if kind == "fifo":
        os.mkfifo(task)
    elif kind == "huge":
        with task.open("wb") as fh:
            fh.truncate(1 << 30)
    else:
        (tmp_path / "other").symlink_to(task)
        task.symlink_to(tmp_path / "other")
    argv = ("new", "w", "-q", "--repo", str(repo), "--agent", "claude", "--task-file", str(task))
    done, took = run(*argv, env=dict(os.environ))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: the task file {task}: "), lines
    assert words in lines[0]
    assert cpu(took) < 5, f"{cpu(took):.1f}s of CPU"
    assert took.ru_maxrss < 256 * 1024, f"{took.ru_maxrss} KiB"  # not a 1 GB file read in


def test_an_archive_path_that_is_no_file_says_what_it_is(tmp_path):
    """`load`, `verify`, `extract` of a symlink loop said "not a file (a folder or a
    device?)": each kind of path says what it is."""
    from hbtui.core.archives.files import archive_kind
    from hbtui.errors import UsageError

    fifo_at(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    (tmp_path / "loop").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop")
    for name, said in [
        ("fifo", "is a FIFO, not a file"),
        ("folder", "is a folder, not a file"),
        ("loop", "cannot be opened (too many levels of symbolic links)"),
    ]:
        with pytest.raises(UsageError) as caught:
            archive_kind(tmp_path / name)
        assert caught.value.message == f"{tmp_path / name} {said}, so not an archive"


@pytest.mark.parametrize("kind", ["fifo", "file", "loop", "dangling"])
def test_an_engine_state_folder_that_is_no_folder_is_one_line_naming_it(hbtui_home, tmp_path, kind):
    """The simulator said "NotADirectoryError: ...", the engine "create directory: Not a
    directory (os error 20)", neither naming the setting: one line that does."""
    where = tmp_path / "state"
    if kind == "fifo":
        fifo_at(where)
    elif kind == "file":
        where.write_text("x")
    elif kind == "loop":
        where.symlink_to(where)
    else:  # the engine said "create directory: File exists (os error 17)"
        where.symlink_to(tmp_path / "gone" / "state")
    done = subprocess.run(
        [HBTUI_BIN, "ls"], env={**os.environ, "HBTUI_SMOLVM_STATE_DIR": str(where)},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    said = {"fifo": "is a FIFO, not a folder", "file": "is a file, not a folder",
            "loop": "cannot be used (too many levels of symbolic links)",
            "dangling": f"is a symbolic link to nothing ({tmp_path}/gone/state)"}[kind]  # fmt: skip
    assert done.stderr.startswith(f"error: the engine's state folder {where} {said}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
