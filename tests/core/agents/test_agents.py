"""What a box says about its agents is untrusted: the parser and the ANSI filter (no box)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hbtui.boxtext import colours as keep_colours
from hbtui.boxtext import line as plain
from hbtui.core.agents import operations as agents
from hbtui.core.agents import sessions as agent_sessions
from hbtui.core.agents.sessions import AgentError, parse_listing, parse_session


def test_colours_and_text_pass():
    text = "plain \x1b[1;31mbold red\x1b[0m \x1b[38;2;1;2;3mtrue\x1b[m\ttab\nline"
    assert keep_colours(text) == text


@pytest.mark.parametrize(
    "sequence",
    [
        "\x1b]0;a title\x07",  # window title (OSC 0), BEL-terminated
        "\x1b]2;a title\x1b\\",  # title, ST-terminated
        "\x1b]52;c;ZXZpbA==\x07",  # clipboard write (OSC 52)
        "\x1b]8;;http://evil/\x1b\\",  # hyperlink
        "\x1b]9;notify\x07",  # desktop notification
        "\x1b[2J\x1b[H",  # clear the screen, cursor home
        "\x1b[10;5H",  # cursor position
        "\x1b[?1049h",  # alternate screen
        "\x1b[6n",  # make the terminal answer (cursor report)
        "\x1b[c",  # device attributes query
        "\x1bPq#0;2;0;0;0\x1b\\",  # DCS (sixel)
        "\x1b7\x1b8",  # save / restore the cursor
        "\x1b(0",  # character set switch
        "\x9b2J",  # 8-bit CSI
        "\x07\x08\x0d\x00",  # bell, backspace, carriage return, NUL
        "\x1b]0;never ends",  # an unterminated OSC eats the rest
    ],
)
def test_everything_but_colour_is_dropped(sequence):
    out = keep_colours(f"a{sequence}b")
    assert "\x1b" not in out and "\x9b" not in out and "\x07" not in out
    assert out.startswith("a") and "title" not in out and "evil" not in out


def test_plain_is_one_line_without_sequences():
    assert plain("rm -rf /\x1b[31m tmp\x1b]0;x\x07\nnext\tcol") == "rm -rf / tmp next col"


def entry(**fields):
    base = {
        "agent": "claude",
        "session_id": "b5e7604b-31aa-47cc-81ad-a85aaff8cea2",
        "status": "needs-you",
        "since": 1796150937.7,
        "waiting_for": "Bash: touch ran",
        "pane": "%0",
        "request": "a1b2c3d4e5f6",
        "cwd": "/data/home/agent/workspace",
        "tokens": {"input": 12, "output": 7},
        "git": {"branch": "main", "changed": 2, "commits": 1},
    }
    base.update(fields)
    return base


def test_a_good_session_is_read_whole():
    s = parse_session("b1", "local", entry())
    assert (s.status, s.waiting_for, s.pane, s.request) == (
        "needs-you",
        "Bash: touch ran",
        "%0",
        "a1b2c3d4e5f6",
    )
    assert (s.tokens_in, s.tokens_out, s.git.branch, s.git.changed, s.git.commits) == (
        12,
        7,
        "main",
        2,
        1,
    )


@pytest.mark.parametrize(
    "raw",
    [
        "not an object",
        entry(status="hacking"),
        entry(session_id="../../etc/passwd"),
        entry(session_id=7),
    ],
)
def test_a_session_that_breaks_the_schema_is_an_error_row(raw):
    assert parse_session("b1", "local", raw).status == "error"


def test_hostile_fields_are_neutralised():
    s = parse_session(
        "b1",
        "local",
        entry(
            waiting_for="Bash: \x1b]52;c;ZXZpbA==\x07ls\x1b[2J" + "x" * 10_000,
            pane="%0; rm -rf /",
            request="$(reboot)",
            since=float("inf"),
            tokens={"input": -5, "output": True},
            git={"branch": "\x1b[31mmain", "changed": "2", "commits": 1},
        ),
    )
    assert "\x1b" not in s.waiting_for and len(s.waiting_for) <= agent_sessions.TEXT_MAX
    assert s.pane == "" and s.request == "" and s.since is None
    assert s.tokens_in is None and s.tokens_out is None and s.git is None


def test_waiting_for_and_request_only_when_it_needs_you():
    s = parse_session("b1", "local", entry(status="working"))
    assert s.waiting_for == "" and s.request == ""


@pytest.mark.parametrize(
    "output",
    [
        b"not json at all",
        b"\xff\xfe",
        b"[]",
        b'{"sessions": "many"}',
        b" " * (agent_sessions.OUTPUT_MAX + 1),
    ],
)
def test_junk_answers_are_one_reason(output):
    with pytest.raises(AgentError):
        parse_listing("b1", "local", output)


def test_a_box_cannot_flood_the_listing():
    many = {"sessions": [entry(session_id=f"s{i:05d}") for i in range(1000)]}
    rows = parse_listing("b1", "local", json.dumps(many).encode())
    assert len(rows) == agent_sessions.SESSIONS_MAX


def test_skip_is_only_for_an_allow_list_box_with_managed_keys():
    from hbtui.core.keys import credentials as creds
    from hbtui.errors import UsageError

    anthropic = [creds.BUILT_IN["anthropic"]]
    assert creds.agent_permissions_for(None, creds.OPEN, []) == "ask"
    assert creds.agent_permissions_for("skip", creds.ALLOW_LIST, anthropic) == "skip"
    for egress, presets in ((creds.OPEN, anthropic), (creds.ALLOW_LIST, [])):
        with pytest.raises(UsageError, match="allow-list"):
            creds.agent_permissions_for("skip", egress, presets)
    with pytest.raises(UsageError):
        creds.agent_permissions_for("yolo", creds.ALLOW_LIST, anthropic)


def test_the_box_setting_reaches_the_recipe():
    from hbtui.core.foundation.registry import BoxRecord
    from hbtui.core.keys import credentials as creds

    assert creds.recipe_settings(BoxRecord("b1", 4800)) == {"HB_AGENT_PERMISSIONS": "ask"}
    skip = BoxRecord("b1", 4800, agent_permissions="skip")
    assert creds.recipe_settings(skip) == {"HB_AGENT_PERMISSIONS": "skip"}


def test_a_pane_of_100000_lines_is_cut_to_its_last_lines():
    lines = [f"\x1b[32mline {i}\x1b[0m \x1b]52;c;ZXZpbA==\x07" for i in range(100_000)]
    text = agents.screen_text("\n".join(lines).encode())
    assert len(text.encode()) <= agents.PANE_MAX
    assert text.splitlines()[-1] == "\x1b[32mline 99999\x1b[0m "
    assert text.splitlines()[0].startswith("\x1b[32mline ")  # whole lines only
    assert "ZXZpbA" not in text


@pytest.mark.skipif(
    shutil.which("node") is None or shutil.which("tmux") is None, reason="needs node and tmux"
)
def test_the_box_helper_captures_at_most_500_lines(tmp_path):
    """hb-agents itself caps a capture (here on the host, against a private tmux server)."""
    env = {**os.environ, "TMUX_TMPDIR": str(tmp_path), "HOME": str(tmp_path)}
    env.pop("TMUX", None)
    tmux = ["tmux", "-f", "/dev/null"]
    subprocess.run(
        [*tmux, "new-session", "-d", "-s", "tall", "-x", "80", "-y", "2000",
         "seq 100000; sleep 600"],
        env=env, check=True,
    )  # fmt: skip
    try:
        helper = Path(__file__).resolve().parents[3] / "guest" / "hb-agents"
        pane = subprocess.run(
            [*tmux, "list-panes", "-t", "tall", "-F", "#{pane_id}"],
            env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        for _ in range(100):
            shown = subprocess.run(
                ["node", str(helper), "pane", pane], env=env, capture_output=True, text=True
            )
            if "100000" in shown.stdout:
                break
        assert shown.returncode == 0, shown.stderr
        assert "100000" in shown.stdout and len(shown.stdout.split("\n")) <= 500
        bad = subprocess.run(["node", str(helper), "pane", "%0;rm"], env=env, capture_output=True)
        assert bad.returncode == 2
    finally:
        subprocess.run([*tmux, "kill-server"], env=env, capture_output=True)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "error: the text is empty: nothing sent (to press Enter alone: hbtui enter b1)"),
        ("  ", "error: the text is empty: nothing sent (to press Enter alone: hbtui enter b1)"),
        ("x" * 4097, "error: the text is 4097 characters, over 4096: nothing sent"),
        ("a\tb", "error: the text holds a control character (one line, no tabs): nothing sent"),
    ],
)
def test_send_says_what_is_wrong_with_the_text(hbtui_home, text, said):
    """`send b1 ""` said "the text is one line of up to 4096 characters, no control ones":
    true of every text, and not what was wrong. Checked before any box is looked at."""
    from support.cli import hbtui, one_line_error

    assert one_line_error(hbtui("send", "b1", text, env=dict(os.environ))) == said
