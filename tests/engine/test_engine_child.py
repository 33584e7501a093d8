"""Children started off the event loop (hbtui.engine.child): the loop keeps running while
one forks, and none is left behind, cancelled at any moment."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from hbtui.engine import child
from hbtui.engine.capture import Bound
from hbtui.engine.runner import Command, LocalRunner

ENV = {"PATH": os.environ["PATH"]}


def running(marker: str) -> list[int]:
    """The pids of processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def test_the_loop_runs_while_a_child_forks(monkeypatch):
    """asyncio's subprocesses fork in the loop's thread; a slow fork (a loaded machine)
    stalled the dashboard for as long. Here a fork that takes half a second lets the
    loop's timers run meanwhile."""
    real = subprocess.Popen

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", slow)
    ticks = 0
    starting = asyncio.ensure_future(child.spawn(["true"], env=ENV))
    while not starting.done():
        await asyncio.sleep(0.02)
        ticks += 1
    proc = starting.result()
    assert await proc.wait() == 0
    await proc.end()
    assert ticks >= 5, ticks


async def test_input_output_and_the_exit_status():
    proc = await child.spawn(["sh", "-c", "cat; echo err >&2; exit 3"], env=ENV, stdin=child.PIPE)
    got = await proc.communicate(b"in\n" * 100_000, Bound())
    assert (got.stdout, got.stderr, proc.returncode) == (b"in\n" * 100_000, b"err\n", 3)
    await proc.end()
    merged = await child.spawn(["sh", "-c", "echo a; echo b >&2"], env=ENV, stderr=child.STDOUT)
    assert merged.stderr is None
    assert (await merged.communicate(None, Bound())).stdout.split() == [b"a", b"b"]
    await merged.end()


async def test_a_spawn_cancelled_while_it_starts_leaves_no_child():
    marker = f"{time.monotonic_ns() % 10**6}.25"
    starting = asyncio.ensure_future(child.spawn(["sleep", marker], env=ENV))
    await asyncio.sleep(0)
    starting.cancel()
    await asyncio.wait([starting])
    assert starting.cancelled()
    assert running(f"sleep\0{marker}") == []


async def test_end_kills_the_whole_group_and_reaps():
    marker = f"{time.monotonic_ns() % 10**6}.5"
    proc = await child.spawn(["sh", "-c", f"sleep {marker} & sleep {marker}"], env=ENV)
    while len(running(f"sleep\0{marker}")) < 2:  # both sleeps started
        await asyncio.sleep(0.02)
    await proc.end()
    assert proc.returncode == -9
    while running(f"sleep\0{marker}"):  # the group's SIGKILL reaches the background one
        await asyncio.sleep(0.02)


async def test_a_commands_secrets_reach_its_environment_and_are_never_shown():
    secret = "hbtui-secret-481"
    command = Command(
        ["sh", "-c", 'printf %s "$HB_TOKEN"'], timeout=30, secrets={"HB_TOKEN": secret}
    )
    assert secret not in repr(command) and secret not in str(command)
    done = await LocalRunner().run(command)
    assert (done.returncode, done.stdout) == (0, secret.encode())
