"""Git on the host for work in and out of boxes: read a repository (never change it), make
the seed bundle a box is cloned from, and take a box's bundle in only once it has passed
every check.

A box's bundle is untrusted. It is verified against the repository, its ref names are
checked, and its pack is indexed strictly, once, into a throwaway quarantine object store
(git's own quarantine environment: the host repository's objects are borrowed read-only
and no ref can change while it is set), where its history and its blob sizes are checked.
Only then do its objects move into the host repository and its refs, in one transaction,
to `refs/remotes/box/BOX/` and nowhere else; a refusal leaves the repository exactly as
it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hbtui.core import ansi
from hbtui.environment import child_env
from hbtui.errors import HbtuiError, UsageError

GIT_TIMEOUT = 600.0
SEED_REF = "refs/hbtui/seed"  # the one ref of a seed bundle, and where the box keeps it
WIP_REF = "refs/hbtui/wip"  # `pull --wip`: the uncommitted changes, committed for the pull
WIP_BRANCH = "hbtui-wip"  # where WIP_REF lands under the box's refs on the host
BOX_REFS = "refs/remotes/box"
HEADER_MAX = 1 << 20  # a bundle header longer than this is refused
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# A branch name as a box may offer it: plain characters, no empty, dotted or locked part.
_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")


class GitError(HbtuiError):
    """A git command on the host failed (its last line of stderr says why)."""


class BundleRefused(HbtuiError):
    """A box's bundle failed a check; the host repository was not touched."""


def _env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """No GIT_* of the caller's (GIT_DIR would aim every command elsewhere), no prompt;
    `extra`: hbtui's own GIT_* (a quarantine's)."""
    env = {k: v for k, v in child_env().items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.update(extra or {})
    return env


def _last_line(stderr: bytes) -> str:
    lines = [ansi.plain(x) for x in stderr.decode(errors="replace").splitlines()]
    lines = [x for x in lines if x]
    return lines[-1][:300] if lines else ""


async def run_git(
    repo: Path | None,
    *args: str,
    check: bool = True,
    timeout: float = GIT_TIMEOUT,
    stdin: BinaryIO | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[int, bytes, bytes]:
    """One git command (in `repo` when given); a failure is a GitError unless `check` is
    off. `env`: GIT_* variables of hbtui's own for it."""
    argv = ["git", *(["-C", str(repo)] if repo is not None else []), *args]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=stdin if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=_env(env),
        )
    except FileNotFoundError:
        raise GitError("git is not installed on this machine") from None
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        raise GitError(f"git {args[0]} took more than {timeout:g} s") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    code = proc.returncode or 0
    if check and code != 0:
        raise GitError(f"git {args[0]} failed: {_last_line(err) or f'exit status {code}'}")
    return code, out, err


async def git_out(repo: Path | None, *args: str) -> str:
    return (await run_git(repo, *args))[1].decode(errors="replace").strip()


@dataclass(frozen=True)
class RepoSeed:
    """What `new --repo` puts in a box: a repository, the ref asked for, its commit."""

    repo: Path  # the work tree's top folder
    ref: str  # as the user named it ("" for the current branch)
    label: str  # what it resolved to (refs/heads/main, HEAD, a commit)
    seed: str  # the commit's full id

    @property
    def folder(self) -> str:
        """The clone's folder name in the box."""
        return _folder_name(self.repo.name)


def _folder_name(name: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "-", name).strip(".-") or "repo"
    return cleaned[:100]


def split_repo_ref(text: str) -> tuple[Path, str]:
    """`PATH[@REF]`: a path that exists as written wins over a ref after its last @."""
    path = Path(text).expanduser()
    if "@" in text and not path.exists():
        where, ref = text.rsplit("@", 1)
        if not ref:
            raise UsageError(f"{text!r}: nothing after @ (PATH@REF, e.g. .@main)")
        return Path(where or ".").expanduser(), ref
    return path, ""


async def repo_top(path: Path) -> Path:
    """The top of the work tree `path` is in; a one-line error when it is none."""
    if not path.is_dir():
        raise UsageError(f"{path} is not a folder")
    code, out, _ = await run_git(path, "rev-parse", "--show-toplevel", check=False)
    top = out.decode(errors="replace").strip()
    if code != 0 or not top:
        raise UsageError(f"{path} is not in a git work tree")
    return Path(top)


async def resolve_seed(text: str) -> RepoSeed:
    """The repository and commit `PATH[@REF]` names (REF default: the current branch)."""
    path, ref = split_repo_ref(text)
    top = await repo_top(path.absolute())
    if ref.startswith("-"):
        raise UsageError(f"not a ref: {ref!r}")
    wanted = ref or "HEAD"
    code, out, _ = await run_git(
        top, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{wanted}^{{commit}}",
        check=False,
    )  # fmt: skip
    seed = out.decode(errors="replace").strip()
    if code != 0 or not _SHA.fullmatch(seed):
        if not ref:
            raise UsageError(f"{top} has no commit yet: commit something to put in the box")
        raise UsageError(f"{top} has no commit {ref!r}")
    label = ref
    if not ref:
        code, out, _ = await run_git(top, "symbolic-ref", "-q", "HEAD", check=False)
        label = out.decode(errors="replace").strip() if code == 0 else "HEAD"
    return RepoSeed(top, ref, label, seed)


async def objects_dir(repo: Path) -> Path:
    common = await git_out(repo, "rev-parse", "--path-format=absolute", "--git-common-dir")
    return Path(common) / "objects"


async def _borrowing_repo(repo: Path, folder: Path) -> Path:
    """A bare repository in `folder` that reads `repo`'s objects and writes only its own."""
    quarantine = folder / "quarantine.git"
    await run_git(None, "init", "-q", "--bare", str(quarantine))
    alternates = quarantine / "objects" / "info" / "alternates"
    alternates.write_bytes(alternates_line(await objects_dir(repo)))
    return quarantine


def alternates_line(objects: Path) -> bytes:
    """`objects` as one line of an alternates file, C-quoted as git reads it: a newline
    in the path would otherwise split it in two and git would find no objects."""
    quoted = bytearray(b'"')
    for byte in os.fsencode(objects):
        if byte in b'"\\' or byte < 0x20 or byte == 0x7F:
            quoted += b"\\%03o" % byte
        else:
            quoted.append(byte)
    return bytes(quoted + b'"\n')


async def seed_bundle(seed: RepoSeed, folder: Path) -> Path:
    """A bundle of the seed's committed history, its one ref SEED_REF (the host
    repository gets no ref: the ref is made in a borrowing repository)."""
    borrower = await _borrowing_repo(seed.repo, folder)
    await run_git(borrower, "update-ref", SEED_REF, seed.seed)
    bundle = folder / "seed.bundle"
    await run_git(borrower, "bundle", "create", "-q", str(bundle), SEED_REF)
    return bundle


def box_ref_prefix(box: str) -> str:
    return f"{BOX_REFS}/{box}/"


def target_ref(box: str, ref: str) -> str:
    """Where a checked ref of the box's lands in the host repository."""
    if ref == WIP_REF:
        return box_ref_prefix(box) + WIP_BRANCH
    return box_ref_prefix(box) + ref.removeprefix("refs/heads/")


def check_ref_name(ref: str, *, wip: bool) -> None:
    """A box may offer its branches (and, for --wip, the WIP ref), nothing else."""
    if wip and ref == WIP_REF:
        return
    branch = ref.removeprefix("refs/heads/")
    if (
        branch == ref
        or not _BRANCH.fullmatch(branch)
        or ".." in branch
        or branch.endswith((".lock", "."))
        or "/." in branch
        or (wip and branch == WIP_BRANCH)  # where --wip lands
    ):
        raise BundleRefused(
            f"the box's bundle names ref {ansi.plain(ref)[:120]!r}, outside its branches "
            "(refs/heads/...): refused, nothing fetched"
        )


def parse_heads(output: bytes, *, wip: bool) -> list[tuple[str, str]]:
    """`git bundle list-heads` output: (commit, ref) pairs, every ref checked."""
    heads: list[tuple[str, str]] = []
    for raw in output.decode(errors="replace").splitlines():
        sha, _, ref = raw.partition(" ")
        if not _SHA.fullmatch(sha):
            raise BundleRefused("the box's bundle lists a ref without a commit id: refused")
        check_ref_name(ref, wip=wip)
        if any(ref == seen for _, seen in heads):
            raise BundleRefused(f"the box's bundle names {ref} twice: refused")
        heads.append((sha, ref))
    if not heads:
        raise BundleRefused("the box's bundle holds no branch: refused")
    return heads


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


@dataclass(frozen=True)
class CheckedBundle:
    """A box's bundle that passed every check: its refs, and its objects in quarantine."""

    heads: list[tuple[str, str]]  # (commit, ref in the box)
    quarantine: Quarantine


async def check_bundle(
    repo: Path, objects: Path, bundle: Path, folder: Path, *, seed: str, blob_max: int,
    wip: bool,
) -> CheckedBundle:  # fmt: skip
    """Every check a box's bundle must pass before it reaches `repo` (whose object store
    is `objects`): verify, the ref names, a strict index of its pack into a quarantine in
    `folder`, the seed in every branch's history, no file over `blob_max` bytes. The pack
    is read once; the steps that need not wait for each other run at once, and a
    refusal names the first check (in that order) the bundle failed."""
    quarantine = Quarantine(folder / "quarantine", objects)
    (quarantine.objects / "pack").mkdir(parents=True)
    verified, listed, indexed = await asyncio.gather(
        run_git(repo, "bundle", "verify", "-q", str(bundle), check=False),
        run_git(None, "bundle", "list-heads", str(bundle), check=False),
        _index_pack(repo, quarantine, bundle),
    )
    code, _, err = verified
    if code != 0:
        why = _last_line(err) or f"exit status {code}"
        raise BundleRefused(f"the box's bundle fails git bundle verify ({why}): refused")
    code, out, err = listed
    if code != 0:
        raise GitError(f"git bundle list-heads failed: {_last_line(err) or code}")
    heads = parse_heads(out, wip=wip)
    code, _, err = indexed
    if code != 0:
        why = _last_line(err) or f"exit status {code}"
        raise BundleRefused(f"the box's bundle holds a broken pack ({why}): refused")
    held, too_big = await asyncio.gather(
        _hold_seed(repo, quarantine, seed, [sha for sha, _ in heads], folder),
        _blob_over(repo, quarantine, blob_max),
    )
    for (_, ref), has_seed in zip(heads, held, strict=True):
        if has_seed is None:
            raise BundleRefused(f"the box's bundle lacks the commit {ref} names: refused")
        if not has_seed:
            raise BundleRefused(
                f"{ref} in the box no longer contains the seed commit {seed[:12]} "
                "(its history was rewritten): refused, nothing fetched"
            )
    if too_big:
        raise BundleRefused(
            f"the box's work holds a file of more than {blob_max} bytes: refused, nothing fetched"
        )
    return CheckedBundle(heads, quarantine)


async def _hold_seed(
    repo: Path, quarantine: Quarantine, seed: str, shas: list[str], folder: Path
) -> list[bool | None]:
    """For each commit in `shas`, whether the seed is in its history (None: no such
    commit). Two git commands for any number of branches: one per branch let a box that
    made thousands hold a pull for minutes. The history since the seed is walked once;
    a commit holds the seed when one of its parents is the seed or holds it (what the
    walk leaves out is the seed's own history, which cannot reach the seed)."""
    env = quarantine.env()
    (folder / "heads").write_text("".join(f"{sha}\n" for sha in shas))
    with open(folder / "heads", "rb") as listed:
        _, out, _ = await run_git(
            repo, "cat-file", "--batch-check=%(objecttype)", stdin=listed, check=False, env=env
        )
    kinds = out.decode(errors="replace").splitlines()
    commits = [sha for sha, kind in zip(shas, kinds, strict=False) if kind == "commit"]
    (folder / "revs").write_text("".join(f"{sha}\n" for sha in commits) + f"^{seed}\n")
    with open(folder / "revs", "rb") as revs:
        _, out, _ = await run_git(
            repo, "rev-list", "--topo-order", "--parents", "--stdin", stdin=revs, env=env
        )
    holds: dict[str, bool] = {seed: True}
    for line in reversed(out.decode().splitlines()):  # parents before their children
        commit, *parents = line.split()
        holds[commit] = any(holds.get(parent, False) for parent in parents)
    return [
        holds.get(sha, False) if i < len(kinds) and kinds[i] == "commit" else None
        for i, sha in enumerate(shas)
    ]


async def _blob_over(repo: Path, quarantine: Quarantine, blob_max: int) -> bool:
    """Whether the box sent a file of more than `blob_max` bytes (the quarantine alone,
    without the borrowed objects: only what the box sent)."""
    _, out, _ = await run_git(
        repo, "cat-file", "--batch-all-objects", "--unordered",
        "--batch-check=%(objecttype) %(objectsize)", env=quarantine.env(borrow=False),
    )  # fmt: skip
    for line in out.splitlines():
        kind, _, size = line.partition(b" ")
        if kind == b"blob" and int(size) > blob_max:
            return True
    return False


def _pack_offset(bundle: Path) -> int | None:
    """Where the pack starts: after the header's blank line (None: the header has no end)."""
    with open(bundle, "rb") as fh:
        head = fh.read(HEADER_MAX)
    end = head.find(b"\n\n")
    return None if end < 0 else end + 2


async def _index_pack(repo: Path, quarantine: Quarantine, bundle: Path) -> tuple[int, bytes, bytes]:
    """Every object of the pack read, checked (--strict: each object, and every object it
    names present) and stored in the quarantine: a fetch would skip a pack whose commits
    the repository has already, corrupt or not."""
    offset = _pack_offset(bundle)
    if offset is None:
        return 1, b"", b"the bundle's header has no end"
    with open(bundle, "rb") as fh:
        fh.seek(offset)
        return await run_git(
            repo, "index-pack", "--strict", "--fix-thin", "--stdin",
            stdin=fh, check=False, env=quarantine.env(),
        )  # fmt: skip


def _move_packs(quarantine: Path, objects: Path) -> None:
    """The quarantine's packs into the repository's object store: each pack's data
    first, its index last (git sees a pack by its index), each under a temporary name
    renamed into place."""
    target = objects / "pack"
    target.mkdir(exist_ok=True)
    for idx in sorted((quarantine / "pack").glob("pack-*.idx")):
        for suffix in (".pack", ".rev", ".idx"):
            source = idx.with_suffix(suffix)
            final = target / source.name
            if not source.exists() or final.exists():
                continue
            temp = target / f"tmp_{source.name}"
            shutil.copyfile(source, temp)
            os.chmod(temp, 0o444)
            os.replace(temp, final)


async def take_in(repo: Path, checked: CheckedBundle, box: str) -> None:
    """A checked bundle into `repo`: its objects, then its refs in one transaction, each
    to its one place under refs/remotes/box/BOX/ (no fetch: its pack is indexed once)."""
    quarantine = checked.quarantine
    await asyncio.to_thread(_move_packs, quarantine.objects, quarantine.borrowed)
    updates = "".join(f"update {target_ref(box, ref)} {sha}\n" for sha, ref in checked.heads)
    with tempfile.TemporaryFile() as fh:
        fh.write(updates.encode())
        fh.seek(0)
        await run_git(repo, "update-ref", "--stdin", stdin=fh)


async def ref_exists(repo: Path, ref: str) -> str:
    """`ref` when `repo` has it, else "" (say, the WIP ref an earlier `pull --wip` left)."""
    code, _, _ = await run_git(repo, "rev-parse", "--verify", "-q", ref, check=False)
    return ref if code == 0 else ""


async def drop_ref(repo: Path, ref: str) -> None:
    await run_git(repo, "update-ref", "-d", ref)
