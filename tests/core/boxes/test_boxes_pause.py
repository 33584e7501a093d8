"""Pause and resume a box through the CLI, against the simulator (which freezes every
process of a paused machine): the same processes go on, tmux and all; `ls`, `inspect`
show it paused; `start` resumes it; what a paused box cannot do says what to do."""

from __future__ import annotations

import json

import pytest

from support import SIM_RECIPE
from support.cli import hbtui, in_box, ls_json, run_ok

pytestmark = pytest.mark.sim

# In tmux "main", as an agent would run: a loop that answers each line written to a fifo
# (a read the freeze cut short, empty, is not answered: the simulator's freezer, not a VM's).
LOOP = (
    "mkfifo ~/in; tmux new-session -d -s main -x 80 -y 20 "
    "'while :; do read line < ~/in && echo \"got $line\" >> ~/out; done'"
)
PIDS = "tmux display -p -t main '#{pid} #{pane_pid}'"


def one_error_line(done, *words: str) -> str:
    assert done.returncode != 0, done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def state(env) -> str:
    [box] = ls_json(env)
    return str(box["state"])


def answered(env, line: str) -> str:
    in_box("b1", "sh", "-c", f"echo {line} > ~/in", env=env)
    return in_box("b1", "tail", "-n", "1", "/data/home/agent/out", env=env)


def test_pause_keeps_the_processes_and_resume_or_start_goes_on(sim_env):
    run_ok("new", "b1", "--recipe", str(SIM_RECIPE), "-q", env=sim_env)
    in_box("b1", "sh", "-c", LOOP, env=sim_env)
    assert answered(sim_env, "one") == "got one"
    before = in_box("b1", "sh", "-c", PIDS, env=sim_env)

    out = run_ok("pause", "b1", env=sim_env)
    assert "✓ b1 paused: paused" in out
    assert state(sim_env) == "paused"
    assert "paused" in run_ok("ls", env=sim_env).splitlines()[1]
    details = json.loads(run_ok("inspect", "b1", "--json", env=sim_env))
    assert details["box"]["state"] == "paused", details["box"]
    assert "paused already" in run_ok("pause", "b1", env=sim_env)

    # What a paused box cannot do is one line saying what to do; nothing changes.
    for verb in (["stop", "b1"], ["repair", "b1"], ["branch", "b1", "b2"]):
        one_error_line(hbtui(*verb, env=sim_env), "is paused", "hbtui resume b1")
    one_error_line(
        hbtui("credentials", "b1", "add", "anthropic", env=sim_env), "is paused", "resume"
    )
    one_error_line(
        hbtui("save", "b1", env=sim_env, passphrase="pass phrase for tests"), "is paused"
    )
    assert state(sim_env) == "paused"

    assert "✓ b1 resumed: running" in run_ok("resume", "b1", env=sim_env)
    assert in_box("b1", "sh", "-c", PIDS, env=sim_env) == before
    assert answered(sim_env, "two") == "got two"
    assert "running, not paused" in run_ok("resume", "b1", env=sim_env)

    # `start` of a paused box resumes it: the same processes, not a fresh boot.
    run_ok("pause", "b1", env=sim_env)
    assert "✓ b1 started: running" in run_ok("start", "b1", env=sim_env)
    assert in_box("b1", "sh", "-c", PIDS, env=sim_env) == before
    assert answered(sim_env, "three") == "got three"

    run_ok("stop", "b1", env=sim_env)
    one_error_line(hbtui("pause", "b1", env=sim_env), "is stopped", "only a running box")
    one_error_line(hbtui("resume", "b1", env=sim_env), "not paused", "hbtui start b1")


def test_pause_and_resume_several_boxes_and_rm_of_a_paused_one(sim_env):
    for name in ("b1", "b2"):
        run_ok("new", name, "--recipe", str(SIM_RECIPE), "-q", env=sim_env)
    done = hbtui("pause", "b1", "nosuch", "b2", "--json", env=sim_env)
    # One that fails is one line; the others are still paused, and --json lists them.
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: no box named 'nosuch' (see: hbtui ls)"], done.stderr
    assert [b["name"] for b in json.loads(done.stdout)] == ["b1", "b2"]
    assert {b["name"]: b["state"] for b in ls_json(sim_env)} == {"b1": "paused", "b2": "paused"}

    run_ok("resume", "b2", env=sim_env)
    assert {b["name"]: b["state"] for b in ls_json(sim_env)} == {"b1": "paused", "b2": "running"}
    # The engine deletes a paused machine: rm needs no resume first.
    run_ok("rm", "b1", "--force", env=sim_env)
    assert [b["name"] for b in ls_json(sim_env)] == ["b2"]
