"""Steps run inside a box, shared by every operation that needs them.

`provision` runs the recipe and turns its step markers into progress;
`quiesce` and `resume` stop and restart executor and the bridge around a
stop or a save; `wait_ready` waits until executor answers on the box's
port. Each takes the Host the box lives on, so local and remote boxes go
through the same code.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from hbtui import boxtext
from hbtui.core.foundation import oplock
from hbtui.core.foundation import recipe as recipes
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.scratch import scratch
from hbtui.environment import env_seconds
from hbtui.errors import HbtuiError
from hbtui.events import LogLine, MachineState, Notice, Phase, Report, Step
from hbtui.paths import Paths, naming

IDLE_ENV = "HBTUI_BOX_IDLE_SECONDS"
IDLE_DEFAULT = 60.0
IDLE_MAX = 600.0

READY_TIMEOUT = 180.0  # seconds for executor to answer after provisioning
PROVISION_TIMEOUT = 3600.0
QUIESCE_TIMEOUT = 150.0  # hb quiesce/resume wait up to 90 s themselves
# A quiesce hbtui holds is a lease: it lapses LEASE_SECONDS after the last renewal, and
# then the box's supervisor (a pass every 5 s) brings the services back by itself, so a
# save whose process died, even by SIGKILL, leaves no box down for more than a minute.
LEASE_SECONDS = 45
RENEW_SECONDS = 15


class ProvisionFailed(HbtuiError):
    pass


async def provision(
    host: Host,
    name: str,
    port: int,
    recipe_dir: Path,
    log_path: Path,
    report: Report,
    *,
    paths: Paths,
    script: str = recipes.PROVISION,
    settings: dict[str, str] | None = None,
) -> None:
    """Copy the recipe in (its tarball made in a scratch folder of `paths`) and run
    `script` of it (the whole recipe, or its per-box step) with the box's `settings` in its
    environment; every output line also goes to `log_path`."""
    report(Phase("copying the recipe into the box"))
    with scratch(paths, "recipe") as folder:
        tar_path = folder / "recipe.tar"
        recipes.pack_recipe(recipe_dir, tar_path)
        await host.engine.cp_in(name, tar_path, recipes.GUEST_TAR)
    report(Phase("provisioning" if script == recipes.PROVISION else f"running {script}"))
    last_step: Step | None = None
    stream = host.engine.exec_stream(
        name,
        recipes.provision_command(script),
        env={"HB_BOX": name, "HB_PORT": str(port), **(settings or {})},
        timeout=PROVISION_TIMEOUT,
    )
    with open(log_path, "a", encoding="utf-8") as log:
        async for raw in stream:
            step = recipes.parse_marker(raw)
            line = boxtext.colours(raw)  # the box's words: only their colours reach the host
            with naming(log_path):
                log.write(line + "\n")
                log.flush()
            if step is not None:
                last_step = step
                report(step)
            else:
                report(LogLine(line))
    if stream.returncode:
        where = (
            f" at step {last_step.index}/{last_step.total} {last_step.name}" if last_step else ""
        )
        doing = "provisioning" if script == recipes.PROVISION else script
        raise ProvisionFailed(
            f"{doing} {name} failed{where} (exit status {stream.returncode})",
            hint=f"provisioning log: {log_path}",
        )


async def wait_ready(
    host: Host, name: str, port: int, report: Report, timeout: float = READY_TIMEOUT
) -> None:
    """Wait until executor answers on the box's port; fail early if the box stops."""
    report(Phase(f"waiting for executor on port {port}"))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        if await host.http_ok(port):
            return
        machine = await host.engine.find(name)
        if machine is None or machine.state not in (MachineState.RUNNING, MachineState.STARTING):
            state = machine.state if machine else "gone"
            raise ProvisionFailed(f"box {name} stopped while waiting for executor (state: {state})")
        await asyncio.sleep(0.5)
    raise ProvisionFailed(
        f"executor in {name} did not answer on port {port} within {timeout:g}s",
        hint=f"look at the box's logs: hbtui logs {name}",
    )


def note_quiesced(seconds: float) -> None:
    """Record, in the box's operation lock, how long its services stay down (0: not
    down), so a reader can tell an interrupted box from a running one."""
    held = oplock.current()
    if held is not None:
        held.quiesced_until(time.time() + seconds if seconds else 0.0)


async def quiesce(host: Host, name: str, report: Report) -> None:
    """Stop executor and the bridge cleanly, under a lease (see LEASE_SECONDS) that
    nothing renews: enough for a stop, which follows at once."""
    report(Phase(f"quiescing services in {name}"))
    result = await host.engine.exec(
        name,
        [f"{recipes.GUEST_BIN}/hb", "quiesce", "--lease", str(LEASE_SECONDS)],
        timeout=QUIESCE_TIMEOUT,
    )
    if result.returncode != 0:
        err = result.stderr.decode(errors="replace").strip().splitlines()
        why = boxtext.line(err[-1], 200) if err else "hb quiesce failed"
        raise HbtuiError(f"could not quiesce {name}: {why}")
    note_quiesced(LEASE_SECONDS)


class Lease:
    """A quiesce this process keeps renewing while it works on the box."""

    def __init__(self, host: Host, name: str) -> None:
        self.host = host
        self.name = name
        self.lapsed = ""  # why a renewal failed, if one did

    async def keep(self) -> None:
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            result = await self.host.engine.exec(
                self.name,
                [f"{recipes.GUEST_BIN}/hb", "renew", str(LEASE_SECONDS)],
                timeout=QUIESCE_TIMEOUT,
            )
            if result.returncode != 0:
                self.lapsed = _tail(result.stderr)
                return
            note_quiesced(LEASE_SECONDS)

    def check(self) -> None:
        """Raise if the services may have come back while the box was meant to be still."""
        if self.lapsed:
            raise HbtuiError(
                f"the quiesce of {self.name} lapsed while hbtui worked on it ({self.lapsed})"
            )


@contextlib.asynccontextmanager
async def quiesced(host: Host, name: str, report: Report) -> AsyncIterator[Lease]:
    """Services stopped while the block runs; the lease is renewed until it ends.
    The caller resumes (or stops) the box afterwards."""
    await quiesce(host, name, report)
    lease = Lease(host, name)
    keeper = asyncio.create_task(lease.keep())
    try:
        yield lease
    finally:
        keeper.cancel()
        # Not `await keeper` under suppress(CancelledError): that would also swallow a
        # cancellation of this task arriving meanwhile.
        await asyncio.wait([keeper])
        if not keeper.cancelled():
            keeper.exception()  # a failed renewal no longer matters: the block is over


def _tail(stderr: bytes) -> str:
    """The end of what a command in the box said, as one plain line."""
    return boxtext.line(stderr[-2000:].decode(errors="replace"))[-200:]


async def resume(host: Host, name: str, report: Report) -> None:
    """Start the services again; a failure is a notice, the workload retries anyway."""
    report(Phase(f"resuming services in {name}"))
    result = await host.engine.exec(
        name, [f"{recipes.GUEST_BIN}/hb", "resume"], timeout=QUIESCE_TIMEOUT
    )
    if result.returncode != 0:
        report(Notice(f"hb resume failed in {name}: {_tail(result.stderr)}"))
    else:
        note_quiesced(0)


# Where a key typed into a box usually ends up: shell start-up files and env files, and
# the tools' own login files. Searched by name and shape only: no value leaves the host.
_KEY_FILES = (
    "/etc/environment /etc/profile /etc/profile.d/*.sh /etc/bash.bashrc "
    "/data/home/agent/.bashrc /data/home/agent/.profile /data/home/agent/.bash_profile "
    "/data/home/agent/.zshrc /data/home/agent/.env /data/home/agent/workspace/.env "
    "/data/home/agent/work/*/.env "  # a clone's, copied in by `new --repo --copy .env`
    "/data/home/agent/.config/hermes-box/*.env /data/home/agent/.hermes/.env "
    "/root/.bashrc /root/.profile"
)
_LOGIN_FILES = (
    "/data/home/agent/.claude/.credentials.json /data/home/agent/.codex/auth.json "
    "/data/home/agent/.config/gh/hosts.yml /data/home/agent/.git-credentials"
)
_SCAN = r"""
for f in FILES; do
    [ -f "$f" ] || continue
    for v in "$@"; do
        if grep -Eq "^[[:space:]]*(export[[:space:]]+)?$v=['\"]?[^'\"[:space:]]" "$f" &&
            ! grep -Eq "^[[:space:]]*(export[[:space:]]+)?$v=['\"]?SMOL_PLACEHOLDER_" "$f"; then
            printf 'key %s %s\n' "$v" "$f"
        fi
    done
done
for f in LOGINS; do
    [ -s "$f" ] && printf 'login - %s\n' "$f"
done
exit 0
"""


async def plaintext_keys(host: Host, name: str, env_vars: list[str]) -> list[str]:
    """Where the box still holds a key in plaintext: a managed variable set to a real
    value in a start-up or env file, or a tool's own login file. One line each."""
    script = _SCAN.replace("FILES", _KEY_FILES).replace("LOGINS", _LOGIN_FILES)
    result = await host.engine.exec(name, ["sh", "-c", script, "scan", *env_vars], timeout=60)
    found = []
    for line in result.stdout.decode(errors="replace").split("\n"):  # a name may hold \r
        kind, _, rest = line.partition(" ")
        var, _, path = rest.partition(" ")
        var, path = boxtext.line(var, 100), boxtext.line(path, 300)  # the box names its files
        if kind == "key":
            found.append(f"{path} sets {var} to a real value, not the placeholder")
        elif kind == "login":
            found.append(f"{path} holds a login of its own")
    return found


def idle_bound() -> float:
    """The seconds a box may go silent in a step that reads what it sends (`diff`, `pull`,
    `save`; `HBTUI_BOX_IDLE_SECONDS`, default 60, at most 600)."""
    return env_seconds(IDLE_ENV, IDLE_DEFAULT, IDLE_MAX)


async def progressing(
    lines: AsyncIterator[str], idle: float, moved: Callable[[str], bool],
    silent: Callable[[], HbtuiError],
) -> AsyncIterator[str]:  # fmt: skip
    """`lines`, given up with `silent()` once the box sends nothing `moved` counts as
    progress for `idle` seconds while hbtui waits on it: a box that goes silent, or
    drips, holds a step no longer than that. The bound starts again once the reader is
    done with a line that moved (what it does with it is hbtui's time, not the box's);
    given up, the box's side ends now."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + idle
    try:
        while True:
            waiting = asyncio.timeout_at(deadline)
            try:
                async with waiting:
                    line = await anext(lines)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if not waiting.expired():
                    raise
                raise silent() from None
            progress = moved(line)
            yield line
            if progress:
                deadline = loop.time() + idle
    finally:
        close = getattr(lines, "aclose", None)
        if close is not None:
            await close()
