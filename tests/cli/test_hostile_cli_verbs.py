"""A box whose agent and root are hostile, through every CLI verb that shows what it says.

The corpus (tests/support/hostile.py) is planted in each box-side source the CLI reads:
the workload and provisioning output, the file names its credential check finds, its
agents' status (`hb agents`, replaced by root), the commit subjects, branch and file names
of its clone, the names and link targets in its /data (save, extract), its agent's last
words (new, try). Every verb that shows them runs as a user runs it, the installed `hbtui`
writing to a pipe: its output is plain, markup shows as text, its exit status is sane and
there is no traceback. The raw-terminal paths (`logs`, `credentials`) run in tmux too.
One box, and a try of one, serve every test; a test that changes the box puts it back.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from support import HBTUI_BIN, recipe_with
from support.cli import as_root, hbtui, machines, one_line_error
from support.hostile import (
    BIDI,
    C1,
    CLEAR,
    CR,
    DCS,
    EVERYTHING,
    HUGE_SGR,
    MARKUP_CLICK,
    MARKUP_CLOSE,
    OSC0,
    OSC52,
    RICH_LINK,
    UP_ERASE,
    unsafe,
)
from support.tmux import SOCKET, tmux, wait_screen
from support.work import box_sh, git, host_repo, stand_in

pytestmark = [pytest.mark.sim, pytest.mark.timeout(900)]

MARK = "hostile-"
PASS = "hostile box passphrase"
HOSTILE = "/opt/hostile"  # root's files in the box, which its agent may read
BOUND = 120  # seconds any one verb may take


def said(where: str) -> str:
    """Hostile text from one source, marked at both ends (a screen clear in its middle
    leaves only its end on a screen)."""
    return f"{MARK}{where} {EVERYTHING} {MARK}{where}-end"


# What a file or branch name can hold: no slash, at most 255 bytes; git refuses control
# characters in a branch name, but not bidi overrides or the C1 range.
NAME = f"{MARK}name {OSC52}{OSC0}{DCS}{CLEAR}{UP_ERASE}{BIDI}{C1}{CR} [bold]y"
BRANCH = f"{MARK}branch\u202eevil\u202c\u009b2Jx"
LINK_TARGET = "/" + said("link").replace(HUGE_SGR, "")  # a link holds at most 4 KiB
KEY_LINE = "export ANTHROPIC_API_KEY=sk-ant-api03-typed-into-the-box-0123456789\n"
# The box's claude: it prints the corpus and ends (new and try report its last words).
AGENT = stand_in(f"cat {HOSTILE}/agent", "exit 3")


def plain(done: subprocess.CompletedProcess[str], *, codes: tuple[int, ...] = (0,)) -> str:
    """Its output (stdout, then stderr), which must hold nothing that acts on a terminal."""
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode in codes, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    assert unsafe(done.stdout) == [], done.stdout[-2000:]
    assert unsafe(done.stderr) == [], done.stderr[-2000:]
    return done.stdout + done.stderr


def shown(output: str, where: str, *, whole: bool = True) -> None:
    """The text from `where` reached the output; `whole` (not cut to a line's bound): all
    of its markup, as text."""
    assert f"{MARK}{where}" in output, output[-3000:]
    for literal in (MARKUP_CLICK, MARKUP_CLOSE, RICH_LINK) if whole else ():
        assert literal in output, (literal, output[-3000:])


def run(env: dict[str, str], *args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    return hbtui(*args, env=env, timeout=BOUND, **kwargs)


def put(env: dict[str, str], path: str, data: str, *, owner: str = "root") -> None:
    """A file in box b1, written by root (its path is $1: any bytes) and given to `owner`."""
    script = 'mkdir -p "${1%/*}" && cat > "$1" && chown "$2": "$1" && chmod 644 "$1"'
    done = subprocess.run(
        [
            env["HBTUI_SMOLVM"], "--state-dir", env["HBTUI_SMOLVM_STATE_DIR"], "machine", "exec",
            "--name", "b1", "-i", "--", "sh", "-c", script, "put", path, owner,
        ],
        input=data.encode(), capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


class Box(NamedTuple):
    env: dict[str, str]
    folder: Path
    repo: Path
    made: subprocess.CompletedProcess[str]  # `new b1 --repo ... --agent claude`
    tried: subprocess.CompletedProcess[str]  # `try 1 t --repo ...`


@pytest.fixture(scope="module")
def box(tmp_path_factory: pytest.TempPathFactory, sim_smolvm: str) -> Iterator[Box]:
    folder = tmp_path_factory.mktemp("hostile")
    (folder / "home").mkdir()
    (folder / "state").mkdir()
    recipe = recipe_with(
        folder,
        f'{AGENT}\ninstall -D -m 644 "$HB_RECIPE_DIR/provision/hostile-agent" {HOSTILE}/agent\n'
        f'cat "$HB_RECIPE_DIR/provision/hostile"',
    )
    (recipe / "provision" / "hostile").write_text(said("provisioning") + "\n")
    (recipe / "provision" / "hostile-agent").write_text(said("agent") + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HBTUI_", "BOX_PASS"))}
    env.update(
        HBTUI_HOME=str(folder / "home"),
        HBTUI_SMOLVM=sim_smolvm,
        HBTUI_SMOLVM_STATE_DIR=str(folder / "state"),
        HBTUI_RECIPE=str(recipe),
    )
    repo = host_repo(folder)
    made = hbtui("new", "b1", "--repo", str(repo), "--task", "x", "--agent", "claude", env=env)
    tried = hbtui("try", "1", "t", "--repo", str(repo), "--task", "x", env=env)
    _plant(env)
    try:
        yield Box(env, folder, repo, made, tried)
    finally:
        for name in machines(env):
            subprocess.run(
                [sim_smolvm, "--state-dir", env["HBTUI_SMOLVM_STATE_DIR"], "machine", "delete",
                 "--name", name, "-f"],
                capture_output=True,
            )  # fmt: skip


def _plant(env: dict[str, str]) -> None:
    """The corpus in box b1, as its agent and its root leave it."""
    # The workload's output (root writes to the engine's log through the workload's fd).
    workload = f"{said('workload')}\n\x1b[31mred-line\x1b[0m\n{HUGE_SGR}\n"
    as_root(env, "b1", "cat >> /proc/1/fd/1", input=workload.encode())
    # Key files where the credential check looks, named by the agent and by root.
    put(env, f"/data/home/agent/.config/hermes-box/{NAME}.env", KEY_LINE, owner="agent")
    put(env, f"/etc/profile.d/{NAME}.sh", KEY_LINE)
    # The clone: a branch, a file and a commit of the agent's; a link out of /data.
    for what, text in (
        ("name", NAME), ("branch", BRANCH), ("subject", said("commit")),
        ("body", said("patch") + "\n"), ("target", LINK_TARGET),
    ):  # fmt: skip
        put(env, f"{HOSTILE}/{what}", text)
    box_sh(
        env,
        "b1",
        f'git checkout -q -b "$(cat {HOSTILE}/branch)"\n'
        f'cat {HOSTILE}/body > "$(cat {HOSTILE}/name)"\n'
        f"git add -A && git -c user.name=a -c user.email=a@b commit -q -F {HOSTILE}/subject\n"
        f'ln -s "$(cat {HOSTILE}/target)" "$HOME/$(cat {HOSTILE}/name)-link"',
    )


# -- new, try: the agent's last words, the provisioning output ------------------------


def test_new_and_try_show_a_hostile_agent_and_recipe_output_as_text(box: Box):
    made = plain(box.made, codes=(1,))  # its agent ended: the box stays, made and ready
    shown(made, "provisioning")  # the recipe's output, as progress lines
    shown(made, "agent", whole=False)  # its last words, as one line of the error
    assert json.loads(run(box.env, "ls", "--json").stdout)[0]["provisioning"] == "ready"

    shown(plain(box.tried, codes=(1,)), "agent", whole=False)
    for args in (("try", "ls", "t"), ("try", "ls", "t", "--json")):
        shown(plain(run(box.env, *args)), "agent", whole=False)


# -- logs ----------------------------------------------------------------------------


def test_logs_show_the_workload_and_provisioning_output_plain(box: Box):
    for args in (("logs", "b1"), ("logs", "b1", "--tail", "5")):
        out = plain(run(box.env, *args))
        shown(out, "workload")
        assert "red-line" in out and "big" in out  # colours and all: a pipe gets plain text
    shown(plain(run(box.env, "logs", "b1", "--provision")), "provisioning")

    follow = subprocess.Popen(
        [HBTUI_BIN, "logs", "b1", "-f"], env=box.env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        lines = []
        while not any("red-line" in line for line in lines):
            line = follow.stdout.readline()
            assert line, "logs -f ended before the workload's lines"
            lines.append(line)
        follow.send_signal(signal.SIGINT)
        assert follow.wait(timeout=30) == 0
    finally:
        follow.kill()
    out = "".join(lines) + follow.stdout.read() + follow.stderr.read()
    assert unsafe(out) == [] and "Traceback" not in out
    shown(out, "workload")


# -- credentials, egress -------------------------------------------------------------


def test_credentials_name_the_box_files_plainly(box: Box):
    out = plain(run(box.env, "credentials", "b1"))
    assert out.count(f"{MARK}name") == 2 and "[bold]y" in out, out
    report = json.loads(plain(run(box.env, "credentials", "b1", "--json")))
    found = [line for line in report["plaintext"] if MARK in line]
    assert len(found) == 2 and all(unsafe(line) == [] for line in found), found
    plain(run(box.env, "egress", "b1"))


# -- diff, pull ----------------------------------------------------------------------


def test_diff_shows_commits_branch_files_and_patch_plain_and_pull_refuses_in_one_line(box: Box):
    out = plain(run(box.env, "diff", "b1"))
    shown(out, "commit")
    shown(out, "patch")
    assert f"{MARK}name" in out and f"{MARK}branch evil 2Jx" in out, out
    out = plain(run(box.env, "diff", "b1", "--stat"))
    assert f"{MARK}name" in out and "[bold]y" in out, out
    data = json.loads(plain(run(box.env, "diff", "b1", "--json")))
    assert data["branch"] == f"{MARK}branch evil 2Jx", data["branch"]
    assert unsafe(json.dumps(data, ensure_ascii=False)) == []

    refused = run(box.env, "pull", "b1")
    plain(refused, codes=(1,))
    one_line_error(refused, "refused")
    assert git(box.repo, "for-each-ref", "refs/remotes") == ""


# -- agents, approve, deny -----------------------------------------------------------

# Root's `hb`: its agents are what /opt/hostile says; every other command is the real one.
FAKE_HB = f"""#!/bin/sh
if [ "$1" = agents ]; then
    if [ -e {HOSTILE}/agents-fail ]; then cat {HOSTILE}/agents-stderr >&2; exit 1; fi
    case " $* " in
    *" decide "*" deny "*) cat {HOSTILE}/agents-stderr >&2; exit 3 ;;
    *" decide "*) echo '{{"via": "hook"}}'; exit 0 ;;
    *" --watch "*) cat {HOSTILE}/agents.json; echo; exec sleep 600 ;;
    *) cat {HOSTILE}/agents.json; exit 0 ;;
    esac
fi
exec /opt/hermes-box/bin/hb.real "$@"
"""


def _sessions() -> str:
    waiting = {
        "session_id": "hostile1", "agent": "claude", "status": "needs-you", "since": 1.7e9,
        "waiting_for": said("waiting"), "pane": "%1", "request": "abcd1234",
        "cwd": said("cwd"), "tokens": {"input": 1, "output": 2},
        "git": {"branch": said("git"), "changed": 1, "commits": 2},
    }  # fmt: skip
    broken = {"session_id": "hostile2", "agent": "codex", "status": "error", "error": said("err")}
    return json.dumps({"sessions": [waiting, broken]})


def test_agents_their_json_approve_and_deny_show_what_a_box_says_plainly(box: Box):
    env = box.env
    put(env, f"{HOSTILE}/agents.json", _sessions())
    put(env, f"{HOSTILE}/agents-stderr", said("stderr"))
    as_root(env, "b1", "cd /opt/hermes-box/bin && { [ -e hb.real ] || cp -p hb hb.real; }")
    put(env, "/opt/hermes-box/bin/hb", FAKE_HB)
    as_root(env, "b1", "chmod 755 /opt/hermes-box/bin/hb")
    try:
        for args in (("agents",), ("agents", "b1")):
            out = plain(run(env, *args))
            shown(out, "waiting")
            shown(out, "err")
        data = json.loads(plain(run(env, "agents", "b1", "--json")))
        [session, broken] = data[0]["sessions"]
        assert session["waiting_for"].startswith(f"{MARK}waiting "), session
        for value in (session["waiting_for"], session["cwd"], session["git"]["branch"]):
            assert value.startswith(MARK) and unsafe(value) == [], value
        assert "\u202e" not in json.dumps(data, ensure_ascii=False)
        assert broken["error"].startswith(f"{MARK}err ")
        shown(plain(run(env, "approve", "b1")), "waiting", whole=False)
        shown(plain(run(env, "deny", "b1"), codes=(1,)), "stderr", whole=False)
        watch = subprocess.Popen(
            [HBTUI_BIN, "agents", "--watch", "--json"], env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            first = ""
            while MARK not in first:
                line = watch.stdout.readline()
                assert line, "agents --watch ended"
                first += line
            watch.send_signal(signal.SIGINT)
            assert watch.wait(timeout=30) == 0
        finally:
            watch.kill()
        assert unsafe(first) == [], first
        # A box whose hb agents fails: its stderr is the row's error, as text.
        put(env, f"{HOSTILE}/agents-fail", "")
        shown(plain(run(env, "agents", "b1"), codes=(1,)), "stderr", whole=False)
        shown(plain(run(env, "agents", "--json"), codes=(0, 1)), "stderr", whole=False)
    finally:
        as_root(env, "b1", f"rm -f {HOSTILE}/agents-fail; cd /opt/hermes-box/bin && mv hb.real hb")


# -- repair, inspect, ls, exec: provisioning output and a failure of the box's making -------

# Root's python3 in the box says its piece whenever it starts (the recipe's steps run
# python3 as root): the corpus, a colour of 5,000 digits, step markers of its own.
CUSTOMIZE = f"""
import os, sys
sys.stdout.write(open("{HOSTILE}/provision").read())
sys.stdout.write("::hbtui:: step " + "0" * 5000 + "1/9 huge\\n")
sys.stdout.write("::hbtui:: step 4/9 " + open("{HOSTILE}/step").read() + "\\n")
sys.stdout.flush()
if os.path.exists("{HOSTILE}/fail"):
    os._exit(1)
"""
SITE = "/root/.local/lib/python3.{minor}/site-packages/usercustomize.py"


def test_repair_and_what_shows_a_failed_box_keep_its_words_plain(box: Box):
    env = box.env
    minor = as_root(env, "b1", "python3 -c 'import sys; print(sys.version_info[1])'").strip()
    site = SITE.format(minor=minor)
    put(env, f"{HOSTILE}/provision", said("repair") + "\n" + HUGE_SGR + "\n")
    put(env, f"{HOSTILE}/step", said("step").replace(HUGE_SGR, ""))
    put(env, site, CUSTOMIZE)
    try:
        out = plain(run(env, "repair", "b1"))
        shown(out, "repair")
        shown(out, "step", whole=False)
        shown(plain(run(env, "logs", "b1", "--provision")), "repair")

        put(env, f"{HOSTILE}/fail", "")
        failed = run(env, "repair", "b1")
        plain(failed, codes=(1,))
        shown(one_line_error(failed), "step", whole=False)
        for args in (("inspect", "b1"), ("inspect", "b1", "--json"), ("ls",), ("ls", "--json")):
            assert "failed" in plain(run(env, *args))
        refused = run(env, "exec", "b1", "--", "true")
        plain(refused, codes=(1,))
        one_line_error(refused, "failed")
    finally:
        as_root(env, "b1", f"rm -f {site} {HOSTILE}/fail")
    plain(run(env, "repair", "b1", "-q"))


# -- save, extract: names and link targets from the box's /data ----------------------------


def test_extract_names_the_box_files_and_links_plainly(box: Box):
    archive = box.folder / "b1.hbx"
    plain(run(box.env, "save", "b1", "-o", str(archive), passphrase=PASS))
    out = plain(run(box.env, "extract", str(archive), str(box.folder / "out"), passphrase=PASS))
    shown(out, "link")  # left out, named: it leads out of the folder
    assert f"{MARK}name" in out and "[bold]y-link" in out, out
    assert any(MARK in p.name for p in (box.folder / "out").rglob("*")), "the files came out"


# -- a real terminal: what reaches it is text; its title and clipboard stay ------------------


@pytest.mark.terminal
@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
@pytest.mark.parametrize("verb", ["logs", "credentials"])
def test_a_terminal_shows_the_box_text_and_keeps_its_title_and_clipboard(box: Box, verb: str):
    session = f"hostile-{verb}"
    tmux("-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "200", "-y", "50",
         "-e", "TERM=xterm-256color", "sh")  # fmt: skip
    try:
        tmux("set-option", "-g", "set-clipboard", "on")  # an OSC 52 would make a buffer
        title = tmux("display-message", "-p", "-t", session, "#{pane_title}")
        assigned = " ".join(f"{k}='{v}'" for k, v in box.env.items() if k.startswith("HBTUI_"))
        tmux("send-keys", "-t", session, "-l", f"env {assigned} {HBTUI_BIN} {verb} b1; echo END-$?")
        tmux("send-keys", "-t", session, "Enter")
        wait_screen(session, lambda s: re.search(r"END-\d", s), BOUND, f"hbtui {verb} to end")
        screen = tmux("capture-pane", "-p", "-J", "-t", session)  # wrapped lines joined
        assert "END-0" in screen and "Traceback" not in screen, screen
        assert tmux("display-message", "-p", "-t", session, "#{pane_title}") == title
        assert tmux("list-buffers") == ""
        if verb == "logs":  # all of the text, and its colours
            shown(screen, "workload")
            coloured = tmux("capture-pane", "-p", "-e", "-t", session)
            assert "\x1b[31mred-line" in coloured, coloured
        else:
            assert screen.count(f"{MARK}name") == 2 and "[bold]y" in screen, screen
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True)
