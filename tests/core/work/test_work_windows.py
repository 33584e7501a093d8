"""The windows of a box made to hold work (`new --repo`, a try): a cancel as the work
begins or once the box is whole, a `try ls` while its try is interrupted, what a killed
`new` leaves (its hint, repair), a box being made, a rollback that cannot remove."""

from __future__ import annotations

import asyncio

import pytest

from hbtui.errors import Cancelled, HbtuiError

from support import SIM_RECIPE
from support.work import host_repo

pytestmark = pytest.mark.sim

STOPPED = (asyncio.CancelledError, Cancelled)  # a cancel, as the task or as hbtui tells it


@pytest.fixture
def service(sim_env, monkeypatch):
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))
    from hbtui.wiring import build_service

    return build_service()


async def test_ctrl_c_as_the_work_begins_removes_the_box(service, tmp_path, monkeypatch):
    """A cancel landing on the work's first step (the registry update written ahead) was
    not rolled back: the box stayed, provisioning, owned by this live process."""
    from hbtui.core.foundation.registry import WORK_MISSING, Registry
    from hbtui.core.foundation.specs import NewSpec, WorkRequest

    seed = await service.work.repo_seed(str(host_repo(tmp_path)))
    orig = Registry.update

    async def update(self, name, host="local", **changes):
        if changes.get("error") == WORK_MISSING:
            asyncio.current_task().cancel()  # Ctrl-C arrives now
        return await orig(self, name, host, **changes)

    monkeypatch.setattr(Registry, "update", update)
    task = asyncio.create_task(service.new(NewSpec("w", work=WorkRequest(seed))))
    with pytest.raises(STOPPED):
        await task
    monkeypatch.setattr(Registry, "update", orig)
    assert service._ops.core.registry.read().get("w") is None
    assert await (await service._ops.core.hosts.get("local")).engine.find("w") is None


async def test_a_try_interrupted_once_its_box_is_ready_removes_it_with_the_record(
    service, tmp_path, monkeypatch
):
    """Cancelled on `Service.new`'s last step (its view, once the box is ready), a try's
    box was not counted as made: neither removed nor recorded (the record dropped)."""
    from hbtui.core.boxes.make import BoxMaking
    from hbtui.core.foundation.specs import WorkRequest

    seed = await service.work.repo_seed(str(host_repo(tmp_path)))
    orig = BoxMaking.ready
    holder: dict[str, asyncio.Task] = {}

    async def ready(self, name, host_name, report=None):
        await orig(self, name, host_name, **({"report": report} if report else {}))
        holder["try"].cancel()  # Ctrl-C once the box is ready

    monkeypatch.setattr(BoxMaking, "ready", ready)
    # A stand-in agent is not needed: the try's box has none if work_agent.start is patched.
    import hbtui.core.work.agent as work_agent

    async def no_agent(*a, **k):
        return None

    monkeypatch.setattr(work_agent, "start", no_agent)
    holder["try"] = asyncio.create_task(
        service.tries.new(1, "t", WorkRequest(seed, task="x", agent="claude"))
    )
    with pytest.raises(STOPPED):
        await holder["try"]
    assert service._ops.core.registry.read().get("t-1") is None  # made, then removed
    assert service.tries._book.get("local", "t") is None


async def test_try_ls_during_an_interrupted_try_brings_its_record_back(
    service, tmp_path, monkeypatch
):
    """`try ls` read the record, worked, then wrote it back whole: a try interrupted
    meanwhile (boxes removed, record dropped) was listed again, its name taken for good."""
    import hbtui.core.tries.door as tries
    from hbtui.core.foundation.specs import WorkRequest

    seed = await service.work.repo_seed(str(host_repo(tmp_path)))
    in_work, in_ls, release = asyncio.Event(), asyncio.Event(), asyncio.Event()

    import hbtui.core.work.agent as work_agent

    async def start_agent(*a, **k):  # the clone and its work record are in by now
        in_work.set()
        await asyncio.Event().wait()  # until cancelled

    orig_diff = tries.diff

    async def diff(*a, **k):
        in_ls.set()
        await release.wait()
        return await orig_diff(*a, **k)

    monkeypatch.setattr(work_agent, "start", start_agent)
    monkeypatch.setattr(tries, "diff", diff)
    request = WorkRequest(seed, task="x", agent="claude")
    making = asyncio.create_task(service.tries.new(1, "t", request))
    await in_work.wait()
    ls = asyncio.create_task(service.tries.rows("t"))
    await in_ls.wait()
    making.cancel()
    with pytest.raises(STOPPED):
        await making
    assert service.tries._book.get("local", "t") is None  # dropped with its box
    assert service._ops.core.registry.read().get("t-1") is None
    release.set()
    await ls
    assert service.tries._book.get("local", "t") is None, "try ls wrote the dropped record back"


async def test_a_box_whose_repository_never_went_in_is_removed_not_repaired(service):
    """What a `new --repo` SIGKILLed before its clone leaves (provisioning, dead owner):
    `start` suggested `hbtui repair`, which made it ready without its clone."""
    import subprocess

    from hbtui.core.foundation.registry import FAILED, PROVISIONING, WORK_MISSING
    from hbtui.core.foundation.specs import NewSpec

    await service.new(NewSpec("w"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    await service._ops.core.registry.update(
        "w", status=PROVISIONING, owner_pid=dead.pid, error=WORK_MISSING
    )
    view = await service.boxes.get("w")
    assert (view.provisioning, view.error) == (FAILED, WORK_MISSING)
    for step in (service.boxes.start("w"), service.boxes.repair("w")):
        with pytest.raises(HbtuiError, match=r"never went in; remove it \(hbtui rm w\)"):
            await step
    assert (await service.boxes.get("w")).provisioning == FAILED


async def test_a_box_whose_clone_is_going_in_shows_no_error(service, tmp_path, monkeypatch):
    """While `new --repo` was still putting the repository in (its owner alive), the row
    showed the text a kill would leave: the dashboard's cell read `provisioning: <error>`."""
    import hbtui.core.work.agent as work_agent
    from hbtui.core.foundation.specs import NewSpec, WorkRequest

    seed = await service.work.repo_seed(str(host_repo(tmp_path)))
    in_work = asyncio.Event()

    async def start_agent(*a, **k):
        in_work.set()
        await asyncio.Event().wait()

    monkeypatch.setattr(work_agent, "start", start_agent)
    making = asyncio.create_task(
        service.new(NewSpec("w", work=WorkRequest(seed, task="x", agent="claude")))
    )
    await in_work.wait()
    view = await service.boxes.get("w")
    making.cancel()
    with pytest.raises(STOPPED):
        await making
    assert (view.provisioning, view.error) == ("provisioning", ""), view.error


async def test_work_whose_rollback_cannot_remove_the_box_leaves_it_failed(
    service, tmp_path, monkeypatch
):
    """The seed fails and so does the removal: the row stayed `provisioning`, owned by this
    live process (a dashboard showed it being made until it quit)."""
    import hbtui.core.work.operations as work
    from hbtui.core.boxes.operations import BoxOperations
    from hbtui.core.foundation.specs import NewSpec, WorkRequest
    from hbtui.engine.errors import EngineError

    seed = await service.work.repo_seed(str(host_repo(tmp_path)))

    async def seed_box(*a, **k):
        raise work.WorkError("cloning failed")

    async def remove(self, name, host_name="local", **k):
        raise EngineError("delete failed")

    monkeypatch.setattr(work, "seed_box", seed_box)
    monkeypatch.setattr(BoxOperations, "remove", remove)
    with pytest.raises(work.WorkError, match="cloning failed"):
        await service.new(NewSpec("w", work=WorkRequest(seed)))
    monkeypatch.undo()
    view = await service.boxes.get("w")
    assert view.provisioning == "failed", (view.provisioning, view.error)
