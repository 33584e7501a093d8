"""Contract tests: our engine client against the real smolvm CLI (no boot needed)."""

from __future__ import annotations

import asyncio
import os
import stat
import time
from pathlib import Path

import pytest

from hbtui.engine import (
    Engine,
    EngineMissing,
    EngineTimeout,
    MachineExists,
    MachineNotFound,
    MachineNotPaused,
    MachineNotRunning,
    MachineSpec,
)
from hbtui.engine.locate import MIN_VERSION, locate_engine

pytestmark = pytest.mark.real_engine


@pytest.fixture
def engine(real_smolvm, real_state_dir):
    return Engine(real_smolvm, state_dir=str(real_state_dir), timeout=60)


SPEC = MachineSpec(
    name="c1",
    image="ubuntu:24.04",
    cpus=2,
    memory_mib=1024,
    ports=((4811, 4811),),
    labels=(("hbtui", "1"), ("hbtui.port", "4811")),
    network=True,
    workload=("/bin/sh", "-c", "sleep 1"),
)


async def test_version_is_detected_and_supported(engine):
    version = await engine.check_version()
    assert version >= MIN_VERSION


async def test_create_list_status_update_delete(engine):
    await engine.create(SPEC)
    [m] = await engine.list()
    assert m.name == "c1" and m.state == "created"
    assert m.labels == {"hbtui": "1", "hbtui.port": "4811"} and m.is_hbtui
    assert (m.cpus, m.memory_mib, m.port_count, m.network) == (2, 1024, 1, True)
    assert m.cmd == ["/bin/sh", "-c", "sleep 1"]
    assert isinstance(m.created_at, int) and abs(m.created_at - time.time()) < 120
    assert "restart_policy" in m.raw  # unknown keys are kept, not rejected

    st = await engine.status("c1")
    assert st.name == "c1" and st.labels == m.labels

    await engine.update("c1", cpus=1, memory_mib=512)
    [m] = await engine.list()
    assert (m.cpus, m.memory_mib) == (1, 512)

    await engine.delete("c1")
    assert await engine.list() == []
    assert await engine.find("c1") is None


async def test_errors_are_typed_with_the_engine_code(engine):
    with pytest.raises(MachineNotFound) as nf:
        await engine.status("nope")
    # The engine reports this one as a CONFIG_ERROR "... not found"; we still type it.
    assert "nope" in nf.value.message
    with pytest.raises(MachineNotFound) as nf:
        await engine.delete("nope")
    assert nf.value.code == "NOT_FOUND" and nf.value.message == "vm not found: nope"

    await engine.create(SPEC)
    with pytest.raises(MachineExists) as dup:
        await engine.create(SPEC)
    assert dup.value.code == "CONFIG_ERROR"
    with pytest.raises(MachineNotRunning):
        await engine.exec("c1", ["true"])
    with pytest.raises(MachineNotRunning):
        await engine.cp_out("c1", "/etc/hostname", Path("/tmp/never-written"))
    assert not Path("/tmp/never-written").exists()
    await engine.delete("c1")


async def test_pause_and_resume_refusals_are_typed(engine):
    """What the engine answers without a boot: a machine never started cannot be paused,
    one not paused cannot be resumed (it is started), and neither finds a missing one."""
    await engine.create(SPEC)
    with pytest.raises(MachineNotRunning) as not_running:
        await engine.pause("c1")
    assert not_running.value.code == "CONFLICT"
    assert not_running.value.message == (
        "agent operation failed: checkpoint machine: machine 'c1' must be running"
    )
    with pytest.raises(MachineNotPaused) as not_paused:
        await engine.resume("c1")
    assert not_paused.value.code == "CONFLICT"
    assert not_paused.value.message == (
        "agent operation failed: resume machine: machine is not paused; use start for a fresh boot"
    )
    [m] = await engine.list()
    assert m.state == "created"  # a refused pause or resume changes nothing
    for verb in (engine.pause, engine.resume):
        with pytest.raises(MachineNotFound):
            await verb("ghost")
    await engine.delete("c1")


async def test_concurrent_mutations_on_one_machine_are_serialised(engine):
    await engine.create(SPEC)
    await asyncio.gather(*(engine.update("c1", cpus=c) for c in (1, 2, 3, 4)))
    [m] = await engine.list()
    assert m.cpus in (1, 2, 3, 4)
    await engine.delete("c1")


def _fake_engine(tmp_path: Path, body: str) -> str:
    path = tmp_path / "smolvm"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


async def test_an_old_engine_is_refused_with_the_fix(tmp_path):
    old = Engine(_fake_engine(tmp_path, 'echo "smolvm 1.0.4"\n'))
    with pytest.raises(EngineMissing, match=r"too old.*pip install -U smolmachines"):
        await old.check_version()


async def test_a_timeout_kills_the_whole_process_group(tmp_path):
    pidfile = tmp_path / "child.pid"
    slow = Engine(_fake_engine(tmp_path, f"sleep 300 & echo $! > {pidfile}\nwait\n"), timeout=1)
    with pytest.raises(EngineTimeout):
        await slow.list()
    child = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the engine's child survived the timeout")


def test_locating_the_engine_prefers_the_setting(tmp_path, real_smolvm, monkeypatch):
    fake = _fake_engine(tmp_path, "echo smolvm 9.9.9\n")
    assert locate_engine(fake).path == fake and locate_engine(fake).source == "setting"
    with pytest.raises(EngineMissing, match="not an executable"):
        locate_engine(str(tmp_path / "missing"))
    monkeypatch.setenv("PATH", str(tmp_path))
    (tmp_path / "smolvm").rename(tmp_path / "smolvm")
    assert locate_engine("").source == "PATH"
    monkeypatch.setenv("PATH", "/nonexistent")
    assert locate_engine("").path == real_smolvm
