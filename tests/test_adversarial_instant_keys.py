"""Adversarial checks of bases, branches and keys (issues 12 and 13) against the simulator:
interruptions at each phase, damaged state and bad input must leave no half-made box,
lose no box and print one line, never a traceback."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest
from conftest import SIM_RECIPE
from test_bases_sim import in_box, machines

from hbtui.core import passphrase
from hbtui.errors import HbtuiError
from hbtui.events import Phase

pytestmark = pytest.mark.sim


@pytest.fixture
def keys_service(sim_env, monkeypatch, tmp_path):
    """The Service over the simulator with a secrets passphrase and a copy of the recipe."""
    recipe = tmp_path / "recipe"
    shutil.copytree(SIM_RECIPE, recipe, symlinks=False)
    monkeypatch.setenv("HBTUI_RECIPE", str(recipe))
    monkeypatch.setenv("HBTUI_SECRETS_PASSPHRASE", "adversarial")
    passphrase._forget()
    from hbtui.wiring import build_service

    yield build_service()
    passphrase._forget()


async def _cancel_at(coro, phase: str, delay: float, events: list[object]) -> None:
    """Run `coro`, cancel it `delay` seconds after it reports a phase starting with `phase`."""
    task = asyncio.ensure_future(coro)
    while not any(isinstance(e, Phase) and e.message.startswith(phase) for e in events):
        if task.done():
            break
        await asyncio.sleep(0.005)
    await asyncio.sleep(delay)
    task.cancel()
    with pytest.raises((asyncio.CancelledError, HbtuiError)):
        await task


@pytest.mark.parametrize(
    ("phase", "delay"),
    [
        ("stopping c1", 0.0),
        ("packing c1", 0.05),
        ("making c1 again", 0.0),
        ("making c1 again", 0.04),
        ("making c1 again", 0.12),
        ("making c1 again", 0.3),
    ],
)
async def test_a_cancelled_credentials_change_never_loses_the_box(
    keys_service, sim_env, phase, delay
):
    service = keys_service
    service.set_secret("github", "ghp_adversarialTOKEN")
    await service.new("c1")
    in_box("c1", "sh", "-c", "echo kept > /data/home/agent/workspace/note", env=sim_env)
    events: list[object] = []
    await _cancel_at(
        service.change_credentials("c1", add=["github"], report=events.append),
        phase,
        delay,
        events,
    )
    view = await service.get("c1")
    assert machines(sim_env) == ["c1"], events
    # The registry says what the machine was made with, and it runs again as it did.
    bound = json.loads(
        (
            Path(sim_env["HBTUI_SMOLVM_STATE_DIR"]) / "smolsim" / "machines" / "c1" / "machine.json"
        ).read_text()
    )
    has_github = "github" in json.dumps(bound.get("credential_policy", {}))
    assert view.credentials == (("github",) if has_github else ())
    assert view.state == "running"
    assert in_box("c1", "cat", "/data/home/agent/workspace/note", env=sim_env) == "kept"


async def test_base_rm_never_deletes_a_folder_a_damaged_manifest_names(keys_service, tmp_path):
    service = keys_service
    base = await service.build_base()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "work").write_text("mine")
    manifest = Path(service.bases()[0].pack).parents[1] / f"{base.id}.json"
    raw = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**raw, "pack": str(precious / "base.smolmachine")}))
    with pytest.raises(HbtuiError, match="outside") as caught:
        await service.remove_base(base.id)
    assert (precious / "work").read_text() == "mine"
    assert str(manifest) in (caught.value.hint or "")
    # A rebuild replaces that manifest without deleting the folder it named either.
    await service.build_base()
    assert (precious / "work").read_text() == "mine"
    assert Path(service.bases()[0].pack).is_file()
