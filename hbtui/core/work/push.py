"""The user's own tools on the host, as the user would run them: `git push` with their
credentials (helpers, SSH agent, askpass) and `gh`. Each gets the user's environment
minus hbtui's secrets (hbtui.environment.child_env) and minus the GIT_* variables that
would aim git at another repository; what they print back is the remote's text, read as
plain, bounded lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hbtui import boxtext
from hbtui.environment import child_env
from hbtui.errors import HbtuiError

PUSH_TIMEOUT = 600.0
GH_TIMEOUT = 120.0
OUTPUT_MAX = 256 * 1024
# Where git would look instead of the repository hbtui names with -C.
_ELSEWHERE = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_COMMON_DIR", "GIT_NAMESPACE", "GIT_PREFIX",
)  # fmt: skip
_URL = re.compile(r"https?://\S+")
_DONE = {" ": "fast-forward", "*": "new branch", "=": "up to date"}


class PushRefused(HbtuiError):
    """The remote (or git on the host) did not take the push; nothing changed there."""


@dataclass(frozen=True)
class Ran:
    code: int
    out: str
    err: str

    def last(self) -> str:
        """The last line worth showing of what it said (stderr first)."""
        for text in (self.err, self.out):
            lines = [boxtext.line(x) for x in text.splitlines()]
            lines = [x for x in lines if x and not x.startswith("hint:")]
            if lines:
                return lines[-1][:300]
        return f"exit status {self.code}"


def user_env(*, prompt: bool) -> dict[str, str]:
    """The user's environment for their own git and gh; no prompt unless `prompt` (a
    terminal that is the user's to answer on)."""
    env = {k: v for k, v in child_env().items() if k not in _ELSEWHERE}
    if not prompt:
        env["GIT_TERMINAL_PROMPT"] = "0"
        env["GH_PROMPT_DISABLED"] = "1"
    return env


async def run(
    argv: Sequence[str], *, cwd: Path, env: dict[str, str], timeout: float, prompt: bool = False
) -> Ran:
    """One of the user's tools, to its end (killed at `timeout` or when cancelled). With
    `prompt` it keeps the terminal (its stdin, its session: git may ask for a login);
    else it runs in a session of its own with nothing on its input."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env,
            stdin=None if prompt else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=not prompt,
        )  # fmt: skip
    except OSError as exc:
        raise HbtuiError(f"{argv[0]} could not start: {exc.strerror or exc}") from None
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        raise HbtuiError(f"{Path(argv[0]).name} {argv[1]} took more than {timeout:g} s") from None
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if prompt:
                    proc.kill()
                else:
                    os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    return Ran(
        proc.returncode or 0,
        out[-OUTPUT_MAX:].decode(errors="replace"),
        err[-OUTPUT_MAX:].decode(errors="replace"),
    )


async def remote_exists(repo: Path, remote: str) -> bool:
    done = await run(
        ["git", "-C", str(repo), "remote", "get-url", "--push", remote],
        cwd=repo, env=user_env(prompt=False), timeout=30,
    )  # fmt: skip
    return done.code == 0


async def push(repo: Path, remote: str, commit: str, branch: str, *, prompt: bool) -> str:
    """`commit` pushed to `remote` as refs/heads/`branch`, never forced (no `+`, no
    --force: a remote branch with other commits refuses it); git's word for what it did
    ("new branch", "fast-forward", "up to date")."""
    done = await run(
        ["git", "-C", str(repo), "push", "--porcelain", remote, f"{commit}:refs/heads/{branch}"],
        cwd=repo, env=user_env(prompt=prompt), timeout=PUSH_TIMEOUT, prompt=prompt,
    )  # fmt: skip
    flag, summary = "", ""
    for line in done.out.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and len(parts[0]) == 1 and parts[1].endswith(f":refs/heads/{branch}"):
            flag, summary = parts[0], boxtext.line(parts[2])[:200]
    if flag == "!":
        raise PushRefused(
            f"{remote} refused {commit[:12]} as {branch}: {summary}; nothing forced "
            "(--branch NAME pushes it under another name)"
        )
    if done.code != 0:
        raise PushRefused(f"pushing {commit[:12]} to {remote} as {branch} failed: {done.last()}")
    return _DONE.get(flag, "pushed")


def gh_path(env: dict[str, str]) -> str | None:
    return shutil.which("gh", path=env.get("PATH", os.defpath))


async def gh_ready(repo: Path) -> tuple[str | None, str]:
    """`gh` when it is installed and logged in (`gh auth status` succeeds); else None and
    why not."""
    env = user_env(prompt=False)
    gh = gh_path(env)
    if gh is None:
        return None, "gh is not installed"
    done = await run([gh, "auth", "status"], cwd=repo, env=env, timeout=GH_TIMEOUT)
    if done.code != 0:
        return None, "gh is not logged in (gh auth login)"
    return gh, ""


async def gh_create(gh: str, repo: Path, args: Sequence[str]) -> str:
    """`gh pr create ARGS` in `repo`; the pull request's URL (gh's last one printed)."""
    done = await run(
        [gh, "pr", "create", *args], cwd=repo, env=user_env(prompt=False), timeout=GH_TIMEOUT
    )
    if done.code != 0:
        raise HbtuiError(f"gh pr create failed: {done.last()}")
    urls = _URL.findall(done.out)
    return boxtext.line(urls[-1])[:500] if urls else ""
