"""Boxes end to end against the simulator, with the test recipe."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hbtui.core.boxes import guest
from hbtui.core.boxes.guest import ProvisionFailed
from hbtui.core.foundation.registry import Registry
from hbtui.core.foundation.specs import NewSpec
from hbtui.errors import Cancelled, HbtuiError
from hbtui.events import LogLine, Step
from hbtui.paths import resolve_paths

from support import HBTUI_BIN, SIM_RECIPE, recipe_with
from support.cli import answers, hbtui, ls_json

pytestmark = pytest.mark.sim


def wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.25)
    return False


def test_new_exec_stop_start_rm_through_the_cli(sim_env):
    done = hbtui("new", "b1", "--recipe", str(SIM_RECIPE), env=sim_env)
    assert done.returncode == 0, done.stdout + done.stderr
    [box] = ls_json(sim_env)
    assert (box["name"], box["state"], box["provisioning"], box["host"]) == (
        "b1",
        "running",
        "ready",
        "local",
    )
    port = box["port"]
    assert 4790 <= port <= 4999 and box["url"] == f"http://127.0.0.1:{port}/"
    assert answers(port)

    who = hbtui("exec", "b1", "--", "id", "-un", env=sim_env)
    assert (who.returncode, who.stdout.strip()) == (0, "agent")
    status = hbtui(
        "exec",
        "b1",
        "--",
        "sh",
        "-c",
        "cat > /data/home/agent/marker; exit 7",
        env=sim_env,
        input="kept across restarts\n",
    )
    assert status.returncode == 7  # the guest's exit status passes through, stdin too

    assert hbtui("stop", "b1", env=sim_env).returncode == 0
    assert ls_json(sim_env)[0]["state"] == "stopped"
    assert not answers(port)
    assert hbtui("start", "b1", env=sim_env).returncode == 0
    assert ls_json(sim_env)[0]["state"] == "running"
    assert wait_for(lambda: answers(port))
    kept = hbtui("exec", "b1", "--", "cat", "/data/home/agent/marker", env=sim_env)
    assert kept.stdout == "kept across restarts\n"

    url = hbtui("open", "b1", "--print", env=sim_env)
    assert url.stdout.strip() == f"http://127.0.0.1:{port}/"

    refused = hbtui("rm", "b1", env=sim_env, input="b2\n")
    assert refused.returncode != 0 and ls_json(sim_env)
    assert hbtui("rm", "b1", "--force", env=sim_env).returncode == 0
    assert ls_json(sim_env) == []
    assert not answers(port)


async def test_executor_is_reachable_only_through_the_bridge(sim_service, sim_host):
    view = await sim_service.new(NewSpec("b1", recipe=SIM_RECIPE))
    host = sim_host
    assert await host.http_ok(view.port)
    inside = await host.engine.exec(
        "b1",
        [
            "sh",
            "-c",
            "pkill -x socat; sleep 0.3; "
            "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:4788/",
        ],
    )
    assert inside.stdout == b"200", "executor itself must stay up inside the box"
    assert not await host.http_ok(view.port), "executor answered with the bridge down"
    # The workload loop brings the bridge back by itself.
    for _ in range(60):
        if await host.http_ok(view.port):
            break
        await asyncio.sleep(0.5)
    else:
        pytest.fail("the workload did not restore the socat bridge")
    await sim_service.remove("b1")


async def test_provisioning_streams_steps_and_keeps_a_log(sim_service):
    events = []
    await sim_service.new(NewSpec("b1", recipe=SIM_RECIPE), report=events.append)
    steps = [e for e in events if isinstance(e, Step)]
    assert steps and steps[0].index == 1 and steps[-1].index == steps[-1].total
    assert [s.index for s in steps] == list(range(1, steps[-1].total + 1))
    # A marker is a Step, never also a log line a front end would have to filter.
    assert not any(isinstance(e, LogLine) and "::hbtui::" in e.text for e in events)
    log = await sim_service.boxes.provision_log("b1")
    assert log is not None and "::hbtui:: step 1/" in log.path.read_text()
    assert [e for e in log.events if isinstance(e, Step)] == steps
    await sim_service.remove("b1")


def _broken_recipe(tmp_path: Path) -> Path:
    """The sim recipe with a failure injected in the middle (the executor step)."""
    return recipe_with(tmp_path, 'echo "injected failure" >&2; exit 42', "broken")


async def test_a_failure_mid_provisioning_leaves_nothing(
    sim_service, sim_host, tmp_path, sim_state_dir
):
    with pytest.raises(ProvisionFailed, match="exit status 42") as failed:
        await sim_service.new(NewSpec("b1", recipe=_broken_recipe(tmp_path)))
    assert "provisioning log:" in (failed.value.hint or "")
    host = sim_host
    assert await host.engine.list() == []
    assert Registry(resolve_paths().registry_file).read().get("b1") is None
    assert all(s.state != "used" for s in await sim_service.boxes.ports())
    assert not list(Path("/tmp").glob("hbtui-recipe-*"))
    log = (await sim_service.boxes.provision_log("b1")).path
    assert "injected failure" in log.read_text()


async def test_a_cancel_after_the_box_is_ready_still_rolls_it_back(
    sim_service, sim_host, monkeypatch
):
    """The last await of `new` (reading the machine back) is covered by the rollback: a
    base build cancelled there kept its half-made builder box."""
    engine_type = type(sim_host.engine)
    find, wait_ready = engine_type.find, guest.wait_ready
    armed = False

    async def wait_then_arm(*args, **kwargs):
        nonlocal armed
        await wait_ready(*args, **kwargs)
        armed = True

    async def find_or_cancel(self, name):
        if armed:
            raise asyncio.CancelledError  # as a Ctrl-C landing in this await would
        return await find(self, name)

    monkeypatch.setattr(guest, "wait_ready", wait_then_arm)
    monkeypatch.setattr(engine_type, "find", find_or_cancel)
    with pytest.raises(Cancelled, match="'b1' was rolled back"):
        await sim_service.new(NewSpec("b1", recipe=SIM_RECIPE))
    monkeypatch.setattr(engine_type, "find", find)
    assert await sim_host.engine.list() == []
    assert Registry(resolve_paths().registry_file).read().get("b1") is None


@pytest.mark.parametrize("name", ["a;b", "../x", "a b", "x" * 200, "-rf"])
def test_bad_names_are_refused_before_anything_is_made(sim_env, sim_state_dir, name):
    done = hbtui("new", "--recipe", str(SIM_RECIPE), "--", name, env=sim_env)
    assert done.returncode == 2
    assert done.stderr.startswith("error: invalid box name") and "Traceback" not in done.stderr
    assert ls_json(sim_env) == []


def test_concurrent_news_get_distinct_ports(sim_env):
    names = [f"c{i}" for i in range(8)]
    procs = [
        subprocess.Popen(
            [HBTUI_BIN, "new", n, "-q", "--recipe", str(SIM_RECIPE)],
            env=sim_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in names
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, out + err
    boxes = ls_json(sim_env)
    assert sorted(b["name"] for b in boxes) == names
    assert len({b["port"] for b in boxes}) == 8
    assert all(b["state"] == "running" and b["provisioning"] == "ready" for b in boxes)
    assert all(answers(b["port"]) for b in boxes)
    rows = Registry(resolve_paths().registry_file).read().on_host("local")
    assert sorted((r.name, r.port) for r in rows) == sorted((b["name"], b["port"]) for b in boxes)


async def test_orphans_and_missing_boxes_are_reconciled(sim_service, sim_host):
    await sim_service.new(NewSpec("b1", recipe=SIM_RECIPE))
    host = sim_host
    async with Registry(resolve_paths().registry_file).transaction() as boxes:
        boxes.remove("b1")
    [orphan] = (await sim_service.boxes.listing()).boxes
    assert orphan.kind == "orphan" and orphan.port is not None
    adopted = await sim_service.boxes.adopt("b1")
    assert adopted.kind == "box" and adopted.port == orphan.port
    await host.engine.delete("b1")
    [missing] = (await sim_service.boxes.listing()).boxes
    assert (missing.kind, missing.state) == ("missing", "missing")
    await sim_service.remove("b1")
    assert (await sim_service.boxes.listing()).boxes == []


async def test_foreign_machines_show_only_with_all(sim_service, sim_host):
    from hbtui.engine import MachineSpec

    host = sim_host
    await host.engine.create(
        MachineSpec(name="hermes-x", image="python:3.12-slim", cpus=1, memory_mib=512)
    )
    assert (await sim_service.boxes.listing()).boxes == []
    [foreign] = (await sim_service.boxes.listing(include_foreign=True)).boxes
    assert (foreign.name, foreign.kind) == ("hermes-x", "foreign")
    with pytest.raises(HbtuiError, match="hbtui did not make"):
        await sim_service.boxes.adopt("hermes-x")


@pytest.mark.parametrize(
    "signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)]
)
def test_a_signal_during_provisioning_rolls_back(sim_env, signum, status):
    """Ctrl-C, SIGTERM (a service manager, `kill`) and SIGHUP (a closed terminal) alike:
    the box is rolled back, then hbtui exits with 128 + the signal."""
    proc = subprocess.Popen(
        [HBTUI_BIN, "new", "b1", "--recipe", str(SIM_RECIPE)],
        env=sim_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if "step 2/" in line:
            break
    proc.send_signal(signum)
    rest = proc.communicate(timeout=120)[0]
    assert proc.returncode == status, rest
    assert "rolled back" in rest and "Traceback" not in rest
    assert ls_json(sim_env) == []
    assert Registry(resolve_paths().registry_file).read().get("b1") is None


async def test_repair_runs_the_recipe_again(sim_service, sim_host):
    await sim_service.new(NewSpec("b1", recipe=SIM_RECIPE))
    host = sim_host
    await host.engine.exec("b1", ["rm", "-f", "/opt/hermes-box/bin/hb-as-agent"])
    broken = await host.engine.exec("b1", ["test", "-x", "/opt/hermes-box/bin/hb-as-agent"])
    assert broken.returncode == 1
    events = []
    view = await sim_service.boxes.repair("b1", recipe=SIM_RECIPE, report=events.append)
    assert view.provisioning == "ready" and view.state == "running"
    assert any(isinstance(e, Step) for e in events)
    who = await host.engine.exec("b1", ["/opt/hermes-box/bin/hb-as-agent", "--", "id", "-un"])
    assert who.stdout.strip() == b"agent"
    assert await host.http_ok(view.port)
    await sim_service.remove("b1")


def test_enter_gives_a_shell_as_agent_in_tmux_main(sim_env, tmp_path):
    import shlex
    import shutil

    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    assert hbtui("new", "b1", "-q", "--recipe", str(SIM_RECIPE), env=sim_env).returncode == 0
    sock = str(tmp_path / "tmux.sock")
    out = tmp_path / "enter-status"
    env = {k: v for k, v in sim_env.items() if k not in ("TMUX", "COLUMNS", "LINES")}
    command = f"{shlex.quote(HBTUI_BIN)} enter b1; echo $? > {shlex.quote(str(out))}; sleep 30"
    subprocess.run(
        ["tmux", "-S", sock, "new-session", "-d", "-x", "120", "-y", "30", command],
        env=env,
        check=True,
    )
    try:

        def screen() -> str:
            return subprocess.run(
                ["tmux", "-S", sock, "capture-pane", "-p"], env=env, capture_output=True, text=True
            ).stdout

        def send(keys: str) -> None:
            subprocess.run(["tmux", "-S", sock, "send-keys", keys, "Enter"], env=env, check=True)

        assert wait_for(lambda: "$" in screen() or "agent@" in screen(), 30), screen()
        send("echo WHO=$(id -un) SESSION=$(tmux display -p '#S')")
        assert wait_for(lambda: "WHO=agent SESSION=main" in screen(), 20), screen()
        send("exit")
        assert wait_for(out.exists, 20), screen()
        assert out.read_text().strip() == "0"
    finally:
        subprocess.run(["tmux", "-S", sock, "kill-server"], env=env, capture_output=True)
