"""The box recipe (provision/, guest/) and the simulator recipe (tests/recipes/sim/).

Static checks and argument handling only; the lifecycle tests run the recipes for real
inside the simulator.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from hbtui.core.recipe_check import SOURCES, read_pins

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT
SIM = ROOT / "tests" / "recipes" / "sim"
RECIPES = {"real": REAL, "sim": SIM}
MARKER = re.compile(r"^::hbtui:: step (\d+)/(\d+) ([a-z0-9][a-z0-9-]*)$")
SHARED_STEPS = [
    "agent-user",
    "data-skeleton",
    "guest-files",
    "env-file",
    "agent-settings",
    "verify",
    "finish",
]
AS_AGENT = ROOT / "guest" / "hb-as-agent"


def shell_files() -> list[Path]:
    """Every shell script of the recipes: *.sh plus files with a sh/bash shebang."""
    found = []
    for folder in (ROOT / "provision", ROOT / "guest", SIM / "provision"):
        for path in sorted(folder.iterdir()):
            if path.is_symlink() or not path.is_file():
                continue
            first = path.read_text(errors="replace").split("\n", 1)[0]
            if path.suffix == ".sh" or re.match(r"#!.*\b(ba)?sh\b", first):
                found.append(path)
    return found


def test_shell_files_found() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in shell_files()}
    assert {
        "provision/provision.sh",
        "provision/lib.sh",
        "guest/hb",
        "guest/hb-workload",
        "guest/hb-as-agent",
        "guest/profile.sh",
        "tests/recipes/sim/provision/provision.sh",
    } <= names


@pytest.mark.parametrize("path", shell_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_shellcheck(path: Path) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    proc = subprocess.run(
        ["shellcheck", "-x", path.name], cwd=path.parent, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", shell_files(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_bash_syntax(path: Path) -> None:
    proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def dry_run(recipe: Path, script: str = "provision.sh") -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HB_")}
    env["HB_DRY_RUN"] = "1"
    proc = subprocess.run(
        ["bash", str(recipe / "provision" / script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    return proc.stdout.splitlines()


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_step_markers_numbered(name: str) -> None:
    lines = dry_run(RECIPES[name])
    assert lines, "the dry run printed no step markers"
    steps = []
    for i, line in enumerate(lines, start=1):
        m = MARKER.match(line)
        assert m, f"not a step marker: {line!r}"
        assert int(m.group(1)) == i
        assert int(m.group(2)) == len(lines)
        steps.append(m.group(3))
    assert len(set(steps)) == len(steps), steps
    assert steps[-1] == "finish"


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_recipes_share_the_guest_steps(name: str) -> None:
    steps = [MARKER.match(line).group(3) for line in dry_run(RECIPES[name])]
    assert [s for s in steps if s in SHARED_STEPS] == SHARED_STEPS


def test_real_recipe_steps() -> None:
    steps = [MARKER.match(line).group(3) for line in dry_run(REAL)]
    assert steps == [
        "base-packages",
        "agent-user",
        "data-skeleton",
        "node",
        "npm-tools",
        "uv",
        "hermes",
        "guest-files",
        "env-file",
        "agent-settings",
        "verify",
        "finish",
    ]


def test_sim_recipe_links_to_the_real_files() -> None:
    assert (SIM / "guest").is_symlink()
    assert (SIM / "guest").resolve() == (ROOT / "guest").resolve()
    lib = SIM / "provision" / "lib.sh"
    assert lib.is_symlink() and lib.resolve() == (ROOT / "provision" / "lib.sh").resolve()


def test_guest_files_exist_and_are_executable() -> None:
    for name in ("hb", "hb-workload", "hb-as-agent", "hb-agent-hook", "hb-agents"):
        path = ROOT / "guest" / name
        assert path.is_file() and os.access(path, os.X_OK), name
    for name in ("profile.sh", "tmux.conf"):
        assert (ROOT / "guest" / name).is_file()


def test_every_pinned_version_reaches_the_env_file() -> None:
    keys = [
        line.split("=", 1)[0]
        for line in (ROOT / "provision" / "versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert "EXECUTOR_VERSION" in keys and "CODEX_VERSION" in keys
    text = (ROOT / "provision" / "provision.sh").read_text()
    m = re.search(r'^HB_VERSION_KEYS="([^"]*)"', text, re.M)
    assert m and sorted(m.group(1).split()) == sorted(keys)


def test_the_pins_are_exact_versions() -> None:
    """provision.sh compares what is installed with each pin as a string (`have == ver`,
    `uv $UV_VERSION*`, `hermes-agent==`): a range or a tag would install something other
    than the pin says, or install again on every repair."""
    pins = {p.key: p.value for p in read_pins(ROOT)}
    for key in SOURCES:
        assert re.fullmatch(r"\d+\.\d+\.\d+", pins[key]), key
    assert re.fullmatch(r"3\.\d+", pins["HERMES_PYTHON_VERSION"])
    # claude-code 2.1 declares node >= 22; its session files need 2.1.139 or newer.
    node = int(pins["NODE_MAJOR"])
    text = (ROOT / "provision" / "provision.sh").read_text()
    m = re.search(r"^NODE_MIN_MAJOR=(\d+)\b", text, re.M)
    assert m and 22 <= int(m.group(1)) <= node
    claude = tuple(int(n) for n in pins["CLAUDE_CODE_VERSION"].split("."))
    assert claude >= (2, 1, 139)


# ---- hb-as-agent: argument handling through --dry-run (no user switch happens) ----------


def as_agent(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(AS_AGENT), *args], capture_output=True, text=True, timeout=30
    )


def tail_after_inner(argv: list[str]) -> list[str]:
    """The part after `bash --login -c INNER hb-as-agent`: [cwd, CMD...]."""
    i = argv.index("-c")
    assert argv[i - 2 : i] == ["bash", "--login"]
    assert argv[i + 2] == "hb-as-agent"
    return argv[i + 3 :]


def test_as_agent_runs_command_in_workspace_with_clean_env() -> None:
    proc = as_agent("--dry-run", "--", "echo", "hi", "a b", "")
    assert proc.returncode == 0, proc.stderr
    argv = proc.stdout.split("\n")[:-1]
    if os.geteuid() != 0 or argv[0] in ("setpriv", "runuser"):
        assert argv[0] in ("setpriv", "runuser")
        assert "agent" in argv[:6]
    assert argv[argv.index("env") : argv.index("env") + 2] == ["env", "-i"]
    assert "HOME=/data/home/agent" in argv and "USER=agent" in argv
    assert tail_after_inner(argv) == ["/data/home/agent/workspace", "echo", "hi", "a b", ""]


def test_as_agent_without_command_is_a_login_shell() -> None:
    proc = as_agent("--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert tail_after_inner(proc.stdout.split("\n")[:-1])[1:] == ["bash", "--login"]


def test_as_agent_tmux_attaches_or_creates_main() -> None:
    proc = as_agent("--tmux", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert tail_after_inner(proc.stdout.split("\n")[:-1])[1:] == [
        "tmux",
        "new-session",
        "-A",
        "-s",
        "main",
    ]


def test_as_agent_cwd_and_dash_commands() -> None:
    proc = as_agent("--cwd", "/data/home/agent", "--dry-run", "--", "--weird", "-x")
    assert proc.returncode == 0, proc.stderr
    assert tail_after_inner(proc.stdout.split("\n")[:-1]) == ["/data/home/agent", "--weird", "-x"]
    proc = as_agent("--cwd=/srv", "--dry-run", "ls", "--tmux")  # options end at CMD
    assert tail_after_inner(proc.stdout.split("\n")[:-1]) == ["/srv", "ls", "--tmux"]


@pytest.mark.parametrize("args", [["--tmux", "ls"], ["--bogus"], ["--cwd"]])
def test_as_agent_rejects_bad_arguments(args: list[str]) -> None:
    proc = as_agent(*args)
    assert proc.returncode == 125
    assert proc.stdout == ""
    assert "hb-as-agent:" in proc.stderr


def test_as_agent_help() -> None:
    proc = as_agent("--help")
    assert proc.returncode == 0 and "usage: hb-as-agent" in proc.stdout


def test_as_agent_inner_shell_keeps_status_stdin_and_args(tmp_path: Path) -> None:
    """Run the generated command without its user switch: exit status, stdin and arguments
    pass through the login shell unchanged."""
    argv = as_agent(
        "--cwd",
        str(tmp_path),
        "--dry-run",
        "--",
        "sh",
        "-c",
        'cat > got; printf "%s|" "$@" >> got; pwd >> got; exit 7',
        "sh",
        "a b",
        "$x",
    ).stdout.split("\n")[:-1]
    argv = argv[argv.index("env") :]
    i = argv.index("HOME=/data/home/agent")
    argv[i] = f"HOME={tmp_path}"  # a login shell must not read the real agent's files
    proc = subprocess.run(argv, input="from stdin\n", capture_output=True, text=True, timeout=30)
    assert proc.returncode == 7, proc.stderr
    assert (tmp_path / "got").read_text() == f"from stdin\na b|$x|{tmp_path}\n"


# ---- hb / hb-workload command lines --------------------------------------------------------


def test_hb_unknown_command_fails() -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "guest" / "hb"), "frobnicate"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "unknown command" in proc.stderr


def test_hb_help_lists_the_commands() -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "guest" / "hb"), "help"], capture_output=True, text=True
    )
    assert proc.returncode == 0
    for verb in ("status", "up", "down", "quiesce", "resume", "doctor", "logs", "wire-mcp"):
        assert re.search(rf"^\s+{verb}\b", proc.stdout, re.M), verb


@pytest.mark.parametrize("args", [[], ["notaport"], ["0"], ["70000"], ["1", "2"]])
def test_hb_workload_rejects_bad_port(args: list[str]) -> None:
    proc = subprocess.run(
        ["bash", str(ROOT / "guest" / "hb-workload"), *args],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert proc.returncode == 2 and "usage: hb-workload PORT" in proc.stderr


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_every_recipe_has_a_per_box_step_and_a_generalize_step(name: str) -> None:
    """What bases need: first-boot.sh gives a box made from a base its identity and marks
    it provisioned last; generalize.sh removes what is per box."""
    first_boot = dry_run(RECIPES[name], "first-boot.sh")
    assert [MARKER.match(line).group(3) for line in first_boot] == [
        "box-identity",
        "data-skeleton",
        "agent-settings",
        "finish",
    ]
    generalize = dry_run(RECIPES[name], "generalize.sh")
    assert [MARKER.match(line).group(3) for line in generalize] == ["forget-identity"]


def test_the_per_box_paths_cover_logins_history_and_executor_state() -> None:
    text = (ROOT / "provision" / "lib.sh").read_text()
    listed = text.split("HB_PER_BOX_PATHS=(", 1)[1].split("\n)", 1)[0]
    for path in (".executor", ".claude", ".codex/auth.json", ".config/gh", ".bash_history"):
        assert path in listed, path


@pytest.mark.parametrize(
    ("line", "step"),
    [
        ("::hbtui:: step 2/5 installing node", (2, 5, "installing node")),
        (f"::hbtui:: step {'9' * 5000}/3 x", None),  # int() of it raised: a traceback
        ("::hbtui:: step ١/3 x", None),  # not ASCII digits: a log line
    ],
)
def test_a_step_marker_is_small_ascii_numbers_else_a_log_line(line: str, step) -> None:
    from hbtui.core.foundation.recipe import parse_marker

    found = parse_marker(line)
    assert (found and (found.index, found.total, found.name)) == step
