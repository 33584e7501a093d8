"""Helpers of the work tests (repositories on the host, clones in simulator boxes)."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import zlib
from pathlib import Path
from typing import BinaryIO

from hbtui.core.foundation import git as gitops
from hbtui.core.work import intake
from hbtui.core.work.intake import CheckedBundle

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


def _object_id(kind: str, body: bytes) -> bytes:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).digest()


def _entry_head(kind: int, size: int) -> bytes:
    """A pack entry's type and size: 3 bits and 4 bits, then 7 bits a byte."""
    out, byte, size = bytearray(), (kind << 4) | (size & 0xF), size >> 4
    while size:
        out.append(byte | 0x80)
        byte, size = size & 0x7F, size >> 7
    return bytes(out + bytes([byte]))


def _varint(n: int) -> bytes:
    """A delta's sizes: 7 bits a byte, least significant first."""
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _back(distance: int) -> bytes:
    """An offset delta's distance back to its base, as git writes it."""
    out = [distance & 0x7F]
    while distance := distance >> 7:
        distance -= 1
        out.insert(0, 0x80 | distance & 0x7F)
    return bytes(out)


class _Pack:
    """A pack written as it goes, its checksum kept as it goes."""

    def __init__(self, out: BinaryIO, count: int) -> None:
        self.out, self.hash, self.at = out, hashlib.sha1(), 0
        self.write(b"PACK" + struct.pack(">II", 2, count))

    def write(self, data: bytes) -> None:
        self.out.write(data)
        self.hash.update(data)
        self.at += len(data)

    def entry(self, kind: int, size: int, chunks: list[bytes], repeat: int = 1) -> int:
        """An entry of `size` bytes (`chunks`, `repeat` times over); where it begins."""
        began = self.at
        self.write(_entry_head(kind, size))
        squeeze = zlib.compressobj(9)
        for _ in range(repeat):
            for chunk in chunks:
                self.write(squeeze.compress(chunk))
        self.write(squeeze.flush())
        return began


def bundle_by_hand(path: Path, seed: str, *, mib: int, copies: int = 0) -> str:
    """A bundle written byte by byte, as a hostile box may: branch hb/b1, one commit on
    the seed whose tree holds a file of `mib` MiB of zeros; with `copies`, also a delta
    on that file that no tree names, each of its `copies` instructions a copy of 16 MiB
    of it: four bytes of delta ask for 16 MiB of object (a delta bomb). The file is
    written a piece at a time, never held. Returns the commit."""
    piece, zeros = bytes(1 << 20), mib << 20
    blob_hash = hashlib.sha1(f"blob {zeros}\0".encode())
    for _ in range(mib):
        blob_hash.update(piece)
    tree = b"100644 zeros\0" + blob_hash.digest()
    commit = (
        f"tree {_object_id('tree', tree).hex()}\nparent {seed}\n"
        "author a <a@a> 0 +0000\ncommitter a <a@a> 0 +0000\n\nwork\n"
    ).encode()
    head = _object_id("commit", commit).hex()
    step = min(zeros, 0xFFFFFF)
    copy = b"\xf0" + step.to_bytes(3, "little")  # copy `step` bytes from the base's start
    delta = _varint(zeros) + _varint(copies * step) + copy * copies
    with open(path, "wb") as out:
        out.write(f"# v2 git bundle\n-{seed}\n{head} refs/heads/hb/b1\n\n".encode())
        pack = _Pack(out, 4 if copies else 3)
        pack.entry(1, len(commit), [commit])
        pack.entry(2, len(tree), [tree])
        base = pack.entry(3, zeros, [piece], mib)
        if copies:
            began = pack.at
            pack.write(_entry_head(6, len(delta)) + _back(began - base) + zlib.compress(delta))
        out.write(pack.hash.digest())
    return head
