"""A verb loads only what it uses: the start-up cost tests/bench/cli.py measures stays low
because these modules stay out (a regression here shows up as a slower CLI)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, sys
sys.argv = ["hbtui", *{argv!r}]
from hbtui.cli import main
try:
    main()
except SystemExit:
    pass
loaded = sorted(m.split(".")[0] for m in sys.modules)
sys.__stderr__.write("\\nLOADED " + json.dumps(sorted(set(loaded))) + "\\n")
"""


def loaded_by(argv: list[str], env: dict[str, str]) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    return set(json.loads(line.removeprefix("LOADED ")))


def test_version_loads_neither_the_core_nor_rich(sim_env):
    loaded = loaded_by(["--version"], sim_env)
    assert not loaded & {"rich", "asyncio", "textual", "asyncssh", "cryptography", "tomllib"}


@pytest.mark.parametrize("argv", [["ls", "--json"], ["ports", "--json"]])
def test_data_verbs_load_no_ui_crypto_or_ssh(sim_env, argv):
    loaded = loaded_by(argv, sim_env)
    assert "hbtui" in loaded
    assert not loaded & {"rich", "textual", "asyncssh", "cryptography"}


def test_the_dashboard_app_loads_no_box_operations():
    """The dashboard's first frame needs what an agent session is (agent_sessions), not the
    core's box operations behind hbtui.core.agents (~120 ms of imports): those load with
    the Service, at the first listing."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, hbtui.tui.app; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = set(json.loads(done.stdout.replace("'", '"')))
    assert "hbtui.core.agent_sessions" in loaded
    assert not loaded & {"hbtui.core.boxes", "hbtui.core.agents", "hbtui.core.service"}
