"""The engine client's packs and branches: against the simulator for
what needs a boot, against the real binary for the errors it gives without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from hbtui.engine import Engine, EngineError, MachineSpec

SPEC = MachineSpec(
    name="src",
    image="ubuntu:24.04",
    cpus=1,
    memory_mib=512,
    network=False,
    labels=(("hbtui", "1"),),
    workload=("/bin/sh", "-c", "echo booted >> /data/boots; exec sleep 1000"),
)


@pytest.fixture
def sim_engine(sim_smolvm: str, sim_state_dir: Path) -> Engine:
    return Engine(sim_smolvm, state_dir=str(sim_state_dir), timeout=60)


@pytest.mark.sim
async def test_pack_a_stopped_machine_and_make_another_from_it(sim_engine, tmp_path):
    await sim_engine.create(SPEC)
    await sim_engine.start("src")
    assert (await sim_engine.exec("src", ["sh", "-c", "echo kept > /root/f"])).returncode == 0
    await sim_engine.stop("src")
    pack = await sim_engine.pack("src", tmp_path / "base")
    assert pack == tmp_path / "base.smolmachine" and pack.is_file()

    copy = MachineSpec(name="copy", image="", cpus=1, memory_mib=512, network=False,
                       labels=(("hbtui", "1"), ("hbtui.port", "4999")), from_pack=pack)  # fmt: skip
    await sim_engine.create(copy)
    await sim_engine.start("copy")
    seen = await sim_engine.exec("copy", ["sh", "-c", "cat /root/f; hostname"])
    assert seen.stdout.decode().split() == ["kept", "copy"]
    machine = await sim_engine.find("copy")
    assert machine is not None and machine.labels["hbtui.port"] == "4999"
    for name in ("copy", "src"):
        await sim_engine.delete(name)


@pytest.mark.sim
async def test_branch_a_machine_running_branchable(sim_engine):
    await sim_engine.create(SPEC)
    await sim_engine.start("src")
    with pytest.raises(EngineError, match="not running forkable"):
        await sim_engine.branch("src", "kid")
    await sim_engine.stop("src")
    await sim_engine.start("src", branchable=True)
    source = await sim_engine.find("src")
    assert source is not None and source.branchable
    await sim_engine.exec("src", ["sh", "-c", "echo from-source > /root/f"])
    await sim_engine.branch("src", "kid", labels=(("hbtui", "1"), ("hbtui.port", "4998")))
    kid = await sim_engine.find("kid")
    assert kid is not None and kid.running and kid.parent_machine == "src"
    assert kid.labels["hbtui.port"] == "4998"
    seen = await sim_engine.exec("kid", ["cat", "/root/f"])
    assert seen.stdout.decode().strip() == "from-source"
    for name in ("kid", "src"):
        await sim_engine.delete(name)


@pytest.mark.real_engine
async def test_the_real_engines_pack_errors_reach_us_whole(real_smolvm, real_state_dir, tmp_path):
    engine = Engine(real_smolvm, state_dir=str(real_state_dir), timeout=60)
    await engine.create(SPEC)
    with pytest.raises(EngineError, match="never been started") as never:
        await engine.pack("src", tmp_path / "base")
    assert never.value.code == "SMOLVM_ERROR"
    missing = MachineSpec(name="from-nothing", image="", cpus=1, memory_mib=512,
                          from_pack=tmp_path / "nothing.smolmachine")  # fmt: skip
    with pytest.raises(EngineError, match="file not found") as absent:
        await engine.create(missing)
    assert absent.value.code == "CONFIG_ERROR"
    await engine.delete("src")
