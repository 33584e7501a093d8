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
loaded = sorted(m if {whole!r} else m.split(".")[0] for m in sys.modules)
sys.__stderr__.write("\\nLOADED " + json.dumps(sorted(set(loaded))) + "\\n")
"""


def loaded_by(argv: list[str], env: dict[str, str], *, whole: bool = False) -> set[str]:
    """The packages a verb loaded (`whole`: every module, by its full name)."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, whole=whole)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    line = next(x for x in done.stderr.splitlines() if x.startswith("LOADED "))
    return set(json.loads(line.removeprefix("LOADED ")))


@pytest.mark.sim
def test_version_loads_neither_the_core_nor_rich(sim_env):
    loaded = loaded_by(["--version"], sim_env)
    assert not loaded & {"rich", "asyncio", "textual", "asyncssh", "cryptography", "tomllib"}


@pytest.mark.sim
@pytest.mark.parametrize("argv", [["ls", "--json"], ["ports", "--json"]])
def test_data_verbs_load_no_ui_crypto_or_ssh(sim_env, argv):
    loaded = loaded_by(argv, sim_env)
    assert "hbtui" in loaded
    assert not loaded & {"rich", "textual", "asyncssh", "cryptography"}


@pytest.mark.sim
def test_a_pull_loads_no_other_feature(sim_env):
    """What a pull that brings one commit costs is mostly its start-up: the Service makes
    a feature object (and imports its package) when first used, so `pull` loads the work
    feature and not the agents', archives', tries' or bases', nor the box operations."""
    loaded = loaded_by(["pull", "nobox"], sim_env, whole=True)
    assert "hbtui.core.work.pull" in loaded
    assert not loaded & {
        "hbtui.core.agents.door", "hbtui.core.archives.door", "hbtui.core.tries.door",
        "hbtui.core.bases.door", "hbtui.core.boxes.operations", "hbtui.core.work.pr",
        "rich.progress",
    }  # fmt: skip


REPORTER = """
import io, sys
from rich.console import Console
from hbtui.cli.progress import ConsoleReporter
from hbtui.events import Notice, Phase, Step
out = io.StringIO()
with ConsoleReporter(Console(file=out, width=200)) as rep:
    rep(Phase("bundling the work in b1"))
    rep(Notice("2 file(s) uncommitted"))
    before = "rich.progress" in sys.modules
    rep(Step(1, 3, "packages"))
print(before, "rich.progress" in sys.modules, repr(out.getvalue()))
"""


def test_progress_bars_load_with_the_first_step_not_before():
    """`pull` and `diff` only say what they do: rich's bars (tens of ms to import) load
    when a step or a transfer first needs one, not before a verb's work starts."""
    done = subprocess.run(
        [sys.executable, "-c", REPORTER], capture_output=True, text=True, timeout=60
    )
    before, after, shown = done.stdout.strip().split(" ", 2)
    assert (before, after) == ("False", "True"), done.stderr
    assert "bundling the work in b1" in shown and "step 1/3 packages" in shown


LINES = """
import io, sys
from hbtui.cli.progress import LineReporter
from hbtui.events import LogLine, Notice, Phase, Step
out = io.StringIO()
with LineReporter(out) as rep:
    rep(Phase("bundling the work in b1"))
    rep(Notice("2 file(s) uncommitted"))
    rep(LogLine("\\x1b[32mok\\x1b[0m"))
    rep(Step(1, 3, "packages"))
print("rich" in sys.modules, repr(out.getvalue()))
"""


def test_progress_to_a_pipe_loads_no_rich():
    """A script's `hbtui pull --json 2>log` gets its progress as plain lines: rich (a
    tenth of a pull's start-up) is not loaded for it."""
    done = subprocess.run([sys.executable, "-c", LINES], capture_output=True, text=True, timeout=60)
    loaded, shown = done.stdout.strip().split(" ", 1)
    assert loaded == "False", done.stderr
    assert shown == repr(
        "• bundling the work in b1\n! 2 file(s) uncommitted\nok\nstep 1/3 packages\n"
    )


def test_the_dashboard_app_loads_no_box_operations():
    """The dashboard's first frame needs what an agent session is (agent_sessions), not the
    core's box operations behind hbtui.core.agents.operations (~120 ms of imports): those load with
    the Service, at the first listing."""
    done = subprocess.run(
        [sys.executable, "-c", "import sys, hbtui.tui.app; print(sorted(sys.modules))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    loaded = set(json.loads(done.stdout.replace("'", '"')))
    assert "hbtui.core.agents.sessions" in loaded
    assert not loaded & {
        "hbtui.core.boxes.operations",
        "hbtui.core.boxes.core",
        "hbtui.core.agents.operations",
        "hbtui.core.service",
    }
