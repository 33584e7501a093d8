"""A hostile box (root in it replaces its tools) against the host's bounds: what it prints
to `hb agents` and what its save sends are read within stated limits, refused in one
line, and the host's memory and disk stay small."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support import SIM_RECIPE
from support.cli import as_root, hbtui, ls, ok, one_line_error

pytestmark = pytest.mark.sim

PASS = "hostile-bounds-passphrase-5"
HB = "/opt/hermes-box/bin/hb"

# `hbtui ARGS` in this interpreter, then its peak resident set on stderr's last line: the
# VmHWM of its own memory (getrusage's ru_maxrss keeps the forking parent's across exec).
PEAK = """
import re, sys
from hbtui.cli import main
try:
    code = main(sys.argv[1:])
finally:
    sys.stdout.flush()
    with open("/proc/self/status") as status:
        peak = re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)
    print(f"peak-rss-kib {peak}", file=sys.stderr)
sys.exit(code)
"""


@pytest.fixture
def box(sim_env) -> str:
    ok(hbtui("new", "b1", "-q", "--recipe", str(SIM_RECIPE), env=sim_env))
    return "b1"


def shadow(env: dict[str, str], path: str, script: str) -> None:
    """Put `script` at `path` in the box, as its root would."""
    as_root(env, "b1", f"cat > {path} && chmod 755 {path}", input=script.encode())


def test_hb_agents_printing_half_a_gigabyte_leaves_hbtui_small(sim_env, box) -> None:
    """Read whole and then measured, 1 GB took hbtui to 2 GB resident."""
    shadow(sim_env, HB, "#!/bin/sh\nexec head -c 536870912 /dev/zero\n")
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", PEAK, "agents", "b1", "--json"],
        env=sim_env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    took = time.monotonic() - began
    *said, peak = done.stderr.splitlines()
    assert int(peak.split()[1]) < 128 * 1024, peak  # KiB: the 512 MiB was never held
    assert took < 60
    assert "Traceback" not in done.stderr, done.stderr
    assert said == [], said
    [row] = json.loads(done.stdout)
    assert row["sessions"] == []
    assert row["error"] == "the box answered more than 2.0 MiB; hbtui stopped reading it"
    assert done.returncode == 1


def save(env: dict[str, str], target: Path) -> subprocess.CompletedProcess[str]:
    return hbtui("save", "b1", "-o", str(target), env=env, passphrase=PASS, timeout=300)


PART = "/root/.hbtui-save/part-000000"


@pytest.mark.parametrize(
    ("tool", "script", "words"),
    [
        pytest.param(  # a sparse 3 GiB part, for 1 MiB parts
            "split",
            f"#!/bin/sh\ncat > /dev/null\ntruncate -s 3G {PART}\n"
            f'echo "::hbtui-part:: {PART} $(stat -c %s {PART})"\n'
            f"while [ -e {PART} ]; do sleep 0.05; done\n",
            ["a part of 3,221,225,472 bytes", "1,048,576"],
            id="part-larger-than-the-part-size",
        ),
        pytest.param(
            "split",
            "#!/bin/sh\ncat > /dev/null\necho '::hbtui-part:: onlyone'\n",
            ["a form hbtui does not know", "onlyone"],
            id="malformed-announcement",
        ),
        pytest.param(
            "split",
            "#!/bin/sh\ncat > /dev/null\necho '::hbtui-part:: /etc/shadow 10'\n",
            ["'/etc/shadow'", f"where {PART} was next"],
            id="a-part-not-named-as-split-names-it",
        ),
        pytest.param(  # announced small, then 64 MiB where it was
            "split",
            f"#!/bin/sh\ncat > /dev/null\nhead -c 67108864 /dev/urandom > {PART}\n"
            f'echo "::hbtui-part:: {PART} 1000"\nwhile [ -e {PART} ]; do sleep 0.05; done\n',
            ["grew past the 1,000 bytes it announced"],
            id="a-part-larger-than-announced",
        ),
        pytest.param(
            "tar", "#!/bin/sh\nexit 0\n", ["sent for its /data is empty"], id="tar-writes-nothing"
        ),
        pytest.param(
            "tar",
            "#!/bin/sh\necho 'not a tar at all'\n",
            ["sent for its /data is not a tar"],
            id="tar-writes-junk",
        ),
    ],
)
def test_a_save_whose_tools_lie_is_refused_in_one_line(
    sim_env, hbtui_home, box, tmp_path, tool, script, words
) -> None:
    (hbtui_home / "config.toml").write_text("[archive]\npart_size_mib = 1\n")
    shadow(sim_env, f"/usr/local/bin/{tool}", script)
    out = tmp_path / "out"
    out.mkdir()
    target = out / "b1.hbx"
    one_line_error(save(sim_env, target), *words)
    assert list(out.iterdir()) == []  # no archive, no temporary file beside it
    assert ls(sim_env)["b1"]["state"] == "running"  # resumed
    as_root(sim_env, "b1", f"rm /usr/local/bin/{tool}")
    ok(save(sim_env, target))


@pytest.mark.parametrize(
    "script",
    [
        pytest.param("#!/bin/sh\nexec sleep 600\n", id="tar-sleeps"),
        pytest.param(  # a drip of repeats and words: talk, but no progress
            "#!/bin/sh\nwhile :; do echo '::hbtui-read:: 5'; echo 'tar: still here'; sleep 1; done\n",
            id="tar-drips",
        ),
    ],
)
def test_a_save_whose_box_goes_silent_is_given_up_at_the_idle_bound(
    sim_env, box, tmp_path, script
) -> None:
    shadow(sim_env, "/usr/local/bin/tar", script)
    out = tmp_path / "out"
    out.mkdir()
    began = time.monotonic()
    done = save({**sim_env, "HBTUI_BOX_IDLE_SECONDS": "3"}, out / "b1.hbx")
    assert time.monotonic() - began < 120  # it was held until killed (200 s and more)
    one_line_error(done, "box b1 went silent while packing its /data", "3 s")
    assert list(out.iterdir()) == []
    assert ls(sim_env)["b1"]["state"] == "running"  # resumed
