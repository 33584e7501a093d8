"""A --repo box's link to its host repository travels in its archive: save, rm, load, and
diff and pull work on the loaded box (into the same repository, or one `load --repo`
names; a repository that is gone loads and says so); a hostile record is refused before
any box is made."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from hbtui.archive import ArchiveCorrupt, note
from hbtui.archive.files import create_archive

from support import HBTUI_BIN, SIM_RECIPE
from support.work import box_sh, git, host_repo

pytestmark = pytest.mark.sim

PASS = "pass-travel-4d1e"


def hbtui(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    if args[0] == "load":  # the simulator's recipe, as every box here is made with
        args = (*args, "--recipe", str(SIM_RECIPE))
    return subprocess.run(
        [HBTUI_BIN, *args], env=dict(env, HBTUI_PASSPHRASE=PASS), capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def boxes(env: dict[str, str]) -> set[str]:
    return {b["name"] for b in json.loads(ok(hbtui("ls", "--json", env=env)))}


@pytest.mark.timeout(900)
def test_saved_repo_box_loads_with_its_diff_and_pull(sim_env, tmp_path: Path):
    repo = host_repo(tmp_path, 2)
    seed = git(repo, "rev-parse", "HEAD")
    ok(hbtui("new", "b1", "-q", "--recipe", str(SIM_RECIPE), "--repo", str(repo), env=sim_env))
    made = box_sh(
        sim_env, "b1",
        "echo box > b.txt && git add b.txt && "
        "git -c user.name=a -c user.email=a@a commit -qm 'box work' && git rev-parse HEAD",
    )  # fmt: skip
    archive = tmp_path / "b1.hbx"
    ok(hbtui("save", "b1", "-o", str(archive), "--no-verify", env=sim_env))
    ok(hbtui("rm", "b1", "-f", env=sim_env))

    ok(hbtui("load", str(archive), "b1", "-q", env=sim_env))
    diff = json.loads(ok(hbtui("diff", "b1", "--stat", "--json", env=sim_env)))
    assert (diff["seed"], diff["repo"]) == (seed, str(repo))
    assert [c["id"] for c in diff["commits"]] == [made]
    pulled = json.loads(ok(hbtui("pull", "b1", "--json", env=sim_env)))
    assert pulled["refs"] == [{"ref": "refs/remotes/box/b1/hb/b1", "commit": made}]
    assert git(repo, "rev-parse", "refs/remotes/box/b1/hb/b1") == made

    # Elsewhere: a copy of the repository named with --repo takes the pull.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(repo), str(other))
    ok(hbtui("load", str(archive), "b2", "-q", "--repo", str(other), env=sim_env))
    pulled = json.loads(ok(hbtui("pull", "b2", "--json", env=sim_env)))
    assert pulled["repo"] == str(other)
    assert git(other, "rev-parse", "refs/remotes/box/b2/hb/b1") == made

    # The repository gone: the box loads, diff works, and one line says how to pull.
    shutil.move(repo, tmp_path / "moved")
    loaded = hbtui("load", str(archive), "b3", env=sim_env)
    said = ok(loaded) + loaded.stderr
    lines = [line for line in said.splitlines() if "is not here" in line]
    assert len(lines) == 1 and "hbtui pull b3 --repo PATH" in lines[0], said
    diff = json.loads(ok(hbtui("diff", "b3", "--stat", "--json", env=sim_env)))
    assert [c["id"] for c in diff["commits"]] == [made]


def _archive_with_note(tmp_path: Path, text: bytes) -> Path:
    """An archive of a one-file /data whose payload opens with `text` as its note."""
    data = tmp_path / "data"
    (data / "home").mkdir(parents=True)
    tar = subprocess.run(["tar", "-C", str(data), "-cf", "-", "."], capture_output=True).stdout
    payload = (
        note.frame(text)
        + subprocess.run(["zstd", "-q", "-c"], input=tar, capture_output=True).stdout
    )
    path = tmp_path / "hostile.hbx"
    with create_archive(path, PASS.encode()) as enc:
        enc.feed(payload)
    return path


GOOD = {
    "repo": "/srv/proj", "seed": "a" * 40, "ref": "refs/heads/main",
    "clone": "/data/home/agent/work/proj", "branch": "hb/b1",
}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("repo", "relative/proj", "not absolute"),
        ("repo", "/srv/../etc", "not absolute"),
        ("repo", "/srv/\x1b]0;t\x07", "control codes"),
        ("seed", "HEAD", "not a commit id"),
        ("clone", "/etc", "clone folder"),
        ("clone", "/data/home/agent/work/../../.ssh", "clone folder"),
        ("branch", "main", "branch"),
        ("ref", "x" * 5000, "ref is longer"),
    ],
)
def test_hostile_work_record_is_refused_before_a_box_is_made(
    sim_env, tmp_path: Path, field: str, value: str, said: str
):
    record = dict(GOOD, **{field: value})
    archive = _archive_with_note(tmp_path, json.dumps({"work": record}).encode())
    done = hbtui("load", str(archive), "h1", env=sim_env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "work record is refused" in lines[0] and said in lines[0], lines
    assert "\x1b" not in done.stderr
    assert "h1" not in boxes(sim_env)


def test_note_that_is_no_json_object_is_refused(sim_env, tmp_path: Path):
    archive = _archive_with_note(tmp_path, b"[1, 2]")
    done = hbtui("load", str(archive), "h1", env=sim_env)
    assert done.returncode != 0 and "not a JSON object" in done.stderr
    oversized = struct.pack("<II", note.NOTE_MAGIC, note.HEAD_BYTES) + note.TAG
    with pytest.raises(ArchiveCorrupt, match="a note is at most"):
        note.read(oversized)
