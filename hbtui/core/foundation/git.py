"""Git on the host for work in and out of boxes: read a repository (never change it), make
the seed bundle a box is cloned from, and the rules a box's bundle is held to (its ref
names, where they land). Taking a box's bundle in is hbtui.core.work.intake.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from hbtui import boxtext
from hbtui.environment import child_env
from hbtui.errors import HbtuiError, UsageError

GIT_TIMEOUT = 600.0
SEED_REF = "refs/hbtui/seed"  # the one ref of a seed bundle, and where the box keeps it
WIP_REF = "refs/hbtui/wip"  # `pull --wip`: the uncommitted changes, committed for the pull
WIP_BRANCH = "hbtui-wip"  # where WIP_REF lands under the box's refs on the host
CHECK_REF = "refs/hbtui/check"  # in the box: the files as a try's last check left them
BOX_REFS = "refs/remotes/box"
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
# A branch name as a box may offer it: plain characters, no empty, dotted or locked part.
REF_PART_MAX = 255  # a ref's part is a file name in the host repository
_BRANCH = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*")
# What one git command reading what a box sent may allocate (see start_git): a pack may
# declare an object of any size, and git allocates what it declares (16 KiB of delta
# asks for 3 GiB). With hbtui's own memory, a pull stays under 512 MiB.
BOX_GIT_MEMORY = 384 << 20


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


def last_line(stderr: bytes) -> str:
    lines = [boxtext.line(x) for x in stderr.decode(errors="replace").splitlines()]
    lines = [x for x in lines if x]
    return lines[-1][:300] if lines else ""


def _bounded(argv: list[str], env: dict[str, str]) -> list[str]:
    """`argv`, a git command on what a box sent, held to BOX_GIT_MEMORY: git streams big
    files through its index instead of holding them, and keeps its delta base cache (one
    per thread, so few threads) and its pack windows small; GIT_ALLOC_LIMIT makes git
    refuse any one allocation over the bound (git's own check, on any system), and
    RLIMIT_DATA (`ulimit -d`) all of them together (on Linux: the heap and anonymous maps,
    not the packs git maps read-only)."""
    threads = min(os.cpu_count() or 1, 3)  # git's own default up to 5 cores
    config = (
        "core.bigFileThreshold=64m", "core.deltaBaseCacheLimit=32m", f"pack.threads={threads}",
        "core.packedGitWindowSize=32m", "core.packedGitLimit=128m",
    )  # fmt: skip
    env["GIT_ALLOC_LIMIT"] = str(BOX_GIT_MEMORY)
    limit = 'ulimit -d "$0" 2>/dev/null; exec "$@"'  # a lower limit already set stays
    git = [argv[0], *(word for item in config for word in ("-c", item)), *argv[1:]]
    return ["sh", "-c", limit, str(BOX_GIT_MEMORY >> 10), *git]


async def start_git(
    repo: Path | None,
    *args: str,
    stdin: BinaryIO | int,
    env: Mapping[str, str] | None = None,
    bounded: bool = False,
) -> asyncio.subprocess.Process:
    """A git command started (in `repo` when given) in a session of its own, its stdout
    and stderr piped: every git command hbtui runs starts here. `bounded`: it reads what
    a box sent, and is held to BOX_GIT_MEMORY."""
    argv = ["git", *(["-C", str(repo)] if repo is not None else []), *args]
    full_env = _env(env)
    if bounded:
        argv = _bounded(argv, full_env)
    try:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            env=full_env,
        )
    except FileNotFoundError:
        raise GitError("git is not installed on this machine") from None


async def end_git(proc: asyncio.subprocess.Process) -> None:
    """A git command that still runs killed (its whole group), and reaped."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()


async def run_git(
    repo: Path | None,
    *args: str,
    check: bool = True,
    timeout: float = GIT_TIMEOUT,
    stdin: BinaryIO | None = None,
    env: Mapping[str, str] | None = None,
    bounded: bool = False,
) -> tuple[int, bytes, bytes]:
    """One git command (in `repo` when given); a failure is a GitError unless `check` is
    off. `env`: GIT_* variables of hbtui's own for it; `bounded`: see start_git."""
    proc = await start_git(
        repo, *args, stdin=stdin if stdin is not None else asyncio.subprocess.DEVNULL, env=env,
        bounded=bounded,
    )  # fmt: skip
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        raise GitError(f"git {args[0]} took more than {timeout:g} s") from None
    finally:
        await end_git(proc)
    code = proc.returncode or 0
    if check and code != 0:
        raise GitError(f"git {args[0]} failed: {last_line(err) or f'exit status {code}'}")
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


async def box_commits(repo: Path, box: str, *, most: int) -> list[str]:
    """The commits `repo` holds under the box's refs (what earlier pulls brought), each
    once, newest first, at most `most`: what a pull tells the box the host already has."""
    listed = await git_out(
        repo, "for-each-ref", "--sort=-committerdate", "--format=%(objecttype) %(objectname)",
        box_ref_prefix(box),
    )  # fmt: skip
    commits = [line[7:] for line in listed.splitlines() if line.startswith("commit ")]
    return list(dict.fromkeys(commits))[:most]


def target_ref(box: str, ref: str) -> str:
    """Where a checked ref of the box's lands in the host repository."""
    if ref == WIP_REF:
        return box_ref_prefix(box) + WIP_BRANCH
    return box_ref_prefix(box) + ref.removeprefix("refs/heads/")


def plain_branch(branch: str) -> bool:
    """A branch name of plain characters that git takes as it is: no option (`-x`), no
    `..`, no lock file, not HEAD (no branch of git's; refs/remotes/box/BOX/HEAD would be
    box/BOX)."""
    return (
        _BRANCH.fullmatch(branch) is not None
        and ".." not in branch
        and not branch.endswith((".lock", "."))
        and "/." not in branch
        and branch != "HEAD"
    )


def check_ref_name(ref: str, *, wip: bool) -> None:
    """A box may offer its branches (and, for --wip, the WIP ref), nothing else."""
    if wip and ref == WIP_REF:
        return
    branch = ref.removeprefix("refs/heads/")
    if branch == ref or not plain_branch(branch):
        raise BundleRefused(
            f"the box's bundle names ref {boxtext.line(ref)[:120]!r}, outside its branches "
            "(refs/heads/...): refused, nothing fetched"
        )
    # Where --wip lands (or a folder of that name), in any case a file system may fold.
    if branch.lower() == WIP_BRANCH or branch.lower().startswith(f"{WIP_BRANCH}/"):
        raise BundleRefused(
            f"the box has a branch {branch}, a name hbtui keeps for `pull --wip`: refused, "
            "nothing fetched (rename the branch in the box)"
        )
    if any(len(part) > REF_PART_MAX for part in branch.split("/")):
        raise BundleRefused(
            f"the box's bundle names a branch {branch[:60]}… with a part longer than "
            f"{REF_PART_MAX} characters, more than a file name can hold: refused, nothing fetched"
        )


def parse_heads(output: bytes, *, wip: bool) -> list[tuple[str, str]]:
    """`git bundle list-heads` output: (commit, ref) pairs, every ref checked."""
    heads: list[tuple[str, str]] = []
    seen: set[str] = set()
    for raw in output.decode(errors="replace").splitlines():
        sha, _, ref = raw.partition(" ")
        if not _SHA.fullmatch(sha):
            raise BundleRefused("the box's bundle lists a ref without a commit id: refused")
        check_ref_name(ref, wip=wip)
        if ref in seen:
            raise BundleRefused(f"the box's bundle names {ref} twice: refused")
        seen.add(ref)
        heads.append((sha, ref))
    if not heads:
        raise BundleRefused("the box's bundle holds no branch: refused")
    return heads


async def ref_exists(repo: Path, ref: str) -> str:
    """`ref` when `repo` has it, else "" (say, the WIP ref an earlier `pull --wip` left)."""
    code, _, _ = await run_git(repo, "rev-parse", "--verify", "-q", ref, check=False)
    return ref if code == 0 else ""


async def drop_ref(repo: Path, ref: str) -> None:
    await run_git(repo, "update-ref", "-d", ref)
