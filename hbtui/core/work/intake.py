"""A box's bundle into the host repository: indexed as it arrives, checked in quarantine,
and only then let in.

A box's bundle is untrusted. From its first byte, its pack goes into a strict index
(`git index-pack --strict`: every object checked, and every object it names present) in
a throwaway quarantine object store, git's own quarantine environment: the host
repository's objects are borrowed read-only and no ref can change while it is set. The
index runs while the box is still sending; the pack is read once. The whole bundle is
kept in a file; it may build on the seed and on the commits the host told the box it has
(an earlier pull's), nothing else; it is verified against the repository, its ref names
are checked, and in the quarantine its history (the seed in every branch) and its file
sizes. Only then do its objects move into the host repository and its refs, in one
transaction, to `refs/remotes/box/BOX/` and nowhere else; a refusal leaves the
repository exactly as it was.

What a box sends costs the host bounded work: its header is read once, as it arrives,
and a box offering more than BRANCH_MAX branches is refused before its pack; every git
command that reads what it sent is held to gitops.BOX_GIT_MEMORY.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
from collections.abc import Awaitable, Collection
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import BinaryIO

from hbtui import boxtext
from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import (
    BOX_GIT_MEMORY,
    GIT_TIMEOUT,
    BundleRefused,
    GitError,
    alternates_line,
    end_git,
    last_line,
    parse_heads,
    target_ref,
)

HEADER_MAX = 1 << 20  # a bundle header longer than this is refused
BRANCH_MAX = 1000  # the branches a box may offer one pull (each a ref on the host)


@dataclass(frozen=True)
class Quarantine:
    """Where a box's objects wait for their checks: an object store of their own in a
    scratch folder, git run in the host repository with it as the object directory and
    the repository's store borrowed read-only. GIT_QUARANTINE_PATH is git's own mark of
    such a store (receive-pack's): no ref can change while it is set."""

    objects: Path
    borrowed: Path  # the host repository's object store

    def env(self, *, borrow: bool = True) -> dict[str, str]:
        """The environment of a git command that sees the quarantine's objects (and,
        with `borrow`, the repository's too; without, only what the box sent)."""
        env = {"GIT_OBJECT_DIRECTORY": str(self.objects), "GIT_QUARANTINE_PATH": str(self.objects)}
        if borrow:
            quoted = alternates_line(self.borrowed).rstrip(b"\n")
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = os.fsdecode(quoted)
        return env

    def seen(self) -> dict[str, str]:
        """The environment of a git command of the host repository's own (its refs may
        change) that also sees the quarantine's objects, read-only."""
        quoted = alternates_line(self.objects).rstrip(b"\n")
        return {"GIT_ALTERNATE_OBJECT_DIRECTORIES": os.fsdecode(quoted)}


class PackIntake:
    """A box's bundle as it arrives (`feed`): kept whole in a file, and its pack, from
    the byte after the header, piped into the strict index in the quarantine. Used as
    an async context manager: leaving it ends an index that still runs."""

    def __init__(self, repo: Path, objects: Awaitable[Path], folder: Path) -> None:
        self.repo = repo
        self.bundle = folder / "box.bundle"
        self._objects = objects  # the repository's object store, as it is being asked
        self._folder = folder
        self._file: BinaryIO | None = None
        self._head: bytearray | None = bytearray()  # None: past the header
        self._scanned = 0  # where the header's next line begins
        self._refs: list[bytes] = []  # the lines of the header read so far that name a ref
        self.prerequisites: list[str] = []  # the commits its header says it builds on
        self._proc: asyncio.subprocess.Process | None = None
        self._output: asyncio.Future[tuple[bytes, bytes]] | None = None
        self._quarantine: Quarantine | None = None
        self._verifying: asyncio.Future[tuple[int, bytes, bytes]] | None = None

    async def __aenter__(self) -> PackIntake:
        self._file = open(self.bundle, "wb")  # closed by seal() or the exit
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.seal()
        if self._verifying is not None and not self._verifying.done():
            self._verifying.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._verifying
        if self._proc is not None:
            await end_git(self._proc)
        if self._output is not None:  # its pipes closed with it: read to their end
            with contextlib.suppress(Exception):
                await self._output

    @property
    def quarantine(self) -> Quarantine:
        if self._quarantine is None:
            raise RuntimeError("the quarantine is made when the pack begins, or at the end")
        return self._quarantine

    async def feed(self, data: bytes) -> None:
        """The bundle's next bytes (already counted against the cap)."""
        assert self._file is not None
        self._file.write(data)
        if self._head is not None:
            self._head += data
            end = self._header_end(self._head)
            if end < 0:
                return
            header, data, self._head = bytes(self._head[:end]), bytes(self._head[end:]), None
            self._verify_header(header)
            await self._start()
        if self._proc is None:
            return
        stdin = self._proc.stdin
        if stdin is None or stdin.is_closing():
            return
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            stdin.close()  # the index ended (a broken pack): its status says why

    def _header_end(self, head: bytearray) -> int:
        """Where the pack begins in `head` (-1: not there yet). Each line of the header is
        read once, as it arrives; too long a header, or one naming more than BRANCH_MAX
        refs, is refused then, before the pack (refs are its lines after the first but
        for prerequisites, `-`, kept for check_bundle, and capabilities, `@`)."""
        while (eol := head.find(b"\n", self._scanned)) >= 0:
            start, self._scanned = self._scanned, eol + 1
            if eol == start:
                return eol + 1  # the empty line that ends the header
            if start and head[start] == ord("-"):
                sha = bytes(head[start + 1 : eol]).partition(b" ")[0]
                self.prerequisites.append(sha.decode(errors="replace"))
            elif start and head[start] != ord("@"):
                self._refs.append(bytes(head[start:eol]))
                if len(self._refs) > BRANCH_MAX:
                    raise BundleRefused(
                        f"the box offers more than {BRANCH_MAX} branches, more than a pull "
                        "takes: refused, nothing fetched"
                    )
        if len(head) > HEADER_MAX:
            raise BundleRefused(
                f"the box's bundle has a header longer than {HEADER_MAX >> 20} MiB: refused, "
                "nothing fetched"
            )
        return -1

    async def _make_quarantine(self) -> Quarantine:
        quarantine = Quarantine(self._folder / "quarantine", await self._objects)
        (quarantine.objects / "pack").mkdir(parents=True)
        self._quarantine = quarantine
        return quarantine

    async def _start(self) -> None:
        quarantine = await self._make_quarantine()
        self._proc = proc = await gitops.start_git(
            self.repo, "index-pack", "--strict", "--fix-thin", "--stdin",
            stdin=asyncio.subprocess.PIPE, env=quarantine.env(), bounded=True,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stderr is not None
        self._output = asyncio.gather(proc.stdout.read(), proc.stderr.read())

    def _verify_header(self, header: bytes) -> None:
        """`git bundle verify` reads a bundle's header alone (what it builds on must be in
        the repository, and reachable from its refs): it runs on the header, kept in a
        file of its own, from the moment it has arrived, while the box still packs."""
        path = self._folder / "header.bundle"
        path.write_bytes(header)
        self._verifying = asyncio.ensure_future(
            gitops.run_git(
                self.repo, "bundle", "verify", "-q", str(path), check=False, bounded=True
            )
        )

    async def verified(self) -> tuple[int, bytes, bytes]:
        """`git bundle verify`'s status and output. The header's verdict, when it passed;
        otherwise (a git that wants the pack too, or a header that never ended) the
        whole bundle's, once it is all there, which is the one a refusal quotes."""
        if self._verifying is not None:
            early = await self._verifying
            if early[0] == 0:
                return early
        return await gitops.run_git(
            self.repo, "bundle", "verify", "-q", str(self.bundle), check=False, bounded=True
        )

    def header_refs(self) -> bytes:
        """The header's lines that name a ref, as `git bundle list-heads` prints them."""
        return b"".join(line + b"\n" for line in self._refs)

    def seal(self) -> None:
        """The bundle is all there: its file is complete for the commands that read it."""
        if self._file is not None:
            self._file.close()
            self._file = None

    async def indexed(self) -> tuple[int, bytes, bytes]:
        """The index's end: its exit status and output, once it has read the whole pack."""
        if self._proc is None or self._output is None:
            if self._quarantine is None:
                await self._make_quarantine()
            return 1, b"", b"the bundle's header has no end"
        if self._proc.stdin is not None and not self._proc.stdin.is_closing():
            self._proc.stdin.close()
        try:
            async with asyncio.timeout(GIT_TIMEOUT):
                out, err = await self._output
                return await self._proc.wait(), out, err
        except TimeoutError:
            raise GitError(f"git index-pack took more than {GIT_TIMEOUT:g} s") from None


@dataclass(frozen=True)
class CheckedBundle:
    """A box's bundle that passed every check: the refs it brings something new on
    (a branch whose commits are all in the seed's history brings nothing, and is left
    out, as `git bundle create` leaves it out), and its objects in quarantine."""

    heads: list[tuple[str, str]]  # (commit, ref in the box)
    quarantine: Quarantine


async def check_bundle(
    intake: PackIntake,
    *,
    seed: str,
    blob_max: int,
    wip: bool,
    offered: Collection[str] = (),
    holders: frozenset[str] = frozenset(),
) -> CheckedBundle:
    """Every check a box's bundle, all of it fed to `intake`, must pass before it
    reaches the repository: it builds on no commit but the seed and those the host
    `offered` (the host's own, an earlier pull's: a box learns nothing of the others by
    naming them), verify, the ref names, the strict index, the seed in every branch's
    history, no file over `blob_max` bytes. The steps that need not wait for each other
    run at once, and a refusal names the first check (in that order) the bundle failed.
    `holders`: `seed_holders` of what was offered, asked while the box bundled; the
    history the host already has is then not walked again."""
    intake.seal()
    allowed = {seed, *offered}
    if unoffered := next((sha for sha in intake.prerequisites if sha not in allowed), None):
        raise BundleRefused(
            f"the box's bundle builds on commit {boxtext.line(unoffered)[:64]!r}, which the "
            "host did not offer it: refused, nothing fetched"
        )
    verifying = asyncio.ensure_future(intake.verified())
    checking: asyncio.Future[tuple[list[str], bool]] | None = None
    try:
        indexed = await intake.indexed()
        # The heads are the header's, as read on arrival (what git's list-heads prints);
        # the seed's and the sizes' checks need them and the index, not verify, and run
        # while it does.
        try:
            heads, misnamed = parse_heads(intake.header_refs(), wip=wip), None
        except BundleRefused as refused:
            heads, misnamed = [], refused
        if indexed[0] == 0 and misnamed is None:
            checking = asyncio.ensure_future(
                _seed_and_sizes(intake, seed, heads, offered, holders, blob_max)
            )
        _refuse_first(await verifying, misnamed, indexed)
        assert checking is not None
        held, too_big = await checking
    finally:
        for running in (verifying, checking):
            if running is not None and not running.done():
                running.cancel()
                with contextlib.suppress(Exception, asyncio.CancelledError):
                    await running
    for (_, ref), holding in zip(heads, held, strict=True):
        if holding == "missing":
            raise BundleRefused(f"the box's bundle lacks the commit {ref} names: refused")
        if holding == "lost":
            raise BundleRefused(
                f"{ref} in the box no longer contains the seed commit {seed[:12]} "
                "(its history was rewritten): refused, nothing fetched"
            )
    if too_big:
        raise BundleRefused(
            f"the box's work holds a file of more than {blob_max} bytes: refused, nothing fetched"
        )
    new = [head for head, holding in zip(heads, held, strict=True) if holding == "new"]
    return CheckedBundle(new, intake.quarantine)


async def _seed_and_sizes(
    intake: PackIntake,
    seed: str,
    heads: list[tuple[str, str]],
    offered: Collection[str],
    holders: frozenset[str],
    blob_max: int,
) -> tuple[list[str], bool]:
    """Where each head stands to the seed (see `_hold_seed`), and whether the box sent a
    file over `blob_max` bytes: the checks of the indexed objects in quarantine."""
    quarantine = intake.quarantine
    shas = [sha for sha, _ in heads]
    stops = [sha for sha in offered if sha in holders]
    folder = intake.bundle.parent
    return await asyncio.gather(
        _hold_seed(intake.repo, quarantine, seed, shas, folder, holders, stops),
        _blob_over(intake.repo, quarantine, blob_max),
    )


def _refuse_first(
    verified: tuple[int, bytes, bytes],
    misnamed: BundleRefused | None,
    indexed: tuple[int, bytes, bytes],
) -> None:
    """The first of verify, the ref names and the strict index that refused the bundle,
    in that order, as a refusal."""
    code, _, err = verified
    if code != 0:
        why = last_line(err) or f"exit status {code}"
        raise BundleRefused(f"the box's bundle fails git bundle verify ({why}): refused")
    if misnamed is not None:
        raise misnamed
    code, _, err = indexed
    if code != 0:
        why = last_line(err) or f"exit status {code}"
        if _out_of_memory(err):
            raise BundleRefused(
                f"the box's pack needs more than the {BOX_GIT_MEMORY >> 20} MiB git may use "
                f"to check it ({why}): refused, nothing fetched"
            )
        raise BundleRefused(f"the box's bundle holds a broken pack ({why}): refused")


def _out_of_memory(stderr: bytes) -> bool:
    """Whether git ended for want of memory: an allocation over GIT_ALLOC_LIMIT, or one
    the memory limit refused (git's words for these are never translated)."""
    return b"over limit" in stderr or b"Out of memory" in stderr


async def seed_holders(repo: Path, seed: str, offered: Collection[str]) -> frozenset[str]:
    """The commits the host has from the box since the seed (`offered`, an earlier pull's,
    and their history back to the seed) that hold the seed in their history: those on
    the ancestry path from the seed to them. The host's own objects, read while the box
    makes its bundle: a pull that brings one commit on top of thousands then walks that
    one commit (see `_hold_seed`)."""
    if not offered:
        return frozenset()
    out = await gitops.git_out(repo, "rev-list", "--ancestry-path", *offered, f"^{seed}")
    return frozenset(out.split())


async def _hold_seed(
    repo: Path,
    quarantine: Quarantine,
    seed: str,
    shas: list[str],
    folder: Path,
    holders: frozenset[str],
    stops: list[str],
) -> list[str]:
    """For each commit in `shas`: "new" (commits since the seed, the seed in their
    history), "lost" (commits whose history lacks the seed), "old" (a commit of the
    seed's own history: nothing new) or "missing" (no such commit). At most two git
    commands for any number of branches (the walk, then the kinds of the heads it left
    out): one per branch let a box that made thousands hold a pull for minutes. The history since the seed is walked once, but for what the host
    knows to hold it (`holders`, see `seed_holders`): the walk stops at `stops`, the
    host's commits among them. A commit holds the seed when one of its parents is the
    seed or holds it (a parent the walk left out that is no holder does not: it is of
    the seed's own history, or of one that lacks it)."""
    env = quarantine.env()
    ends = [f"^{sha}" for sha in (seed, *stops)]
    (folder / "revs").write_text("".join(f"{sha}\n" for sha in [*shas, *ends]))
    with open(folder / "revs", "rb") as revs:
        # A head that is no commit, or that nothing has, is left out of the walk (git's
        # --ignore-missing): which it is, is asked below, of the heads the walk left out.
        _, out, _ = await gitops.run_git(
            repo, "rev-list", "--topo-order", "--parents", "--ignore-missing", "--stdin",
            stdin=revs, env=env, bounded=True,
        )  # fmt: skip
    holds = dict.fromkeys((*holders, seed), True)
    for line in reversed(out.decode().splitlines()):  # parents before their children
        commit, *parents = line.split()
        holds[commit] = any(holds.get(parent, False) for parent in parents)
    unwalked = [sha for sha in shas if sha not in holds]
    commits = await _commits(repo, env, folder, unwalked) if unwalked else set()
    return [
        "old" if sha == seed or (sha not in holds and sha in commits)
        else "missing" if sha not in holds
        else "new" if holds[sha]
        else "lost"
        for sha in shas
    ]  # fmt: skip


async def _commits(repo: Path, env: dict[str, str], folder: Path, shas: list[str]) -> set[str]:
    """Which of `shas` are commits the quarantine or the repository has."""
    (folder / "heads").write_text("".join(f"{sha}\n" for sha in shas))
    with open(folder / "heads", "rb") as listed:
        _, out, _ = await gitops.run_git(
            repo, "cat-file", "--batch-check=%(objecttype)", stdin=listed, check=False, env=env,
            bounded=True,
        )  # fmt: skip
    kinds = out.decode(errors="replace").splitlines()
    return {sha for sha, kind in zip(shas, kinds, strict=False) if kind == "commit"}


async def _blob_over(repo: Path, quarantine: Quarantine, blob_max: int) -> bool:
    """Whether the box sent a file of more than `blob_max` bytes (the quarantine alone,
    without the borrowed objects: only what the box sent)."""
    _, out, _ = await gitops.run_git(
        repo, "cat-file", "--batch-all-objects", "--unordered",
        "--batch-check=%(objecttype) %(objectsize)", env=quarantine.env(borrow=False),
        bounded=True,
    )  # fmt: skip
    for line in out.splitlines():
        kind, _, size = line.partition(b" ")
        if kind == b"blob" and int(size) > blob_max:
            return True
    return False


def _move_packs(quarantine: Path, objects: Path) -> list[Path]:
    """The quarantine's packs into the repository's object store: each pack's data
    first, its index last (git sees a pack by its index), each under a temporary name
    renamed into place. Returns the files it placed, in the order placed."""
    target = objects / "pack"
    target.mkdir(exist_ok=True)
    placed: list[Path] = []
    for idx in sorted((quarantine / "pack").glob("pack-*.idx")):
        for suffix in (".pack", ".rev", ".idx"):
            source = idx.with_suffix(suffix)
            final = target / source.name
            if not source.exists() or final.exists():
                continue
            temp = target / f"tmp_{source.name}"
            try:
                shutil.copyfile(source, temp)
                os.chmod(temp, 0o444)
                os.replace(temp, final)
            except OSError:
                temp.unlink(missing_ok=True)
                _unplace(placed)
                raise
            placed.append(final)
    return placed


def _unplace(placed: list[Path]) -> None:
    """Packs placed for a pull that then failed, taken out again: each index first."""
    for path in reversed(placed):
        path.unlink(missing_ok=True)


def _new_folders(common: Path, refs: list[str]) -> list[Path]:
    """The folders a transaction of `refs` may make that are not there yet (git makes a
    ref's folders when it locks the ref, and leaves them when the transaction fails),
    deepest first."""
    new = {
        common / top / "/".join(parts[:depth])
        for ref in refs
        for parts in [ref.split("/")[:-1]]
        for depth in range(2, len(parts) + 1)
        for top in ("", "logs")
    }
    return sorted((p for p in new if not p.exists()), key=lambda p: len(p.parts), reverse=True)


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        with contextlib.suppress(OSError):  # not empty (another ref came), or not made
            folder.rmdir()


async def _answer(proc: asyncio.subprocess.Process, said: str) -> bool:
    """Whether `git update-ref --stdin` answered `said: ok` to the command just sent."""
    assert proc.stdout is not None
    async with asyncio.timeout(GIT_TIMEOUT):
        return await proc.stdout.readline() == f"{said}: ok\n".encode()


async def _send(proc: asyncio.subprocess.Process, text: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(text.encode())
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # it ended: it says why
        await proc.stdin.drain()


async def _finish(proc: asyncio.subprocess.Process) -> bytes:
    """Its input ended (before `commit`, git aborts the transaction: a kill would leave
    its locks), then its end waited for; its stderr."""
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.close()
    try:
        async with asyncio.timeout(GIT_TIMEOUT):
            err = await proc.stderr.read()
            await proc.wait()
            return err
    finally:
        await end_git(proc)


async def take_in(repo: Path, checked: CheckedBundle, box: str) -> None:
    """A checked bundle into `repo`, all of it or nothing (no fetch: its pack is indexed
    once). Its refs, each to its one place under refs/remotes/box/BOX/, are locked and
    checked first, in one transaction that sees the box's objects where they wait; only
    then do the objects move in, and the transaction commits. A transaction git refuses
    (a ref in the way, one locked) leaves the repository as it was: no object moved, no
    folder left."""
    quarantine = checked.quarantine
    refs = [(target_ref(box, ref), sha) for sha, ref in checked.heads]
    folders = _new_folders(quarantine.borrowed.parent, [ref for ref, _ in refs])
    proc = await gitops.start_git(
        repo, "update-ref", "--stdin", stdin=asyncio.subprocess.PIPE, env=quarantine.seen(),
        bounded=True,
    )  # fmt: skip
    placed: list[Path] = []
    try:
        await _send(proc, "start\n" + "".join(f"update {r} {sha}\n" for r, sha in refs))
        await _send(proc, "prepare\n")
        if not (await _answer(proc, "start") and await _answer(proc, "prepare")):
            why = last_line(await _finish(proc)) or "no answer"
            raise BundleRefused(
                f"the box's branches cannot land in {repo} ({why}): refused, nothing fetched"
            )
        placed = await asyncio.to_thread(_move_packs, quarantine.objects, quarantine.borrowed)
        await _send(proc, "commit\n")
        if not await _answer(proc, "commit"):
            raise GitError(
                f"git update-ref failed: {last_line(await _finish(proc)) or 'no answer'}"
            )
    except BaseException:
        with contextlib.suppress(Exception):
            await _finish(proc)
        await asyncio.to_thread(_unplace, placed)
        _remove_empty(folders)
        raise
    await _finish(proc)
