"""`pull`'s bundle made in the box and taken in on the host as it streams, with real git
on both sides: the box's step runs here through the local runner, as the engine's exec
runs it in a box (tests/core/work/test_work_in_out.py runs the whole pull against a simulator box).

The box walks its history once (pack-objects), not three times (a count, bundle
create's --boundary walk, its pack), and the host's strict index reads the pack while
the box is still sending it: the two costs that kept a pull of 5,000 commits far from a
plain `git fetch` (tests/bench/work.py). A second pull sends only what the host lacks:
the box's bundle builds on the commits the host has from it, and on nothing else."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from hbtui.core.foundation import git as gitops
from hbtui.core.work import box as work_box
from hbtui.core.work import intake
from hbtui.engine.client import EngineStream
from hbtui.engine.runner import LocalStream

from support.work import git

ID = ["-c", "user.name=t", "-c", "user.email=t@t"]


def commit(repo: Path, name: str) -> str:
    (repo / name).write_text(f"{name}\n")
    git(repo, "add", name)
    git(repo, *ID, "commit", "-qm", f"add {name}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture(params=["sha1", "sha256"])
def repos(tmp_path: Path, request: pytest.FixtureRequest) -> tuple[Path, Path, str, str]:
    """The host repository (two commits, the seed the second) and the box's clone of
    it on hb/b1 with two commits of the agent's; the clone's `main` is at the seed and
    a branch `old` at the commit before it (the agent looking back). Either object
    format: a SHA-256 repository's bundle says so in its header."""
    host = tmp_path / "host"
    host.mkdir()
    git(host, "init", "-q", "-b", "main", f"--object-format={request.param}")
    first = commit(host, "a.txt")
    seed = commit(host, "b.txt")
    box = tmp_path / "box"
    git(tmp_path, "clone", "-q", "-b", "main", str(host), str(box))
    git(box, "branch", "old", first)
    git(box, "checkout", "-qb", "hb/b1")
    commit(box, "c.txt")
    head = commit(box, "d.txt")
    return host, box, seed, head


class Started(LocalStream):
    """A local stream that notes when its child is asked for (its lines first wanted)."""

    def __init__(self, argv: list[str], timeout: float | None, started: list[bool]) -> None:
        super().__init__(argv, timeout)
        self.started = started

    def __aiter__(self):  # type: ignore[override]
        self.started.append(True)
        return super().__aiter__()


def local_box(tmp_path: Path, started: list[bool] | None = None) -> tuple[SimpleNamespace, Path]:
    """A host whose engine runs a box's step here, every git command it runs logged
    (and, in `started`, a mark once the step is started)."""
    shim = tmp_path / "shim"
    shim.mkdir(exist_ok=True)
    log = tmp_path / "git.log"
    verb = 'case $1 in -c) echo "$3" ;; *) echo "$1" ;; esac'  # the verb after one -c
    (shim / "git").write_text(f'#!/bin/sh\n{verb} >> "{log}"\nexec /usr/bin/git "$@"\n')
    (shim / "git").chmod(0o755)
    path = f"PATH={shim}:{os.environ['PATH']}"

    def exec_stream(box: str, argv: list[str], *, user: str, timeout: float) -> EngineStream:
        full = ["env", path, *argv]
        return EngineStream(Started(full, timeout, [] if started is None else started), full)

    return SimpleNamespace(engine=SimpleNamespace(exec_stream=exec_stream)), log


async def test_the_box_walks_its_history_once_and_its_branches_land_as_a_bundle_had_them(
    repos, tmp_path: Path
):
    host, box, seed, head = repos
    engine_host, log = local_box(tmp_path)
    folder = tmp_path / "scratch"
    folder.mkdir()
    async with intake.PackIntake(host, gitops.objects_dir(host), folder) as taking:
        answer, size = await work_box.fetch_bundle(
            engine_host,  # type: ignore[arg-type]
            "b1", [str(box), seed, "0"], taking.feed, 1 << 20,
        )  # fmt: skip
        assert answer.returncode == 0 and answer.first("end") is not None, answer.said
        checked = await intake.check_bundle(taking, seed=seed, blob_max=1 << 20, wip=False)
        assert size == taking.bundle.stat().st_size > 0
        await intake.take_in(host, checked, "b1")
    walks = [verb for verb in log.read_text().split() if verb in ("rev-list", "bundle", "log")]
    assert walks == [] and "pack-objects" in log.read_text().split()
    # The branches git's own bundle of the work keeps (main at the seed and `old` behind
    # it bring nothing new), and nothing else.
    made = tmp_path / "git.bundle"
    git(box, "bundle", "create", "-q", str(made), "--branches", f"^{seed}")
    kept = git(box, "bundle", "list-heads", str(made)).splitlines()
    assert kept == [f"{head} refs/heads/hb/b1"]
    assert git(host, "for-each-ref", "--format=%(objectname) %(refname)", "refs/remotes") == (
        f"{head} refs/remotes/box/b1/hb/b1"
    )
    assert git(host, "cat-file", "-p", f"{head}:d.txt") == "d.txt"
    git(host, "fsck", "--strict", "--no-dangling")


async def test_a_box_with_nothing_since_the_seed_brings_nothing(repos, tmp_path: Path):
    """Its branches (at the seed, behind it) still pass every check, and none lands."""
    host, box, seed, _ = repos
    git(box, "checkout", "-q", "main")
    git(box, "branch", "-D", "hb/b1")
    engine_host, _ = local_box(tmp_path)
    async with intake.PackIntake(host, gitops.objects_dir(host), tmp_path) as taking:
        answer, _ = await work_box.fetch_bundle(
            engine_host,  # type: ignore[arg-type]
            "b1", [str(box), seed, "0"], taking.feed, 1 << 20,
        )  # fmt: skip
        assert answer.first("end") is not None
        checked = await intake.check_bundle(taking, seed=seed, blob_max=1 << 20, wip=False)
    assert checked.heads == []


async def test_a_bundle_the_box_cannot_make_says_why(repos, tmp_path: Path):
    """pack-objects failing part way (here: a seed the clone does not have) ends the
    stream with `fail` and git's words, not a garbled bundle."""
    host, box, _, _ = repos
    engine_host, _ = local_box(tmp_path)
    async with intake.PackIntake(host, gitops.objects_dir(host), tmp_path) as taking:
        answer, _ = await work_box.fetch_bundle(
            engine_host,  # type: ignore[arg-type]
            "b1", [str(box), "f" * 40, "0"], taking.feed, 1 << 20,
        )  # fmt: skip
    assert answer.first("fail") is not None and answer.first("end") is None
    assert answer.returncode != 0 and "bad" in answer.why(), answer.said


async def test_the_pack_is_indexed_while_the_rest_of_it_is_still_on_its_way(repos, tmp_path: Path):
    """The strict index reads the pack from its first byte: with half of the pack in,
    the index has written part of it into the quarantine and waits for the rest."""
    host, box, seed, head = repos
    for n in range(40):  # enough pack for its halves to differ
        (box / f"f{n}.txt").write_text(os.urandom(2000).hex())
    git(box, "add", ".")
    git(box, *ID, "commit", "-qm", "many")
    made = tmp_path / "box-made.bundle"
    git(box, "bundle", "create", "-q", str(made), "hb/b1", f"^{seed}")
    data = made.read_bytes()
    half = len(data) // 2
    folder = tmp_path / "scratch"
    folder.mkdir()
    async with intake.PackIntake(host, gitops.objects_dir(host), folder) as taking:
        await taking.feed(data[:half])
        pack = folder / "quarantine" / "pack"
        for _ in range(1000):  # until the index has written some of it (at most ~10 s)
            written = [p for p in pack.glob("tmp_pack_*") if p.stat().st_size > 0]
            if written:
                break
            await asyncio.sleep(0.01)
        assert written, "the index read nothing of the pack before its end"
        assert not list(pack.glob("pack-*.idx"))  # not done: it waits for the rest
        await taking.feed(data[half:])
        checked = await intake.check_bundle(taking, seed=seed, blob_max=1 << 20, wip=False)
    assert [ref for _, ref in checked.heads] == ["refs/heads/hb/b1"]
    # Checked, not taken in: the repository has none of it.
    assert subprocess.run(["git", "-C", str(host), "cat-file", "-e", head]).returncode != 0


async def test_verify_reads_the_header_while_the_pack_is_still_on_its_way(repos, tmp_path: Path):
    """`git bundle verify` needs the header alone (the commits it builds on, in the
    repository and reachable from its refs): it has its verdict before any of the pack
    has arrived, so a pull's checks after the last byte no longer wait for it."""
    host, box, seed, _ = repos
    made = tmp_path / "box-made.bundle"
    git(box, "bundle", "create", "-q", str(made), "hb/b1", f"^{seed}")
    data = made.read_bytes()
    end = data.index(b"\n\n") + 2
    folder = tmp_path / "scratch"
    folder.mkdir()
    async with intake.PackIntake(host, gitops.objects_dir(host), folder) as taking:
        await taking.feed(data[:end])
        code, _, err = await asyncio.wait_for(taking.verified(), 30)
        assert code == 0, err
        await taking.feed(data[end:])
        checked = await intake.check_bundle(taking, seed=seed, blob_max=1 << 20, wip=False)
    assert [ref for _, ref in checked.heads] == ["refs/heads/hb/b1"]


async def test_a_header_git_does_not_verify_alone_is_verified_whole(
    repos, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Should a git want the pack to verify a bundle, the header's refusal is not the last
    word: the whole bundle is verified once it is all there, and that verdict counts."""
    host, box, seed, _ = repos
    made = tmp_path / "box-made.bundle"
    git(box, "bundle", "create", "-q", str(made), "hb/b1", f"^{seed}")
    verified: list[str] = []
    run_git = gitops.run_git

    async def header_refused(repo, *args, **kwargs):
        if args[:2] == ("bundle", "verify"):
            verified.append(Path(args[-1]).name)
            if args[-1].endswith("header.bundle"):
                return 1, b"", b"error: the pack is needed"
        return await run_git(repo, *args, **kwargs)

    monkeypatch.setattr(gitops, "run_git", header_refused)
    folder = tmp_path / "scratch"
    folder.mkdir()
    async with intake.PackIntake(host, gitops.objects_dir(host), folder) as taking:
        await taking.feed(made.read_bytes())
        checked = await intake.check_bundle(taking, seed=seed, blob_max=1 << 20, wip=False)
    assert [ref for _, ref in checked.heads] == ["refs/heads/hb/b1"]
    assert verified == ["header.bundle", "box.bundle"]


@pytest.mark.parametrize("named", ["a file", "nothing"])
async def test_a_branch_naming_no_commit_the_bundle_or_host_has_is_refused(
    repos, tmp_path: Path, named: str
):
    """A header whose branch names a file of the pack, or an object nobody has, is
    refused for the commit it lacks (the walk leaves such a head out; its kind is
    asked then), and the host repository is left as it was."""
    host, box, seed, head = repos
    made = tmp_path / "box-made.bundle"
    git(box, "bundle", "create", "-q", str(made), "hb/b1", f"^{seed}")
    data = made.read_bytes()
    other = git(box, "rev-parse", "HEAD:d.txt") if named == "a file" else "e" * len(head)
    data = data.replace(f"{head} refs/heads/hb/b1".encode(), f"{other} refs/heads/hb/b1".encode())
    folder = tmp_path / "scratch"
    folder.mkdir()
    before = git(host, "for-each-ref")
    async with intake.PackIntake(host, gitops.objects_dir(host), folder) as taking:
        await taking.feed(data)
        with pytest.raises(gitops.BundleRefused, match="lacks the commit refs/heads/hb/b1 names"):
            await intake.check_bundle(taking, seed=seed, blob_max=1 << 20, wip=False)
    assert git(host, "for-each-ref") == before


async def pull_from(engine_host: SimpleNamespace, host: Path, box: Path, seed: str, report):
    """work.pull of box b1 (its clone `box`) into `host`, through `engine_host`."""
    from hbtui.core.work import book as work_book
    from hbtui.core.work import pull as work
    from hbtui.paths import Paths

    async def get(name: str) -> SimpleNamespace:
        return engine_host

    record = work_book.WorkRecord(str(host), seed, "refs/heads/main", str(box), "hb/b1")
    paths = Paths(host.parent, host.parent, host.parent)
    boxes = SimpleNamespace(hosts=SimpleNamespace(get=get), paths=paths)
    return await work.pull(
        boxes,
        record,
        host,
        "b1",
        "local",
        wip=False,
        report=report,  # type: ignore[arg-type]
    )


async def test_a_whole_pull_says_it_bundles_once_the_box_is_at_work(repos, tmp_path: Path):
    """work.pull end to end with real git on both sides (the box's step run here). Its
    first line of progress may load the terminal's renderer (tens of ms): it comes once
    the box's step has been started, so that load costs nothing the box is waiting on."""
    from hbtui.events import Phase

    host, box, seed, head = repos
    box_started: list[bool] = []
    engine_host, _ = local_box(tmp_path, box_started)
    said: list[tuple[str, bool]] = []

    def report(event: object) -> None:
        if isinstance(event, Phase):
            said.append((event.message, bool(box_started)))

    result = await pull_from(engine_host, host, box, seed, report)
    assert said[0] == ("bundling the work in b1", True)
    assert result.refs == (("refs/remotes/box/b1/hb/b1", head),)
    assert git(host, "rev-parse", "refs/remotes/box/b1/hb/b1") == head


async def test_a_box_that_sends_no_objects_still_has_its_ref_names_checked(repos, tmp_path: Path):
    """An empty pack is no reason to skip a check: a tag it names is refused, as it is
    with work in the pack."""
    from hbtui.core.foundation.git import BundleRefused
    from hbtui.core.work.box import TAG

    host, box, seed, _ = repos
    empty = subprocess.run(
        ["git", "-C", str(box), "pack-objects", "-q", "--stdout"],
        input=b"", capture_output=True, check=True,
    ).stdout  # fmt: skip
    evil = tmp_path / "evil.bundle"
    sig = "# v3 git bundle\n@object-format=sha256\n" if len(seed) == 64 else "# v2 git bundle\n"
    evil.write_bytes(f"{sig}-{seed}\n{seed} refs/tags/v9\n\n".encode() + empty)
    said = f"echo '{TAG} dirty 0'; echo '{TAG} data'; base64 -w 0 '{evil}'; echo; echo '{TAG} end'"

    def exec_stream(box: str, argv: list[str], *, user: str, timeout: float) -> EngineStream:
        full = ["sh", "-c", said]
        return EngineStream(LocalStream(full, timeout), full)

    hostile = SimpleNamespace(engine=SimpleNamespace(exec_stream=exec_stream))
    before = git(host, "for-each-ref")
    with pytest.raises(BundleRefused, match="refs/tags/v9"):
        await pull_from(hostile, host, box, seed, lambda event: None)
    assert git(host, "for-each-ref") == before


async def test_a_clone_on_no_branch_brings_nothing(repos, tmp_path: Path):
    """An agent whose clone has no branch left (it works on a detached HEAD): nothing
    pulled, as before, not a refused bundle."""
    host, box, seed, _ = repos
    git(box, "checkout", "-q", "--detach")
    for branch in ("hb/b1", "main", "old"):
        git(box, "branch", "-D", branch)
    engine_host, _ = local_box(tmp_path)
    before = git(host, "for-each-ref")
    result = await pull_from(engine_host, host, box, seed, lambda event: None)
    assert result.refs == ()
    assert git(host, "for-each-ref") == before


def packs(repo: Path) -> set[Path]:
    return set((repo / ".git" / "objects" / "pack").glob("pack-*.pack"))


def objects_in(pack: Path) -> int:
    """The number of objects a pack holds (its header's count)."""
    return int.from_bytes(pack.read_bytes()[8:12], "big")


async def test_a_second_pull_sends_only_what_the_host_lacks(repos, tmp_path: Path):
    """The box's bundle builds on what the host has from it: one commit on top of a
    pulled history sends that commit's objects, not the history again."""
    host, box, seed, _ = repos
    for n in range(30):
        (box / f"w{n}.bin").write_text(os.urandom(2000).hex())
        git(box, "add", f"w{n}.bin")
        git(box, *ID, "commit", "-qm", f"work {n}")
    engine_host, _ = local_box(tmp_path)
    first = await pull_from(engine_host, host, box, seed, lambda event: None)
    assert first.bytes > 30 * 2000
    had = packs(host)
    head = commit(box, "one.txt")
    again = await pull_from(engine_host, host, box, seed, lambda event: None)
    assert again.refs == (("refs/remotes/box/b1/hb/b1", head),)
    assert again.bytes * 20 < first.bytes, (again.bytes, first.bytes)
    (new,) = packs(host) - had
    assert objects_in(new) == 3  # the commit, its tree and the one new file
    assert git(host, "rev-parse", "refs/remotes/box/b1/hb/b1") == head
    git(host, "fsck", "--strict", "--no-dangling")


async def test_a_second_pull_walks_only_the_history_it_brings(
    repos, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """Which of the host's own commits hold the seed is read while the box bundles; the
    walk of what the box sent then stops at them: one new commit on top of 30 pulled is
    one commit walked, not 31 (the walk that cost a second pull as much as the first)."""
    host, box, seed, _ = repos
    for n in range(30):
        commit(box, f"w{n}.txt")
    engine_host, _ = local_box(tmp_path)
    await pull_from(engine_host, host, box, seed, lambda event: None)
    walked: list[int] = []
    run_git = gitops.run_git

    async def counting(repo, *args, **kwargs):
        done = await run_git(repo, *args, **kwargs)
        if args[0] == "rev-list" and "GIT_QUARANTINE_PATH" in (kwargs.get("env") or {}):
            walked.append(len(done[1].splitlines()))
        return done

    monkeypatch.setattr(gitops, "run_git", counting)
    head = commit(box, "one.txt")
    again = await pull_from(engine_host, host, box, seed, lambda event: None)
    assert again.refs == (("refs/remotes/box/b1/hb/b1", head),)
    assert walked == [1]


async def test_a_ref_left_by_an_earlier_box_of_the_name_does_not_vouch_for_the_seed(
    repos, tmp_path: Path
):
    """A box that was removed leaves its pulled refs; a new box of the same name is
    offered them, but a commit built on one whose history lacks this box's seed is
    refused as a rewritten history, however the host came by it."""
    from hbtui.core.foundation.git import BundleRefused

    host, box, seed, _ = repos
    git(host, "checkout", "-q", "--orphan", "elsewhere")
    stale = commit(host, "other.txt")
    git(host, "checkout", "-q", "main")
    git(host, "update-ref", "refs/remotes/box/b1/hb/b1", stale)
    git(host, "branch", "-D", "elsewhere")
    git(box, "fetch", "-q", str(host), stale)
    git(box, "reset", "-q", "--hard", stale)
    commit(box, "on-stale.txt")
    engine_host, _ = local_box(tmp_path)
    with pytest.raises(BundleRefused, match="no longer contains the seed"):
        await pull_from(engine_host, host, box, seed, lambda event: None)
    assert git(host, "rev-parse", "refs/remotes/box/b1/hb/b1") == stale


async def test_a_branch_made_at_a_pulled_commit_lands_beside_the_others(repos, tmp_path: Path):
    """A commit the host already has still lands where the box's new branch names it:
    the walk that stops at the host's commits knows them as holding the seed."""
    host, box, seed, pulled = repos
    engine_host, _ = local_box(tmp_path)
    await pull_from(engine_host, host, box, seed, lambda event: None)
    git(box, "branch", "again", f"{pulled}~1")
    result = await pull_from(engine_host, host, box, seed, lambda event: None)
    assert ("refs/remotes/box/b1/again", git(box, "rev-parse", "again")) in result.refs
    assert git(host, "rev-parse", "refs/remotes/box/b1/again") == git(box, "rev-parse", "again")


async def test_a_bundle_that_builds_on_a_commit_the_host_did_not_offer_is_refused(
    repos, tmp_path: Path
):
    """A box may build on the seed and on the commits the host told it it has, nothing
    else: naming another of the host's commits (which verify alone would accept) would
    tell the box the host has it."""
    from hbtui.core.foundation.git import BundleRefused
    from hbtui.core.work.box import TAG

    host, box, seed, _ = repos
    git(host, "checkout", "-qb", "private")
    private = commit(host, "private.txt")
    git(host, "checkout", "-q", "main")
    made = tmp_path / "made.bundle"
    git(box, "bundle", "create", "-q", str(made), "hb/b1", f"^{seed}")
    evil = tmp_path / "evil.bundle"
    evil.write_bytes(
        made.read_bytes().replace(f"\n-{seed}".encode(), f"\n-{private}\n-{seed}".encode(), 1)
    )
    said = f"echo '{TAG} dirty 0'; echo '{TAG} data'; base64 -w 0 '{evil}'; echo; echo '{TAG} end'"

    def exec_stream(box: str, argv: list[str], *, user: str, timeout: float) -> EngineStream:
        full = ["sh", "-c", said]
        return EngineStream(LocalStream(full, timeout), full)

    hostile = SimpleNamespace(engine=SimpleNamespace(exec_stream=exec_stream))
    before = git(host, "for-each-ref")
    with pytest.raises(BundleRefused, match=f"builds on commit '{private}', which the host did"):
        await pull_from(hostile, host, box, seed, lambda event: None)
    assert git(host, "for-each-ref") == before


WORK = "echo e > e.txt && git add e.txt && git -c user.name=t -c user.email=t@t commit -qm e"
REWRITES = {
    # The agent went back a commit: its branch lands where it is now, behind the host's.
    "went back": "git reset -q --hard HEAD~1",
    # The agent redid its work on the seed: the new branch lands, as it always did.
    "redone": f"git reset -q --hard {{seed}} && {WORK}",
    # ... and the commits the host has are gone from the box: it builds on the seed alone.
    "redone, old commits gone": f"git reset -q --hard {{seed}} && {WORK} && "
    "git reflog expire --expire=now --all && git gc -q --prune=now",
    # A branch whose history lost the seed: refused, as it always was.
    "lost the seed": f"git checkout -q --orphan fresh && {WORK} && git branch -f hb/b1 fresh "
    "&& git checkout -q hb/b1 && git branch -D fresh",
}


@pytest.mark.parametrize("rewrite", REWRITES)
async def test_a_box_that_rewrote_its_branch_after_a_pull_is_taken_or_refused_as_before(
    repos, tmp_path: Path, rewrite: str
):
    host, box, seed, pulled = repos
    engine_host, _ = local_box(tmp_path)
    await pull_from(engine_host, host, box, seed, lambda event: None)
    subprocess.run(["bash", "-c", REWRITES[rewrite].format(seed=seed)], cwd=box, check=True)
    head = git(box, "rev-parse", "HEAD")
    if rewrite == "lost the seed":
        from hbtui.core.foundation.git import BundleRefused

        with pytest.raises(BundleRefused, match="no longer contains the seed"):
            await pull_from(engine_host, host, box, seed, lambda event: None)
        assert git(host, "rev-parse", "refs/remotes/box/b1/hb/b1") == pulled
        return
    result = await pull_from(engine_host, host, box, seed, lambda event: None)
    assert result.refs == (("refs/remotes/box/b1/hb/b1", head),)
    if "e.txt" in REWRITES[rewrite]:
        assert git(host, "show", f"{head}:e.txt") == "e"
    git(host, "fsck", "--strict", "--no-dangling")
