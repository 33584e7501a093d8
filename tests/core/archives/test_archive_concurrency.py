"""Saves and loads side by side in one process, and what their progress says: key derivations
are serialized process-wide, and the save's byte count is tar's, not a thousand times it."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess

import pytest

from hbtui.core.foundation.specs import NewSpec, SaveSpec
from hbtui.events import Transfer

from support import HBTUI_BIN, SIM_RECIPE

PASS = b"a passphrase for the concurrency tests"


async def test_archives_written_and_read_at_once_in_threads_all_round_trip():
    """The real path (encrypt_stream, decrypt_stream, each deriving its key with the
    default Argon2id) in N threads at once; it hung, or failed with MemoryError."""
    from hbtui.archive import decrypt_stream, encrypt_stream

    payloads = [os.urandom(200_000 + i) for i in range(3)]

    def round_trip(payload: bytes) -> bytes:
        sealed = io.BytesIO()
        encrypt_stream(io.BytesIO(payload), sealed, PASS)
        sealed.seek(0)
        opened = io.BytesIO()
        decrypt_stream(sealed, opened, PASS)
        return opened.getvalue()

    async with asyncio.timeout(240):  # each derivation is well under a second unloaded
        results = await asyncio.gather(*(asyncio.to_thread(round_trip, p) for p in payloads))
    assert results == payloads


@pytest.mark.sim
async def test_save_progress_counts_the_bytes_tar_read(sim_service, sim_env):
    """tar's checkpoint echo counts records already; the progress was that count times
    another 1024 ("280 GiB / 286 MiB")."""
    await sim_service.new(NewSpec("web", recipe=SIM_RECIPE))
    filled = subprocess.run(
        [
            HBTUI_BIN,
            "exec",
            "web",
            "--",
            "sh",
            "-c",
            "head -c 40000000 /dev/urandom > ~/workspace/big.bin",
        ],
        env=sim_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert filled.returncode == 0, filled.stderr
    seen: list[Transfer] = []
    await sim_service.archives.save(
        SaveSpec("web", verify=False),
        passphrase=PASS,
        report=lambda e: seen.append(e) if isinstance(e, Transfer) else None,
    )
    saving = [t for t in seen if t.label == "saving" and t.total]
    assert saving, "no progress with a total"
    total = saving[-1].total
    assert 40_000_000 <= total < 60_000_000
    assert max(t.done for t in saving) <= total * 1.1  # never past what /data holds


@pytest.mark.sim
async def test_save_progress_ends_full(sim_service):
    """Once /data is packed, the bar says so: it stayed at what tar's last checkpoint (or
    the compressed stream) had counted, 1% ("774 B / 64.6 KiB") for a small box, through
    the resume and the verify that follow."""
    await sim_service.new(NewSpec("small", recipe=SIM_RECIPE))
    seen: list[Transfer] = []
    await sim_service.archives.save(
        SaveSpec("small", verify=False),
        passphrase=PASS,
        report=lambda e: seen.append(e) if isinstance(e, Transfer) else None,
    )
    last = [t for t in seen if t.label == "saving"][-1]
    assert last.total and last.done == last.total
