import asyncio
import multiprocessing
import socket

import pytest

from hbtui.core.foundation.hosts import local_busy_ports
from hbtui.core.foundation.ports import BUSY, FREE, USED, PortsExhausted, allocate, port_map
from hbtui.core.foundation.registry import FAILED, PROVISIONING, BoxRecord, Registry
from hbtui.errors import UsageError


async def never_busy(ports):
    return set()


def test_registry_round_trip_and_atomic_file(tmp_path):
    reg = Registry(tmp_path / "registry.toml")

    async def go():
        async with reg.transaction() as boxes:
            boxes.put(
                BoxRecord(name="b1", port=4800, image="ubuntu:24.04", cpus=2, memory_mib=1024)
            )
            boxes.put(BoxRecord(name="b1", host="mac", port=4800))
        await reg.update("b1", status="ready", last_save="2026-11-29T00:00:00Z")

    asyncio.run(go())
    snap = reg.read()
    assert snap.get("b1").status == "ready"
    assert snap.get("b1").last_save == "2026-11-29T00:00:00Z"
    assert snap.get("b1", "mac").port == 4800
    assert [r.name for r in snap.on_host("local")] == ["b1"]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_row_without_created_is_of_unknown_age_not_of_each_read(tmp_path):
    path = tmp_path / "registry.toml"
    path.write_text("version = 1\n[boxes.local.web]\nport = 4800\n")
    assert Registry(path).read().get("web").created == ""


def test_a_failed_transaction_writes_nothing(tmp_path):
    reg = Registry(tmp_path / "registry.toml")

    async def go():
        async with reg.transaction() as boxes:
            boxes.put(BoxRecord(name="b1", port=4800))
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        asyncio.run(go())
    assert reg.read().get("b1") is None


def test_provisioning_by_a_dead_process_reads_as_failed():
    dead = multiprocessing.Process(target=lambda: None)
    dead.start()
    dead.join()
    rec = BoxRecord(name="b1", port=4800, status=PROVISIONING, owner_pid=dead.pid)
    assert rec.effective_status() == FAILED
    import os

    assert rec.with_(owner_pid=os.getpid()).effective_status() == PROVISIONING


def _allocate_in_process(path, out):
    reg = Registry(path)

    async def go():
        async with reg.transaction() as boxes:
            port = await allocate(boxes, "local", (4790, 4797), never_busy)
            boxes.put(BoxRecord(name=f"p{port}", port=port))
            return port

    out.put(asyncio.run(go()))


def test_concurrent_processes_never_share_a_port(tmp_path):
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [
        ctx.Process(target=_allocate_in_process, args=(tmp_path / "r.toml", q)) for _ in range(8)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    ports = sorted(q.get(timeout=5) for _ in procs)
    assert ports == list(range(4790, 4798))
    assert len(Registry(tmp_path / "r.toml").read().on_host("local")) == 8


def test_allocation_skips_busy_and_used_ports_and_reports_a_full_range(tmp_path):
    reg = Registry(tmp_path / "r.toml")

    async def go():
        async with reg.transaction() as boxes:
            boxes.put(BoxRecord(name="a", port=5000))

            async def busy(ports):
                return {p for p in ports if p == 5001}

            assert await allocate(boxes, "local", (5000, 5002), busy) == 5002
            with pytest.raises(UsageError, match="used by box 'a'"):
                await allocate(boxes, "local", (5000, 5002), busy, wanted=5000)
            with pytest.raises(UsageError, match="busy"):
                await allocate(boxes, "local", (5000, 5002), busy, wanted=5001)
            with pytest.raises(UsageError, match="outside the range"):
                await allocate(boxes, "local", (5000, 5002), busy, wanted=6000)
            with pytest.raises(PortsExhausted, match="no free host port in 5000-5001"):
                await allocate(boxes, "local", (5000, 5001), busy)
            slots = await port_map(boxes, "local", (5000, 5002), busy)
            assert [(s.port, s.state, s.box) for s in slots] == [
                (5000, USED, "a"),
                (5001, BUSY, ""),
                (5002, FREE, ""),
            ]

    asyncio.run(go())


def test_local_probe_sees_a_listener():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        busy = asyncio.run(local_busy_ports([port, port + 1 if port < 65535 else port - 1]))
    assert port in busy


def test_reading_inside_this_process_own_transaction_does_not_block(tmp_path):
    """The dashboard lists boxes while a `new` in the same process holds the lock."""
    reg = Registry(tmp_path / "r.toml")

    async def go():
        async with reg.transaction() as boxes:
            boxes.put(BoxRecord(name="a", port=4800))
            return await asyncio.wait_for(asyncio.to_thread(lambda: reg.read().get("a")), 5)

    assert asyncio.run(go()) is None  # the row is not saved until the transaction ends
    assert reg.read().get("a").port == 4800
