"""The CLI's side of the door for box text, without a box: an error, a progress line, a
step's name in a bar, a check's detail, a refused connection the engine recorded. Each
quotes what a box said; each is printed plain, its markup as text
(tests/cli/test_hostile_cli_verbs.py walks the verbs with a hostile box)."""

from __future__ import annotations

import io
import os

from rich.console import Console

from hbtui import boxtext
from hbtui.checks import Check
from hbtui.cli.output import print_checks, print_error
from hbtui.cli.progress import ConsoleReporter, LineReporter
from hbtui.core.boxes.operations import _plain_event
from hbtui.core.foundation.recipe import parse_marker
from hbtui.errors import HbtuiError
from hbtui.events import LogLine, Notice, Phase, Transfer

from support.cli import hbtui, ok
from support.hostile import EVERYTHING, MARKUP_CLICK, MARKUP_CLOSE, RICH_LINK, unsafe


def file_console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=10_000, soft_wrap=True, highlight=False), out


def as_text(output: str) -> None:
    assert unsafe(output) == [], output
    for literal in (MARKUP_CLICK, MARKUP_CLOSE, RICH_LINK):
        assert literal in output, (literal, output)


def test_an_error_that_quotes_a_box_is_one_plain_line_and_its_hint_another(capsys):
    print_error(HbtuiError(f"the box said: {EVERYTHING}", hint=f"its hint: {EVERYTHING}"))
    err = capsys.readouterr().err
    as_text(err)
    assert [line.split(":")[0] for line in err.splitlines()] == ["error", "its hint"], err


def test_progress_shows_phases_notices_steps_and_log_lines_of_a_box_as_text():
    console, out = file_console()
    step = parse_marker(f"::hbtui:: step 1/2 {EVERYTHING}")
    assert step is not None
    with ConsoleReporter(console) as report:
        report(Phase(EVERYTHING))
        report(Notice(EVERYTHING))
        report(LogLine(boxtext.colours(EVERYTHING)))  # as the core gives a box's line
        report(step)
        report(Transfer(1, 2, f"saving {MARKUP_CLOSE}"))  # the core's words, markup as text
        console.print(report.progress)  # a bar's description is markup: the name is escaped
        console.print(report.bytes)
    shown = out.getvalue()
    assert not report.silenced
    as_text(shown)
    assert shown.count(MARKUP_CLICK) == 5 and f"saving {MARKUP_CLOSE}" in shown, shown


def test_progress_to_a_pipe_is_the_same_lines_as_plain_text():
    """A pipe or a file gets progress without rich: each event one line, what a box said
    in it as text (its colours gone), as the terminal shows it without its styles."""
    out = io.StringIO()
    step = parse_marker(f"::hbtui:: step 1/2 {EVERYTHING}")
    assert step is not None
    with LineReporter(out) as report:
        report(Phase(EVERYTHING))
        report(Notice(EVERYTHING))
        report(LogLine(boxtext.colours(EVERYTHING)))
        report(step)
        report(Transfer(1, 2, f"saving {MARKUP_CLOSE}"))
    shown = out.getvalue()
    as_text(shown)
    assert "\x1b" not in shown and shown.count(MARKUP_CLICK) == 4, shown
    assert [line[:2] for line in shown.splitlines()[:2]] == ["• ", "! "], shown
    assert "step 1/2 " in shown and "saving" not in shown, shown
    quiet = io.StringIO()
    with LineReporter(quiet, show_logs=False) as report:
        report(LogLine("a box's line"))
    assert quiet.getvalue() == ""


def test_a_step_marker_with_a_number_no_step_count_needs_is_a_line_not_a_crash():
    assert parse_marker("::hbtui:: step " + "0" * 5000 + "1/9 huge") is None
    assert parse_marker("::hbtui:: step 1/" + "9" * 5000 + " huge") is None
    step = parse_marker("::hbtui:: step 2/9 \x1b]0;title\x07deps\u202e")
    assert step is not None and (step.index, step.total, step.name) == (2, 9, "deps")


def test_a_check_whose_detail_quotes_a_host_is_printed_plain():
    console, out = file_console()
    print_checks(console, [Check("engine", False, EVERYTHING, fix=EVERYTHING)])
    as_text(out.getvalue())


def test_a_refused_connection_keeps_its_numbers_and_loses_the_box_sequences():
    event = _plain_event({"host": EVERYTHING, "port": 443, "\x1b]0;t\x07proto": "tcp"})
    assert event["port"] == 443 and event["proto"] == "tcp", event
    as_text(str(event["host"]))


def test_hosts_ls_shows_paths_with_brackets_as_typed(hbtui_home):
    env = dict(os.environ)
    state, engine = "/srv/[/]x", "/opt/[link=https://evil.example]smolvm[/link]"
    ok(hbtui("hosts", "add", "r1", "--ssh", "u@h", "--state-dir", state, "--smolvm", engine,
             env=env))  # fmt: skip
    listed = ok(hbtui("hosts", "ls", env=env)).stdout
    assert state in listed and engine in listed, listed
