"""What `hbtui inspect` and the dashboard's details view show: one box in full, and the
live resource use of running boxes.

The engine's `machine stats --json` is read leniently: its field names are not
documented and have differed between versions, so a figure the engine does not
give (or gives in another shape) is just absent, never an error.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import re
from pathlib import Path
from typing import Any

from hbtui import boxtext
from hbtui.config import split_list
from hbtui.core.boxes.core import BoxCore
from hbtui.core.foundation import recipe as recipes
from hbtui.core.foundation.registry import BoxRecord
from hbtui.core.foundation.views import BoxDetails, BoxStats, BoxView, DetailSection
from hbtui.core.keys import credentials as creds
from hbtui.engine import EngineError
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL, host_flag
from hbtui.present import human_bytes

MIB = 1024 * 1024
STATS_CONCURRENCY = 4  # engine calls at once: each is a process, 30 at once load a small host

# Where engines have put each figure: (keys, scale to MiB or percent).
_CPU_KEYS = ("cpu_percent", "cpu_pct", "cpu_usage_percent", "cpu_usage", "cpu")
_MEMORY_KEYS = (
    (("memory_mib", "mem_mib", "memory_mb", "rss_mib"), 1.0),
    (("memory_bytes", "rss_bytes", "memory_rss_bytes", "memory_used_bytes", "rss"), 1 / MIB),
)
_LIMIT_KEYS = (
    (("memory_limit_mib", "memory_limit_mb", "mem_limit_mib"), 1.0),
    (("memory_limit_bytes", "mem_limit_bytes"), 1 / MIB),
)


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().rstrip("%"))
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value) and value >= 0:
        return float(value)
    return None


def _first(data: dict[str, object], keys: tuple[str, ...], scale: float = 1.0) -> float | None:
    for key in keys:
        found = _number(data.get(key))
        if found is not None:
            return found * scale
    return None


def _flat(data: dict[str, object]) -> dict[str, object]:
    """Nested blocks ({"memory": {"rss_bytes": ..}}) as flat keys ("memory_rss_bytes")."""
    flat = dict(data)
    for outer, inner in data.items():
        if isinstance(inner, dict):
            for key, value in inner.items():
                flat.setdefault(f"{outer}_{key}", value)
                if key in ("percent", "usage_percent"):
                    flat.setdefault(f"{outer}_percent", value)
                if outer == "memory" and key in ("used_bytes", "bytes", "rss_bytes"):
                    flat.setdefault("memory_bytes", value)
                if outer == "memory" and key in ("limit_bytes", "max_bytes"):
                    flat.setdefault("memory_limit_bytes", value)
    return flat


def parse_stats(data: dict[str, object]) -> BoxStats | None:
    """The figures an engine's stats JSON gives, whatever it calls them; None: none."""
    flat = _flat(data)
    cpu = _first(flat, _CPU_KEYS)
    memory = next(
        (m for keys, scale in _MEMORY_KEYS if (m := _first(flat, keys, scale)) is not None), None
    )
    limit = next(
        (m for keys, scale in _LIMIT_KEYS if (m := _first(flat, keys, scale)) is not None), None
    )
    if cpu is None and memory is None:
        return None
    return BoxStats(cpu_percent=cpu, memory_mib=memory, memory_limit_mib=limit)


async def stats(boxes: BoxCore, names: list[str], host_name: str = LOCAL) -> dict[str, BoxStats]:
    """Resource use of these running boxes, STATS_CONCURRENCY engine calls at once; a box
    the engine cannot say anything about (stopped meanwhile, an engine without stats) is
    left out."""
    if not names:
        return {}
    host = await boxes.hosts.get(host_name)
    gate = asyncio.Semaphore(STATS_CONCURRENCY)

    async def one(name: str) -> dict[str, Any]:
        async with gate:
            return await host.engine.stats(name)

    answers = await asyncio.gather(*(one(name) for name in names), return_exceptions=True)
    found: dict[str, BoxStats] = {}
    for name, answer in zip(names, answers, strict=True):
        if isinstance(answer, BaseException):
            if not isinstance(answer, EngineError | OSError | asyncio.TimeoutError):
                raise answer
            continue
        parsed = parse_stats(answer)
        if parsed is not None:
            found[name] = parsed
    return found


def _archive_pattern(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(name) + r"-\d{8}T\d{6}Z\.hbx")


def newest_archive(backups: Path, name: str) -> Path | None:
    """The box's newest archive under its default name in the backups folder."""
    if not backups.is_dir():
        return None
    pattern = _archive_pattern(name)
    found = sorted(p for p in backups.iterdir() if pattern.fullmatch(p.name))
    return found[-1] if found else None


def _recipe_lines(boxes: BoxCore, made_with: str) -> list[tuple[str, str]]:
    lines = [("made with version", made_with or "unknown (adopted, or made before versions)")]
    try:
        folder = boxes.recipe_dir(None)
        current = recipes.recipe_version(folder)
    except (HbtuiError, OSError) as exc:
        lines.append(("configured recipe", f"unreadable: {exc}"))
        return lines
    lines.append(("configured recipe", str(folder)))
    lines.append(("its version", current))
    if made_with and made_with != current:
        lines.append(("note", "the recipe changed since; hbtui repair re-runs it"))
    return lines


def _work_lines(boxes: BoxCore, view: BoxView) -> list[tuple[str, str]]:
    """Where the box's work is: the host's record (`new --repo`), and its last pull."""
    work = boxes.work.place(view.host, view.name)
    if work is None:
        return [("repository", "none: made without --repo")]
    ahead = "not pulled yet" if view.ahead is None else f"{view.ahead} (at its last pull)"
    lines = []
    for record in work.repos:
        lines += [
            ("repository", record.repo),
            ("branch", record.branch),
            ("seed", f"{record.seed} ({record.ref})"),
            ("clone in the box", record.clone),
        ]
    return [*lines, ("commits past the seed", ahead)]


def _egress_line(record: BoxRecord | None) -> str:
    if record is None or not record.egress:
        return "open (made before hbtui set egress policies)"
    policy = creds.Egress(record.egress, tuple(split_list(record.allow)))
    return policy.describe()


async def details(boxes: BoxCore, backups: Path, name: str, host_name: str = LOCAL) -> BoxDetails:
    """One box in full: the row, what the registry and the engine hold, its files."""
    view = await boxes.get(name, host_name)
    record = boxes.registry.read().get(name, host_name)
    host = await boxes.hosts.get(host_name)
    machine = await host.engine.find(name)
    box_stats = None
    if machine is not None and machine.running:
        box_stats = (await stats(boxes, [name], host_name)).get(name)
    box = [("name", view.name), ("host", view.host), ("kind", view.kind), ("state", view.state)]
    box.append(("provisioning", view.provisioning + (f": {view.error}" if view.error else "")))
    if view.busy:
        box.append(("busy", str(view.busy)))
    box.append(("created", view.created or "unknown"))
    resources = [
        ("image", view.image or "unknown"),
        ("CPUs", str(view.cpus or "unknown")),
        ("memory", f"{view.memory_mib} MiB" if view.memory_mib else "unknown"),
    ]
    if machine is not None and machine.pid:
        resources.append(("engine pid", str(machine.pid)))
    network = [("port", str(view.port or "none")), ("URL", view.url or "none")]
    if record is not None and record.guest_port and record.guest_port != record.port:
        network.append(("port inside the box", str(record.guest_port)))
    labels = sorted(machine.labels.items()) if machine is not None else []
    forwards = [
        (f"port {f.box_port}", f"{f.url} ({'this hbtui' if f.mine else f'pid {f.pid}'})")
        for f in boxes.forwards.running(name, host_name)
    ]
    save: list[tuple[str, str]] = [("when", view.last_save or "never")]
    archive = await asyncio.to_thread(newest_archive, backups, name)
    if archive is not None:
        save.append(("newest archive", str(archive)))
        save.append(("size", human_bytes(os.path.getsize(archive))))
    logs = boxes.provision_logs(name, host_name)
    made_with = record.recipe if record is not None else ""
    origin = [
        ("base", view.base or "none: the whole recipe ran in it"),
        ("branched from", view.parent or "none"),
        ("branchable now", "yes" if view.branchable else "no"),
    ]
    work = _work_lines(boxes, view)
    keys = [("egress", _egress_line(record))]
    stored = set(boxes.secrets.names())
    for preset in view.credentials:
        keys.append((preset, "managed by the engine" if preset in stored else "secret missing"))
    if not view.credentials:
        unknown = record is not None and record.egress == creds.UNKNOWN
        keys.append(("credentials", "unknown (adopted)" if unknown else "none"))
    if machine is not None:
        with contextlib.suppress(HbtuiError):
            refused = await host.engine.egress_events(name, limit=20)
            keys.append(("refused connections", str(len(refused)) if refused else "none"))
    sections = [
        DetailSection("Box", box),
        DetailSection("Resources", resources),
        DetailSection("Network", network),
        DetailSection(
            "Forwards", forwards or [("none", f"hbtui forward {name} PORT{host_flag(host_name)}")]
        ),
        DetailSection("Made from", origin),
        DetailSection("Work", work),
        DetailSection("Keys and network", keys),
        DetailSection("Labels", labels or [("none", "")]),
        DetailSection("Recipe", await asyncio.to_thread(_recipe_lines, boxes, made_with)),
        DetailSection("Last save", save),
        DetailSection(
            "Logs",
            [
                ("provisioning log", str(logs[-1]) if logs else "none"),
                ("logs kept", str(len(logs))),
            ],
        ),
    ]
    # One line each, plain: the box names files, fails with words of its own, and the
    # engine's labels and errors say what they say.
    plain = [
        DetailSection(s.title, [(boxtext.line(k), boxtext.line(v)) for k, v in s.fields])
        for s in sections
    ]
    raw = dict(machine.raw) if machine is not None else {}
    return BoxDetails(view, plain, raw, box_stats)
