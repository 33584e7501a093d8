"""The async smolvm client that every other layer uses.

One method per engine verb. Every call passes `--error-format json` (and
`--state-dir` when configured), has a timeout, and turns a failure into a
typed EngineError. Mutating calls on one machine are serialised, within this
process by an asyncio lock and across processes by a lock file, because the
engine's state database has not always tolerated concurrent writers.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

from hbtui.engine.capture import USUAL, Bound, OutputTooLong
from hbtui.engine.early import EarlyListing
from hbtui.engine.errors import (
    EngineError,
    EngineLineTooLong,
    EngineMissing,
    EngineOutputTooLong,
    EngineTimeout,
    MachineNotFound,
    from_stderr,
)
from hbtui.engine.locate import MIN_VERSION, format_version, parse_version
from hbtui.engine.models import ExecResult, Machine, MachineSpec
from hbtui.engine.runner import (
    Command,
    Completed,
    LineTooLong,
    LocalRunner,
    Pipe,
    Runner,
    RunTimeout,
    Stream,
    shown_command,
)
from hbtui.statefile import lock_fd

# The least a start (or branch) and a pack get: a real guest boots in under a second, but
# a start may pull an image, and a pack copies the whole disk. A longer `[engine] timeout`
# applies to them too.
START_TIMEOUT = 180.0
PACK_TIMEOUT = 1800.0
LOGS_MAX = 16 << 20  # of a box's log read at once (its end; --follow streams all of it)


class EngineStream:
    """Live output lines of an engine call; raises its EngineError at the end."""

    def __init__(self, inner: Stream, argv: list[str]) -> None:
        self._inner = inner
        self._argv = argv
        self.returncode: int | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        lines = aiter(self._inner)
        try:
            async for line in lines:
                yield line
        except RunTimeout as exc:
            raise EngineTimeout(str(exc), code="TIMEOUT", argv=self._argv) from None
        except LineTooLong as exc:
            raise EngineLineTooLong(str(exc), code="LINE_TOO_LONG", argv=self._argv) from None
        finally:
            # A reader that stops early ends the child now, not when the loop has closed.
            aclose = getattr(lines, "aclose", None)
            if aclose is not None:
                await aclose()
        self.returncode = self._inner.returncode
        if self.returncode and _engine_failed(self._inner.stderr_tail):
            raise from_stderr(self._inner.stderr_tail, self._argv, self.returncode)


def _engine_failed(stderr: str) -> bool:
    """An engine failure ends with its JSON error; a guest failure does not."""
    for line in reversed(stderr.strip().splitlines()):
        line = line.strip()
        if line:
            return line.startswith('{"error"')
    return False


class Engine:
    def __init__(
        self,
        binary: str,
        *,
        state_dir: str = "",
        runner: Runner | None = None,
        timeout: float = 120.0,
        locks_dir: Path | None = None,
    ) -> None:
        self.binary = binary
        self.state_dir = state_dir
        self.runner: Runner = runner or LocalRunner()
        self.timeout = timeout
        self.locks_dir = locks_dir
        self._locks: dict[str, asyncio.Lock] = {}
        self._version: tuple[int, int, int] | None = None
        self._early: EarlyListing | None = None

    # -- plumbing -------------------------------------------------------------

    def argv(self, *args: str) -> list[str]:
        base = [self.binary, "--error-format", "json"]
        if self.state_dir:
            base += ["--state-dir", self.state_dir]
        return base + list(args)

    async def _run(
        self,
        argv: list[str],
        input: bytes | None,
        timeout: float | None,
        secrets: Mapping[str, str] | None = None,
        bound: Bound = USUAL,
    ) -> Completed:
        """One engine process, with its timeout, its output's bound and a missing binary
        as typed errors."""
        try:
            return await self.runner.run(
                Command(argv, input, timeout or self.timeout, secrets or {}, bound)
            )
        except OutputTooLong as exc:
            raise EngineOutputTooLong(
                f"{shown_command(argv)}: {exc}; hbtui stopped reading and ended it",
                code="OUTPUT_TOO_LONG",
                argv=argv,
            ) from None
        except RunTimeout as exc:
            raise EngineTimeout(
                str(exc),
                code="TIMEOUT",
                argv=argv,
                hint=f"a slow engine or network: raise [engine] timeout (now {self.timeout:g} s)",
            ) from None
        except FileNotFoundError:
            raise EngineMissing(f"engine not found: {self.binary}", code="ENGINE_MISSING") from None

    async def _call(
        self,
        *args: str,
        input: bytes | None = None,
        timeout: float | None = None,
        secrets: Mapping[str, str] | None = None,
    ) -> bytes:
        argv = self.argv(*args)
        done = await self._run(argv, input, timeout, secrets)
        if done.returncode != 0:
            raise from_stderr(done.stderr.decode(errors="replace"), argv, done.returncode)
        return done.stdout

    def _at_least(self, floor: float) -> float:
        """A long call's timeout: its floor, or `[engine] timeout` when that is longer."""
        return max(floor, self.timeout)

    @contextlib.asynccontextmanager
    async def machine_lock(self, name: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            if self.locks_dir is None:
                yield
                return
            self.locks_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.locks_dir / f"engine-{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
            try:
                await lock_fd(fd)
                yield
            finally:
                os.close(fd)

    # -- version ----------------------------------------------------------------

    async def version(self) -> tuple[int, int, int]:
        if self._version is None:
            out = await self._call("--version", timeout=30)
            parsed = parse_version(out.decode(errors="replace"))
            if parsed is None:
                raise EngineMissing(
                    f"{self.binary} does not look like smolvm (--version printed {out[:60]!r})",
                    code="ENGINE_MISSING",
                )
            self._version = parsed
        return self._version

    def remember_version(self, version: tuple[int, int, int]) -> None:
        """What this binary said when asked before (the caller knows it is the same one)."""
        self._version = version

    async def check_version(self) -> tuple[int, int, int]:
        v = await self.version()
        if v < MIN_VERSION:
            raise EngineMissing(
                f"smolvm {format_version(v)} at {self.binary} is too old; hbtui needs "
                f"{format_version(MIN_VERSION)} or newer (pip install -U smolmachines)",
                code="ENGINE_TOO_OLD",
            )
        return v

    # -- machines ---------------------------------------------------------------

    async def create(self, spec: MachineSpec) -> None:
        if spec.from_pack:
            source = ["--from", str(spec.from_pack)]
        else:
            source = ["--image", spec.image] if spec.image else []
        args = [
            "machine",
            "create",
            "--name",
            spec.name,
            *source,
            "--cpus",
            str(spec.cpus),
            "--mem",
            str(spec.memory_mib),
        ]
        if spec.network:
            args.append("--net")
        for host, guest in spec.ports:
            args += ["-p", f"{host}:{guest}"]
        for key, value in spec.labels:
            args += ["--label", f"{key}={value}"]
        for credential in spec.credentials:
            args += ["--credential", credential]
        if spec.block_private:
            args.append("--block-private")
        for pattern in spec.allow_hosts:
            args += ["--allow-host-pattern", pattern]
        if spec.workload:
            args += ["--", *spec.workload]
        async with self.machine_lock(spec.name):
            await self._call(*args)

    async def start(
        self,
        name: str,
        *,
        branchable: bool = False,
        secrets: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Start; `branchable` runs it so that `branch` can branch it. `secrets` are the
        values of its credentials, given to this one engine process in its environment
        (never in argv), where the engine reads them as the machine starts."""
        args = ["machine", "start", "--name", name] + (["--branchable"] if branchable else [])
        async with self.machine_lock(name):
            await self._call(
                *args, timeout=timeout or self._at_least(START_TIMEOUT), secrets=secrets
            )

    async def pack(self, name: str, output: Path, *, timeout: float | None = None) -> Path:
        """Pack a stopped machine (started once) into `output`.smolmachine; returns that
        file. `output` names the engine's stub, which it writes beside the pack."""
        async with self.machine_lock(name):
            await self._call(
                "pack",
                "create",
                "--from-vm",
                name,
                "-o",
                str(output),
                timeout=timeout or self._at_least(PACK_TIMEOUT),
            )
        return output.with_name(output.name + ".smolmachine")

    async def branch(
        self,
        source: str,
        name: str,
        *,
        ports: tuple[tuple[int, int], ...] = (),
        labels: tuple[tuple[str, str], ...] = (),
        branchable: bool = False,
        secrets: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> None:
        """Branch a machine running branchable into `name` (copy-on-write disks and
        memory); the child runs when this returns, itself branchable if asked. Its labels
        can only be set here."""
        args = ["machine", "branch", "--from", source, "--name", name, "--no-wait-ready"]
        if branchable:
            args.append("--branchable")
        for host, guest in ports:
            args += ["-p", f"{host}:{guest}"]
        for key, value in labels:
            args += ["--label", f"{key}={value}"]
        async with self.machine_lock(name):
            await self._call(
                *args, timeout=timeout or self._at_least(START_TIMEOUT), secrets=secrets
            )

    async def stop(self, name: str, *, grace: int | None = None) -> None:
        args = ["machine", "stop", "--name", name]
        if grace is not None:
            args += ["--timeout", str(grace)]
        async with self.machine_lock(name):
            await self._call(*args)

    async def pause(self, name: str, *, timeout: float | None = None) -> None:
        """Pause a running machine: the engine saves its RAM and disks and stops it there,
        so `resume` goes on with every process as it was (MachineNotRunning if it is not
        running). It writes the whole RAM: a start's time at least."""
        async with self.machine_lock(name):
            await self._call(
                "machine", "pause", "--name", name, timeout=timeout or self._at_least(START_TIMEOUT)
            )

    async def resume(self, name: str, *, timeout: float | None = None) -> None:
        """Resume a paused machine from its saved execution (MachineNotPaused if it holds
        none: start it instead)."""
        async with self.machine_lock(name):
            await self._call(
                "machine",
                "resume",
                "--name",
                name,
                timeout=timeout or self._at_least(START_TIMEOUT),
            )

    async def delete(self, name: str) -> None:
        async with self.machine_lock(name):
            await self._call("machine", "delete", "--name", name, "--force")

    async def update(
        self,
        name: str,
        *,
        cpus: int | None = None,
        memory_mib: int | None = None,
        add_ports: tuple[tuple[int, int], ...] = (),
        remove_ports: tuple[tuple[int, int], ...] = (),
    ) -> None:
        args = ["machine", "update", "--name", name]
        if cpus is not None:
            args += ["--cpus", str(cpus)]
        if memory_mib is not None:
            args += ["--mem", str(memory_mib)]
        for host, guest in add_ports:
            args += ["-p", f"{host}:{guest}"]
        for host, guest in remove_ports:
            args += ["--remove-port", f"{host}:{guest}"]
        async with self.machine_lock(name):
            await self._call(*args)

    # From here on `list` in this class's annotations names this method, so the
    # annotations below spell the built-in type as `builtins.list`.
    def start_listing(self) -> EarlyListing:
        """`machine ls` now, in the background, for the first `list()` to take (local only:
        see hbtui.engine.early)."""
        self._early = EarlyListing(self.argv("machine", "ls", "--json"))
        return self._early

    async def list(self) -> list[Machine]:
        early, self._early = self._early, None
        out = await early.output(self.timeout) if early is not None else None
        if out is None:
            out = await self._call("machine", "ls", "--json")
        try:
            data = json.loads(out or b"[]")
        except ValueError as exc:
            raise EngineError(f"engine printed invalid JSON for machine ls: {exc}") from None
        if not isinstance(data, list):
            raise EngineError("engine printed something other than a list for machine ls")
        return [Machine.from_json(d) for d in data if isinstance(d, dict) and "name" in d]

    async def status(self, name: str) -> Machine:
        out = await self._call("machine", "status", "--name", name, "--json")
        try:
            return Machine.from_json(json.loads(out))
        except (ValueError, KeyError, TypeError) as exc:
            raise EngineError(f"engine printed invalid JSON for machine status: {exc}") from None

    async def find(self, name: str) -> Machine | None:
        try:
            return await self.status(name)
        except MachineNotFound:
            return None

    # -- inside a machine -------------------------------------------------------

    def _exec_args(
        self,
        name: str,
        argv: builtins.list[str],
        *,
        user: str | None,
        env: dict[str, str] | None,
        workdir: str | None,
        flags: tuple[str, ...] = (),
    ) -> builtins.list[str]:
        args = ["machine", "exec", "--name", name, *flags]
        if user:
            args += ["--user", user]
        if workdir:
            args += ["--workdir", workdir]
        for key, value in (env or {}).items():
            args += ["-e", f"{key}={value}"]
        return [*args, "--", *argv]

    async def exec(
        self,
        name: str,
        argv: builtins.list[str],
        *,
        input: bytes | None = None,
        user: str | None = None,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        timeout: float | None = None,
        bound: Bound = USUAL,
    ) -> ExecResult:
        """Run a command in the guest; a non-zero guest status is returned, not raised.
        What it prints is the box's: read within `bound` (EngineOutputTooLong past it)."""
        flags = ("-i",) if input is not None else ()
        args = self.argv(
            *self._exec_args(name, argv, user=user, env=env, workdir=workdir, flags=flags)
        )
        done = await self._run(args, input, timeout, bound=bound)
        stderr = done.stderr.decode(errors="replace")
        if done.returncode != 0 and _engine_failed(stderr):
            raise from_stderr(stderr, args, done.returncode)
        return ExecResult(done.returncode, done.stdout, done.stderr, done.dropped)

    def exec_stream(
        self,
        name: str,
        argv: builtins.list[str],
        *,
        user: str | None = None,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        timeout: float | None = None,
    ) -> EngineStream:
        """Output lines as the guest produces them (for live provisioning logs)."""
        args = self.argv(
            *self._exec_args(name, argv, user=user, env=env, workdir=workdir, flags=("--stream",))
        )
        return EngineStream(self.runner.stream(args, timeout=timeout), args)

    def exec_pipe(
        self, name: str, argv: builtins.list[str], *, user: str | None = None
    ) -> AbstractAsyncContextManager[Pipe]:
        """A guest command with its stdin and stdout piped here, as bytes both ways, for
        as long as the block lasts (see Runner.pipe). Its output is the box's: the
        caller passes it on, bounded, and reads nothing in it."""
        args = self.argv(
            *self._exec_args(name, argv, user=user, env=None, workdir=None, flags=("-i",))
        )
        return self.runner.pipe(args)

    def interactive_argv(
        self,
        name: str,
        argv: builtins.list[str],
        *,
        user: str | None = None,
        env: dict[str, str] | None = None,
        tty: bool = True,
    ) -> builtins.list[str]:
        """The argv that hands this terminal to a guest command (enter, exec -it)."""
        flags = ("-i", "-t") if tty else ("-i",)
        return self.runner.interactive_argv(
            self.argv(*self._exec_args(name, argv, user=user, env=env, workdir=None, flags=flags))
        )

    async def cp_in(
        self,
        name: str,
        local: Path,
        guest_path: str,
        *,
        mode: str | None = None,
        timeout: float | None = None,
    ) -> None:
        async with self.runner.engine_path_for_upload(local) as src:
            args = ["machine", "cp", src, f"{name}:{guest_path}"]
            if mode:
                args += ["--mode", mode]
            await self._call(*args, timeout=timeout)

    async def cp_out(
        self, name: str, guest_path: str, local: Path, *, timeout: float | None = None
    ) -> None:
        async with self.runner.engine_path_for_download(local) as dst:
            await self._call("machine", "cp", f"{name}:{guest_path}", dst, timeout=timeout)

    async def logs(self, name: str, *, tail: int | None = None) -> str:
        """The workload's log (the box's own output): its last LOGS_MAX bytes at most, after
        a line saying how much was left out before them."""
        args = ["machine", "logs", "--name", name]
        if tail is not None:
            args += ["--tail", str(tail)]
        argv = self.argv(*args)
        done = await self._run(argv, None, None, bound=Bound(LOGS_MAX, tail=True))
        if done.returncode != 0:
            raise from_stderr(done.stderr.decode(errors="replace"), argv, done.returncode)
        if not done.dropped:
            return done.stdout.decode(errors="replace")
        cut = done.stdout.find(b"\n") + 1  # whole lines only
        text = done.stdout[cut:].decode(errors="replace")
        left_out = done.dropped + cut
        return f"… {left_out:,} bytes before these left out (hbtui logs --follow shows all)\n{text}"

    def logs_stream(self, name: str, *, tail: int | None = None) -> EngineStream:
        args = ["machine", "logs", "--name", name, "--follow"]
        if tail is not None:
            args += ["--tail", str(tail)]
        argv = self.argv(*args)
        return EngineStream(self.runner.stream(argv, timeout=None), argv)

    async def egress_events(self, name: str, *, limit: int = 50) -> builtins.list[dict[str, Any]]:
        """The outbound connections the machine's egress policy refused, newest last."""
        out = await self._call(
            "machine", "egress-events", "--name", name, "--limit", str(limit), "--json"
        )
        try:
            events = json.loads(out or b"[]")
        except ValueError as exc:
            raise EngineError(f"engine printed invalid JSON for egress-events: {exc}") from None
        return [e for e in events if isinstance(e, dict)] if isinstance(events, list) else []

    async def stats(self, name: str) -> dict[str, Any]:
        out = await self._call("machine", "stats", "--name", name, "--json")
        try:
            data = json.loads(out)
        except ValueError as exc:
            raise EngineError(f"engine printed invalid JSON for machine stats: {exc}") from None
        return data if isinstance(data, dict) else {}
