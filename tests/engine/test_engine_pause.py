"""The engine client's pause and resume, against the simulator: a paused machine lists as
paused, what a paused machine refuses is one typed error, and resume goes on where it was."""

from __future__ import annotations

import pytest

from hbtui.engine import (
    Engine,
    MachineNotPaused,
    MachineNotRunning,
    MachinePaused,
    MachineSpec,
)
from hbtui.events import MachineState

pytestmark = pytest.mark.sim


@pytest.fixture
def engine(sim_smolvm, sim_state_dir):
    return Engine(sim_smolvm, state_dir=str(sim_state_dir), timeout=60)


SPEC = MachineSpec(
    name="pz",
    image="",
    cpus=1,
    memory_mib=512,
    network=False,
    workload=("/bin/sh", "-c", "echo $$ > /data/workload.pid; exec sleep 1000"),
)


async def test_pause_and_resume_through_the_client(engine, tmp_path):
    await engine.create(SPEC)
    with pytest.raises(MachineNotRunning):
        await engine.pause("pz")
    await engine.start("pz")
    before = (await engine.exec("pz", ["cat", "/data/workload.pid"])).text

    await engine.pause("pz")
    [m] = await engine.list()
    assert (m.state, m.pid, m.running) == (MachineState.PAUSED, None, False)
    for refused in (
        engine.exec("pz", ["true"]),
        engine.cp_out("pz", "/etc/hostname", tmp_path / "never"),
        engine.start("pz"),
        engine.stop("pz"),
    ):
        with pytest.raises(MachinePaused, match="use resume") as caught:
            await refused
        assert caught.value.code == "CONFLICT"
    with pytest.raises(MachineNotRunning):
        await engine.pause("pz")

    await engine.resume("pz")
    assert (await engine.status("pz")).state == MachineState.RUNNING
    # The same workload process goes on: not a fresh start.
    alive = await engine.exec("pz", ["/bin/sh", "-c", f"kill -0 {before.strip()} && echo up"])
    assert alive.text == "up\n"
    with pytest.raises(MachineNotPaused):
        await engine.resume("pz")
    await engine.delete("pz")
