"""The details view, live resources, the command line, sorting, bulk actions and the
k9s-style keys (issue 11, items 13, 14, 16 and 18).

The first part checks the core's side (`Service.details`, `Service.stats`,
`hbtui inspect`) against the simulator; the rest drives the dashboard with
Pilot over `FakeService`.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import HBTUI_BIN, SIM_RECIPE

from hbtui.core.details import parse_stats
from hbtui.core.views import BoxStats

sim = pytest.mark.sim


# -- the core: stats read leniently, details, inspect ---------------------------------------------


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        (
            {"cpu_percent": 12.5, "memory_mib": 300, "memory_limit_mib": 4096},
            BoxStats(12.5, 300.0, 4096.0),
        ),
        ({"cpu": "7.5%", "rss_bytes": 64 * 1024 * 1024}, BoxStats(7.5, 64.0, None)),
        (
            {"cpu": {"percent": 3}, "memory": {"used_bytes": 2**30, "limit_bytes": 2**31}},
            BoxStats(3.0, 1024.0, 2048.0),
        ),
        ({"cpu_percent": True, "memory_mib": -1, "state": "running"}, None),
        ({"cpu_percent": float("nan"), "memory_mib": "lots"}, None),
    ],
)
def test_stats_are_read_whatever_the_engine_calls_them(reported, expected):
    assert parse_stats(reported) == expected


@sim
async def test_sim_details_and_stats_of_a_running_box(sim_service, monkeypatch):
    monkeypatch.setenv("HBTUI_RECIPE", str(SIM_RECIPE))
    await sim_service.new("web1")
    details = await sim_service.details("web1")
    sections = {s.title: dict(s.fields) for s in details.sections}
    assert sections["Box"]["state"] == "running"
    assert sections["Network"]["URL"] == details.view.url
    assert sections["Labels"]["hbtui"] == "1"
    assert sections["Recipe"]["its version"] == sections["Recipe"]["made with version"]
    assert sections["Logs"]["provisioning log"].endswith(".log")
    assert details.engine_record["name"] == "web1"
    # The simulator measures its own process tree: a running box uses some memory.
    assert details.stats is not None and details.stats.memory_mib and details.stats.memory_mib > 1
    assert details.stats.memory_limit_mib == 4096
    live = await sim_service.stats(["web1"])
    assert live["web1"].cpu_percent is not None
    await sim_service.stop("web1")
    assert await sim_service.stats(["web1"]) == {}  # a stopped box has no figures, no error
    assert (await sim_service.details("web1")).stats is None


@sim
def test_sim_inspect_verb(sim_env):
    env = dict(sim_env, HBTUI_RECIPE=str(SIM_RECIPE))
    subprocess.run([HBTUI_BIN, "new", "-q", "web2"], env=env, check=True, capture_output=True)
    shown = subprocess.run(
        [HBTUI_BIN, "inspect", "web2"], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert "Labels" in shown and "hbtui.port" in shown and "CPU " in shown
    data = json.loads(
        subprocess.run(
            [HBTUI_BIN, "inspect", "--json", "web2"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert data["engine"]["name"] == "web2" and data["stats"]["memory_mib"] > 0
    missing = subprocess.run(
        [HBTUI_BIN, "inspect", "nope"], env=env, capture_output=True, text=True
    )
    assert missing.returncode != 0
    assert missing.stderr.strip().splitlines() == ["error: no box named 'nope' (see: hbtui ls)"]
