"""Host ports for boxes: one per box, unique, in the configured range.

A port is free when no box in the registry has it on that host and nothing
on that host accepts connections on it (127.0.0.1 or ::1: smolvm listens on
both). Allocation happens inside a registry transaction, so two `hbtui new`
processes can never be handed the same port.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from hbtui.core.foundation.hosts import BusyProbe
from hbtui.core.foundation.registry import Rows
from hbtui.errors import HbtuiError, UsageError

USED = "used"
BUSY = "busy"
FREE = "free"


class PortsExhausted(HbtuiError):
    pass


@dataclass(frozen=True)
class PortSlot:
    port: int
    state: str  # USED, BUSY or FREE
    box: str = ""


async def allocate(
    boxes: Rows,
    host: str,
    port_range: tuple[int, int],
    probe: BusyProbe,
    *,
    wanted: int | None = None,
    labelled: dict[int, str] | None = None,
    rng: random.Random | None = None,
) -> int:
    """Pick a port for a new box on `host`. Call inside a registry transaction.
    `labelled`: ports that machines on the host carry in their hbtui.port label (an
    orphan's, stopped or not, is as taken as a registered box's)."""
    lo, hi = port_range
    taken = {**(labelled or {}), **{r.port: r.name for r in boxes.on_host(host)}}
    if wanted is not None:
        if not lo <= wanted <= hi:
            raise UsageError(f"port {wanted} is outside the range {lo}-{hi}")
        if wanted in taken:
            raise UsageError(f"port {wanted} is already used by box {taken[wanted]!r}")
        if await probe([wanted]):
            raise UsageError(f"port {wanted} is busy: another process on {host} listens on it")
        return wanted
    candidates = [p for p in range(lo, hi + 1) if p not in taken]
    (rng or random.SystemRandom()).shuffle(candidates)
    # Probe in small batches: usually the first candidate is free.
    for i in range(0, len(candidates), 16):
        batch = candidates[i : i + 16]
        busy = await probe(batch)
        for p in batch:
            if p not in busy:
                return p
    raise PortsExhausted(
        f"no free host port in {lo}-{hi} on {host}: {len(taken)} used by boxes, "
        f"{len(candidates)} busy; widen [ports] in the config or remove a box"
    )


async def port_map(
    boxes: Rows,
    host: str,
    port_range: tuple[int, int],
    probe: BusyProbe,
    labelled: dict[int, str] | None = None,
) -> list[PortSlot]:
    lo, hi = port_range
    taken = {**(labelled or {}), **{r.port: r.name for r in boxes.on_host(host)}}
    busy = await probe([p for p in range(lo, hi + 1) if p not in taken])
    return [
        PortSlot(p, USED, taken[p]) if p in taken else PortSlot(p, BUSY if p in busy else FREE)
        for p in range(lo, hi + 1)
    ]
