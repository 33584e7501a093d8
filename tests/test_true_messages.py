"""Messages that are true (issue 19, item 7): what hbtui says matches what happened."""

from __future__ import annotations

import json
import os
import signal
import subprocess

import pytest
from conftest import HBTUI_BIN, SIM_RECIPE

SIGPIPE_STATUS = 128 + signal.SIGPIPE


def with_reader_gone(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`hbtui ARGS | head -0`, without the race: the pipe's reader is closed before hbtui
    starts, so its first write to stdout finds nobody to read it."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [HBTUI_BIN, *args], stdout=write_end, stderr=subprocess.PIPE, text=True, env=env,
            timeout=300,
        )
    finally:
        os.close(write_end)


QUIET_WITHOUT_A_BOX = [
    ("config", "show"),
    ("config", "path"),
    ("doctor",),
    ("doctor", "--json"),
    ("ls",),
    ("ls", "--json"),
    ("ports",),
    ("ports", "--json"),
    ("version",),
    ("base", "ls"),
    ("base", "ls", "--json"),
    ("secrets", "ls"),
    ("secrets", "ls", "--json"),
    ("hosts", "ls"),
    ("hosts", "ls", "--json"),
]


@pytest.mark.sim
@pytest.mark.parametrize("argv", QUIET_WITHOUT_A_BOX, ids=" ".join)
def test_a_reader_that_leaves_ends_hbtui_quietly(sim_env, argv):
    done = with_reader_gone(*argv, env=sim_env)
    assert (done.returncode, done.stderr) == (SIGPIPE_STATUS, "")


@pytest.mark.parametrize("argv", [("--help",), ("ls", "--help"), ("base", "--help")], ids=" ".join)
def test_help_into_a_closed_pipe_is_quiet(hbtui_home, argv):
    done = with_reader_gone(*argv, env=dict(os.environ))
    assert done.stderr == "" and done.returncode in (0, SIGPIPE_STATUS)


def test_an_error_is_still_told_when_stdout_is_gone(hbtui_home):
    done = with_reader_gone("inspect", "nope", env=dict(os.environ))
    assert done.returncode == 1 and done.stderr == "error: no box named 'nope' (see: hbtui ls)\n"


@pytest.mark.sim
def test_an_operation_whose_reader_leaves_still_ends_whole(sim_env):
    """`hbtui new web | head -1`: the progress has nowhere to go, the box is made all the
    same (never half-made) and its status says so; what the box commands print then is
    quiet too."""
    made = with_reader_gone("new", "web", "--recipe", str(SIM_RECIPE), env=sim_env)
    assert (made.returncode, made.stderr) == (0, "")
    listed = subprocess.run(
        [HBTUI_BIN, "ls", "--json"], env=sim_env, capture_output=True, text=True, check=True
    )
    [box] = json.loads(listed.stdout)
    assert (box["name"], box["provisioning"]) == ("web", "ready")
    for argv in (("inspect", "web"), ("ls",), ("logs", "web", "--provision"), ("ports",)):
        done = with_reader_gone(*argv, env=sim_env)
        assert (done.returncode, done.stderr) == (SIGPIPE_STATUS, ""), argv
