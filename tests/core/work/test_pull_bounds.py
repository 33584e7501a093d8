"""What a box makes the host do when it is pulled from or diffed is bounded, whatever the
box sends, with real git on both sides (the box's step runs here, as the engine's exec
runs it in a box; tests/core/work/test_pull_hostile.py runs the same attacks through the CLI):
its branches are counted as its header arrives, git's memory is capped, a box that goes
silent is given up, and a refused pull leaves the repository as it was."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from hbtui.core.boxes import guest
from hbtui.core.foundation.git import BOX_GIT_MEMORY, BundleRefused, parse_heads
from hbtui.core.work import book as work_book
from hbtui.core.work import box as work_box
from hbtui.core.work import diff as work_diff
from hbtui.core.work import intake
from hbtui.core.work import pull as work
from hbtui.engine.client import EngineStream
from hbtui.engine.runner import LocalStream
from hbtui.paths import Paths

from support import ROOT
from support.work import bundle_by_hand, git

ID = ["-c", "user.name=t", "-c", "user.email=t@t"]
MIB = 1 << 20


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(f"{name}\n")
    git(repo, "add", name)
    git(repo, *ID, "commit", "-qm", f"add {name}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def repos(tmp_path: Path) -> tuple[Path, Path, str]:
    """The host repository at the seed, and the box's clone on hb/b1 with a commit."""
    host = tmp_path / "host"
    host.mkdir()
    git(host, "init", "-q", "-b", "main")
    seed = commit(host, "a.txt")
    box = tmp_path / "box"
    git(tmp_path, "clone", "-q", "-b", "main", str(host), str(box))
    git(box, "checkout", "-qb", "hb/b1")
    commit(box, "b.txt")
    return host, box, seed


def box_with_git(tmp_path: Path, git_first: str) -> SimpleNamespace:
    """A host whose engine runs a box's step here, the box's `git` a script that runs
    `git_first` (shell), then the real git."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    (shim / "git").write_text(f'#!/bin/bash\n{git_first}\nexec /usr/bin/git "$@"\n')
    (shim / "git").chmod(0o755)
    path = f"PATH={shim}:{os.environ['PATH']}"

    def exec_stream(box: str, argv: list[str], *, user: str, timeout: float) -> EngineStream:
        full = ["env", path, *argv]
        return EngineStream(LocalStream(full, timeout), full)

    return SimpleNamespace(engine=SimpleNamespace(exec_stream=exec_stream))


def operations(engine_host: SimpleNamespace, host: Path, box: Path, seed: str):
    """The box operations and work record work.pull and work_diff.diff need, for box b1
    (its clone `box`) made from `host`."""

    async def get(name: str) -> SimpleNamespace:
        return engine_host

    record = work_book.WorkRecord(str(host), seed, "refs/heads/main", str(box), "hb/b1")
    paths = Paths(host.parent, host.parent, host.parent)
    boxes = SimpleNamespace(hosts=SimpleNamespace(get=get), paths=paths)
    return boxes, record


async def pull(engine_host: SimpleNamespace, host: Path, box: Path, seed: str, *, wip=False):
    boxes, record = operations(engine_host, host, box, seed)
    return await work.pull(boxes, record, host, "b1", "local", wip=wip)  # type: ignore[arg-type]


def repository_files(repo: Path) -> dict[str, bytes | None]:
    """Every folder (None) and file (its bytes) of the repository's objects, refs and
    reflogs: what a refused pull must leave exactly as it was."""
    git_dir = repo / ".git"
    found: dict[str, bytes | None] = {}
    for top in ("objects", "refs", "logs", "packed-refs"):
        for path in [git_dir / top, *sorted((git_dir / top).rglob("*"))]:
            if path.exists():
                found[str(path.relative_to(git_dir))] = None if path.is_dir() else path.read_bytes()
    return found


# -- branches ---------------------------------------------------------------------------


async def test_a_box_offering_more_branches_than_the_cap_is_refused_before_its_pack(
    repos, tmp_path: Path
):
    """40,000 branches took 56 s of the host's CPU, then a refusal that blamed a broken
    pack: the header is read once as it arrives, and the branch past the cap stops it."""
    host, _, seed = repos
    head = git(host, "rev-parse", "HEAD")
    refs = "".join(f"{head} refs/heads/b{n}\n" for n in range(40_000))
    header = f"# v2 git bundle\n-{seed}\n{refs}\n".encode()
    folder = tmp_path / "scratch"
    folder.mkdir()
    fed = 0
    with pytest.raises(BundleRefused, match="more than 1000 branches") as refused:
        objects = asyncio.get_running_loop().create_future()
        objects.set_result(host / ".git" / "objects")
        async with intake.PackIntake(host, objects, folder) as taking:
            for fed in range(0, len(header), 48 * 1024):
                await taking.feed(header[fed : fed + 48 * 1024])
    assert "\n" not in str(refused.value)
    assert fed < 2 * 48 * 1024  # refused at the chunk holding branch 1,001
    assert not (folder / "quarantine").exists()  # no index was started


async def test_as_many_branches_as_the_cap_are_taken(repos, tmp_path: Path):
    host, box, seed = repos
    head = git(box, "rev-parse", "HEAD")
    more = intake.BRANCH_MAX - 2  # beside main and hb/b1
    updates = "".join(f"create refs/heads/many/b{n} {head}\n" for n in range(more))
    subprocess.run(["git", "-C", str(box), "update-ref", "--stdin"], input=updates, text=True)
    result = await pull(box_with_git(tmp_path, ""), host, box, seed)
    assert len(result.refs) == intake.BRANCH_MAX - 1  # main, at the seed, brings nothing


def test_the_heads_of_a_bundle_are_parsed_in_linear_time():
    """Each ref was compared with every one before it: 40,000 took 46 s."""
    listed = "".join(f"{'a' * 40} refs/heads/b{n}\n" for n in range(40_000)).encode()
    began = time.monotonic()
    assert len(parse_heads(listed, wip=False)) == 40_000
    assert time.monotonic() - began < 5


# -- git's memory ----------------------------------------------------------------------

# check_file in a child of its own, the largest of its children's peak resident sets (its
# git commands) after: kilobytes on Linux.
MEASURED = """
import asyncio, resource, sys
from pathlib import Path
from hbtui.core.foundation.git import BundleRefused
from support.work import check_file

async def main() -> str:
    repo, bundle, folder, seed = sys.argv[1:]
    try:
        await check_file(Path(repo), Path(bundle), Path(folder), seed=seed, blob_max=1 << 30)
    except BundleRefused as exc:
        return str(exc)
    return "passed"

said = asyncio.run(main())
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(said)
"""


def checked_apart(host: Path, bundle: Path, folder: Path, seed: str) -> tuple[int, str]:
    """The peak resident set of the git commands that checked `bundle` (bytes), and what
    the check said."""
    folder.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests")}
    done = subprocess.run(
        [sys.executable, "-c", MEASURED, str(host), str(bundle), str(folder), seed],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    peak, said = done.stdout.splitlines()
    return int(peak) * 1024, said


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_DATA is Linux's")
def test_a_delta_bomb_is_refused_with_git_under_the_memory_bound(repos, tmp_path: Path):
    """16 KiB of bundle, a 16 MiB file of zeros and a delta of 192 copies of it, asks
    for 3 GiB: git index-pack reached 3.17 GB resident before the file cap refused it."""
    host, _, seed = repos
    bomb = tmp_path / "bomb.bundle"
    bundle_by_hand(bomb, seed, mib=16, copies=192)
    assert bomb.stat().st_size < 20_000
    before = repository_files(host)
    peak, said = checked_apart(host, bomb, tmp_path / "check", seed)
    assert said.startswith(f"the box's pack needs more than the {BOX_GIT_MEMORY >> 20} MiB"), said
    assert said.endswith("refused, nothing fetched") and "\n" not in said
    assert peak < BOX_GIT_MEMORY < 512 * MIB, peak
    assert repository_files(host) == before


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_DATA is Linux's")
def test_a_file_larger_than_the_bound_sent_whole_passes_within_it(repos, tmp_path: Path):
    """The bound refuses what git would hold, not big work: a file sent whole goes
    through the index a piece at a time."""
    host, _, seed = repos
    big = tmp_path / "big.bundle"
    bundle_by_hand(big, seed, mib=(BOX_GIT_MEMORY >> 20) + 16)
    peak, said = checked_apart(host, big, tmp_path / "check", seed)
    assert said == "passed"
    assert peak < 128 * MIB, peak


# -- a box that goes silent ---------------------------------------------------------------


@pytest.fixture
def idle(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setenv(guest.IDLE_ENV, "2")
    return 2.0


SLEEPS = 'case " $* " in *" {verb} "*) exec sleep 600 ;; esac'
DRIPS = 'case " $* " in *" {verb} "*) while :; do printf "{line}"; sleep 0.2; done ;; esac'


@pytest.mark.parametrize(
    "git_first",
    [
        SLEEPS.format(verb="pack-objects"),
        DRIPS.format(verb="pack-objects", line="abcd"),  # base64 waits for a whole line
    ],
    ids=["sleeps", "drips"],
)
async def test_a_pull_from_a_box_that_goes_silent_is_given_up(
    repos, tmp_path: Path, idle: float, git_first: str
):
    host, box, seed = repos
    before = repository_files(host)
    began = time.monotonic()
    with pytest.raises(work_box.BoxAnswerRefused) as given_up:
        await pull(box_with_git(tmp_path, git_first), host, box, seed)
    assert str(given_up.value) == (
        "box b1 went silent while bundling its work for pull (less than 1024 bytes in 2 s): "
        "given up"
    )
    assert time.monotonic() - began < 60  # the step's own bound is 600 s
    assert repository_files(host) == before


@pytest.mark.parametrize(
    "git_first",
    [
        SLEEPS.format(verb="status"),
        # Whole lines, a few a second: a bound on the time between lines would not see it.
        DRIPS.format(verb="log", line=f"::hbtui-work:: commit {'0' * 40} drip\\n"),
    ],
    ids=["sleeps", "drips-lines"],
)
async def test_a_diff_of_a_box_that_goes_silent_is_given_up(
    repos, tmp_path: Path, idle: float, git_first: str
):
    host, box, seed = repos
    boxes, record = operations(box_with_git(tmp_path, git_first), host, box, seed)
    began = time.monotonic()
    with pytest.raises(
        work_box.BoxAnswerRefused, match=r"^box b1 went silent while reading its work for diff "
    ):
        await work_diff.diff(boxes, record, "b1", "local", patch=True)  # type: ignore[arg-type]
    assert time.monotonic() - began < 60


async def test_a_box_at_work_is_not_given_up_however_long_it_takes(
    repos, tmp_path: Path, idle: float
):
    """What counts is what the box sends in each idle bound, not the step's length: a
    log that comes slowly, but more than the floor each bound, is read to its end."""
    host, box, seed = repos
    for n in range(79):
        commit(box, f"c{n}.txt")
    # 80 lines of some 75 bytes, 20 a second: 1.5 KiB a second, for 4 s.
    slow = '/usr/bin/git "$@" | while read -r l; do echo "$l"; sleep 0.05; done; exit'
    boxes, record = operations(
        box_with_git(tmp_path, f'case " $* " in *" log "*) {slow} ;; esac'), host, box, seed
    )
    began = time.monotonic()
    shown = await work_diff.diff(boxes, record, "b1", "local", patch=False)  # type: ignore[arg-type]
    assert len(shown.commits) == 80
    assert time.monotonic() - began > idle  # longer than the bound, and not given up


async def test_the_idle_bound_counts_the_box_s_silence_not_the_reader_s_time():
    """The one bound a diff, a pull and a save share: a line that is no progress (a
    repeat, a drip) does not hold the step, and what hbtui does with a line that is (a
    save copies a part) is not the box's silence."""
    from hbtui.errors import HbtuiError

    async def box():
        yield "part 1"
        yield "part 2"
        while True:
            await asyncio.sleep(0.05)
            yield "still here"

    read: list[str] = []
    lines = guest.progressing(
        box(), 0.3, lambda line: line.startswith("part"), lambda: HbtuiError("went silent")
    )
    with pytest.raises(HbtuiError, match="went silent"):
        async for line in lines:
            read.append(line)
            if line.startswith("part"):
                await asyncio.sleep(0.5)  # the reader's own work, longer than the bound
    assert read[:2] == ["part 1", "part 2"] and set(read[2:]) == {"still here"}


def test_a_bad_idle_bound_is_one_line(monkeypatch: pytest.MonkeyPatch):
    from hbtui.errors import UsageError

    for bad in ("0", "-1", "soon", "601", "nan"):
        monkeypatch.setenv(guest.IDLE_ENV, bad)
        with pytest.raises(UsageError, match=guest.IDLE_ENV):
            guest.idle_bound()


# -- a refused pull leaves nothing --------------------------------------------------------


async def test_a_pull_refused_at_update_ref_leaves_the_repository_as_it_was(repos, tmp_path: Path):
    """The refs are locked before the objects move: a ref in the way (an earlier pull's
    branch zz, where the box now has zz/q) refused the transaction after the pack had
    moved in, and left the folders git made to lock aa/bb/cc."""
    host, box, seed = repos
    git(host, "update-ref", "refs/remotes/box/b1/zz", seed)
    for branch in ("aa/bb/cc", "zz/q"):
        git(box, "branch", branch)
    before = repository_files(host)
    with pytest.raises(BundleRefused) as refused:
        await pull(box_with_git(tmp_path, ""), host, box, seed)
    said = str(refused.value)
    assert said.startswith(f"the box's branches cannot land in {host} (")
    assert "refs/remotes/box/b1/zz" in said and said.endswith("): refused, nothing fetched")
    assert repository_files(host) == before
    # With the way clear, the same pull lands all of it.
    git(host, "update-ref", "-d", "refs/remotes/box/b1/zz")
    result = await pull(box_with_git(tmp_path, ""), host, box, seed)
    assert {ref for ref, _ in result.refs} == {
        f"refs/remotes/box/b1/{b}" for b in ("aa/bb/cc", "zz/q", "hb/b1")
    }
    git(host, "fsck", "--strict", "--no-dangling")


@pytest.mark.parametrize("wip", [False, True])
async def test_a_box_branch_named_like_the_wip_ref_is_refused(repos, tmp_path: Path, wip: bool):
    """Pulled without --wip it landed on the WIP ref, and the next pull removed it as
    an earlier pull's uncommitted changes."""
    host, box, seed = repos
    git(box, "branch", "hbtui-wip")
    before = repository_files(host)
    with pytest.raises(BundleRefused, match="branch hbtui-wip, a name hbtui keeps"):
        await pull(box_with_git(tmp_path, ""), host, box, seed, wip=wip)
    assert repository_files(host) == before
