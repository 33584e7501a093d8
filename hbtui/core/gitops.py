"""Git on the host for work in and out of boxes: read a repository (never change it), make
the seed bundle a box is cloned from, and take a box's bundle in only once it has passed
every check.

A box's bundle is untrusted. It is verified against the repository, its ref names are
checked, and its pack is indexed strictly into a throwaway quarantine repository (which
borrows the host repository's objects read-only through `objects/info/alternates`), where
its history and its blob sizes are checked. Only then do its objects move into the host
repository and its refs, in one transaction, to `refs/remotes/box/BOX/` and nowhere else;
a refusal leaves the repository exactly as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
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


def _env() -> dict[str, str]:
    """No GIT_* of the caller's (GIT_DIR would aim every command elsewhere), no prompt."""
    env = {k: v for k, v in child_env().items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
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
) -> tuple[int, bytes, bytes]:
    """One git command (in `repo` when given); a failure is a GitError unless `check` is off."""
    argv = ["git", *(["-C", str(repo)] if repo is not None else []), *args]
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=stdin if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=_env(),
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
class CheckedBundle:
    """A box's bundle that passed every check: its refs, and its objects in quarantine."""

    heads: list[tuple[str, str]]  # (commit, ref in the box)
    quarantine: Path


async def check_bundle(
    repo: Path, bundle: Path, folder: Path, *, seed: str, blob_max: int, wip: bool
) -> CheckedBundle:
    """Every check a box's bundle must pass before it reaches `repo`: verify, the ref
    names, a strict index of its pack into a quarantine repository in `folder`, the seed
    in every branch's history, no file over `blob_max` bytes."""
    code, _, err = await run_git(repo, "bundle", "verify", "-q", str(bundle), check=False)
    if code != 0:
        why = _last_line(err) or f"exit status {code}"
        raise BundleRefused(f"the box's bundle fails git bundle verify ({why}): refused")
    _, out, _ = await run_git(None, "bundle", "list-heads", str(bundle))
    heads = parse_heads(out, wip=wip)
    quarantine = await _borrowing_repo(repo, folder)
    await _index_pack(quarantine, bundle)
    await _check_histories(quarantine, heads, folder, seed)
    # Without the borrowed objects, the quarantine holds only what the box sent.
    (quarantine / "objects" / "info" / "alternates").unlink()
    _, out, _ = await run_git(
        quarantine, "cat-file", "--batch-all-objects", "--unordered",
        "--batch-check=%(objecttype) %(objectsize)",
    )  # fmt: skip
    for line in out.splitlines():
        kind, _, size = line.partition(b" ")
        if kind == b"blob" and int(size) > blob_max:
            raise BundleRefused(
                f"the box's work holds a file of more than {blob_max} bytes: "
                "refused, nothing fetched"
            )
    return CheckedBundle(heads, quarantine)


async def _check_histories(
    quarantine: Path, heads: list[tuple[str, str]], folder: Path, seed: str
) -> None:
    """Each branch names a commit the bundle brought and still contains the seed; three
    git calls for any number of branches (two per branch let a box that made thousands
    hold a pull for minutes)."""
    (folder / "heads").write_text("".join(f"{sha}\n" for sha, _ in heads))
    with open(folder / "heads", "rb") as listed:
        _, out, _ = await run_git(
            quarantine, "cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=listed
        )
    kinds = out.decode(errors="replace").splitlines()
    for i, (sha, ref) in enumerate(heads):
        if i >= len(kinds) or kinds[i] != f"{sha} commit":
            raise BundleRefused(f"the box's bundle lacks the commit {ref} names: refused")
    updates = "".join(f"update refs/q/{i} {sha}\n" for i, (sha, _) in enumerate(heads))
    (folder / "updates").write_text(updates)
    with open(folder / "updates", "rb") as listed:
        await run_git(quarantine, "update-ref", "--stdin", stdin=listed)
    _, out, _ = await run_git(
        quarantine, "for-each-ref", "--contains", seed, "--format=%(refname)", "refs/q/"
    )
    containing = set(out.decode(errors="replace").splitlines())
    for i, (_, ref) in enumerate(heads):
        if f"refs/q/{i}" not in containing:
            raise BundleRefused(
                f"{ref} in the box no longer contains the seed commit {seed[:12]} "
                "(its history was rewritten): refused, nothing fetched"
            )


def _pack_offset(bundle: Path) -> int:
    """Where the pack starts: after the header's blank line."""
    with open(bundle, "rb") as fh:
        head = fh.read(HEADER_MAX)
    end = head.find(b"\n\n")
    if end < 0:
        raise BundleRefused("the box's bundle has no end to its header: refused")
    return end + 2


async def _index_pack(quarantine: Path, bundle: Path) -> None:
    """Every object of the pack read, checked (--strict) and stored in the quarantine:
    a fetch would skip a pack whose commits the repository has already, corrupt or not."""
    offset = _pack_offset(bundle)
    with open(bundle, "rb") as fh:
        fh.seek(offset)
        code, _, err = await run_git(
            quarantine, "index-pack", "--strict", "--fix-thin", "--stdin", stdin=fh, check=False
        )
    if code != 0:
        why = _last_line(err) or f"exit status {code}"
        raise BundleRefused(f"the box's bundle holds a broken pack ({why}): refused")


def _move_packs(quarantine: Path, objects: Path) -> None:
    """The quarantine's packs into the repository's object store: each pack's data
    first, its index last (git sees a pack by its index), each under a temporary name
    renamed into place."""
    target = objects / "pack"
    target.mkdir(exist_ok=True)
    for idx in sorted((quarantine / "objects" / "pack").glob("pack-*.idx")):
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
    await asyncio.to_thread(_move_packs, checked.quarantine, await objects_dir(repo))
    updates = "".join(f"update {target_ref(box, ref)} {sha}\n" for sha, ref in checked.heads)
    with tempfile.TemporaryFile() as fh:
        fh.write(updates.encode())
        fh.seek(0)
        await run_git(repo, "update-ref", "--stdin", stdin=fh)


async def drop_wip(repo: Path, box: str) -> str:
    """The box's WIP ref an earlier `pull --wip` left in `repo`, deleted by a pull that
    brought none (it would show old uncommitted changes as the box's): its name, or ""
    when there was none."""
    ref = target_ref(box, WIP_REF)
    code, _, _ = await run_git(repo, "rev-parse", "--verify", "-q", ref, check=False)
    if code != 0:
        return ""
    await run_git(repo, "update-ref", "-d", ref)
    return ref
