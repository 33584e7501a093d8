"""The dashboard's keys for a box's work: the diff view (`u`),
pull (`P`), and a try's compare view with keep (`T`, `k`), driven with Pilot over
`FakeService` (the core's side is tests/core/work/test_work.py and tests/core/work/test_work_in_out.py)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from textual.widgets import Button, Checkbox, DataTable, Input, Select, Static
from textual.widgets._footer import FooterKey

from hbtui.core.foundation.git import RepoSeed
from hbtui.core.foundation.specs import WorkRequest
from hbtui.names import LOCAL
from hbtui.tui.app import HbtuiApp
from hbtui.tui.boxes.branch import BranchDialog
from hbtui.tui.boxes.new import NewBoxDialog
from hbtui.tui.dialogs.confirm import ConfirmDialog
from hbtui.tui.help import HelpScreen
from hbtui.tui.work.compare import TryScreen
from hbtui.tui.work.diff import DiffScreen, PatchView, prepare

from support.pilot import (
    SIZE,
    log_text,
    make_app,
    notes,
    open_section,
    operations_done,
    settled,
    text_of,
    until,
)
from support.tui_fakes import SAMPLE_PATCH, FakeService, frozen_clock, sample_try, work_diff


async def listed(pilot, app, count: int = 4) -> None:
    await until(pilot, lambda: app.main.table.row_count == count, what=f"{count} rows")


async def select(pilot, app, name: str) -> None:
    assert app.main.table.select((LOCAL, name))
    await settled(pilot)


def cells(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(y)] for y in range(table.row_count)]


def drawn(view: PatchView, row: int) -> str:
    """The patch row as the screen draws it (the row must be in view)."""
    return view.render_line(row - int(view.scroll_offset.y)).text


async def opened_diff(pilot, app) -> DiffScreen:
    await pilot.press("u")
    await until(pilot, lambda: isinstance(app.screen, DiffScreen), what="the diff view")
    screen = app.screen
    await until(pilot, lambda: screen.shown is not None, what="the diff shown")
    await settled(pilot)
    return screen


async def test_the_diff_view_lists_files_and_colours_the_patch_as_plain_text():
    service = FakeService()
    service.diffs[(LOCAL, "alpha")] = work_diff("alpha")
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await select(pilot, app, "alpha")
        screen = await opened_diff(pilot, app)
        assert ("diff", "alpha", LOCAL, True) in service.calls
        files = cells(screen.query_one("#diff-files", DataTable))
        assert files == [
            ["M", "src/io.py", "+4", "-2"],
            ["A", "tests/test_io.py", "+3", "-0"],
            ["D", "old.txt", "+0", "-1"],
        ]
        summary = str(screen.query_one("#diff-summary", Static).render())
        assert "alpha on hb/alpha: 2 commit(s) since aaaaaaaaaaaa" in summary
        assert "1 file(s) uncommitted" in summary
        assert "fix the reader, part 1" in summary
        view = screen.query_one(PatchView)
        assert len(view.rows) == len(SAMPLE_PATCH.splitlines())
        # Text from the box stays text: a markup-like word is drawn as typed, not as bold.
        row = next(i for i, r in enumerate(view.rows) if "not markup" in r)
        assert "[bold]not markup[/bold], [red]nor this[/]" in drawn(view, row)
        # Coloured by the diff lexer: an added line is green, a removed one red.
        added = list(view.render_line(row))  # the first rows are in view
        assert any(s.style and s.style.color and "green" in s.style.color.name for s in added)
        removed = next(i for i, r in enumerate(view.rows) if r.startswith("-    with"))
        assert any(
            s.style and s.style.color and "red" in s.style.color.name
            for s in view.render_line(removed)
        )
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main, what="back to the boxes")


def test_the_view_draws_no_escape_sequence_whatever_it_is_given():
    """The core strips the box's escapes; the view, where the text meets the terminal,
    does not depend on it."""
    hostile = "+\x1b]0;pwned\x07title \x1b[2J\x1b[31mred\x1b[0m \x9b2J done\n"
    shown = prepare(work_diff("alpha", patch=hostile))
    [row] = shown.lines
    assert row.startswith("+title red") and row.endswith(" done")
    assert row.isprintable()


async def test_the_diff_view_searches_scrolls_and_jumps_to_a_file():
    service = FakeService()
    long_file = "diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n@@ -1 +1,120 @@\n"
    long_file += "".join(f"+line {k}\n" for k in range(120))
    work = work_diff("alpha", patch=SAMPLE_PATCH + long_file)
    service.diffs[(LOCAL, "alpha")] = work
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await select(pilot, app, "alpha")
        screen = await opened_diff(pilot, app)
        view = screen.query_one(PatchView)
        assert view.virtual_size.height == len(view.rows) > view.size.height  # it scrolls
        await pilot.press("slash")
        await settled(pilot)
        await pilot.press(*"F.READ", "enter")  # any case
        await until(pilot, lambda: view.matches, what="matches")
        rows = [i for i, r in enumerate(view.rows) if "f.read" in r.lower()]
        assert view.matches == rows and len(rows) == 2
        assert screen.sub_title == "/f.read: 1/2 (n/N)"
        first = rows[0]
        assert view.scroll_offset.y <= first < view.scroll_offset.y + view.size.height
        # the current match is marked on screen
        strip = view.render_line(first - int(view.scroll_offset.y))
        assert any(s.style and s.style.bgcolor for s in strip)
        await pilot.press("n")
        assert screen.sub_title == "/f.read: 2/2 (n/N)"
        await pilot.press("n")  # round the end
        assert screen.sub_title == "/f.read: 1/2 (n/N)"
        await pilot.press("N")
        assert screen.sub_title == "/f.read: 2/2 (n/N)"
        await pilot.press("slash", *"nothing-like-it", "enter")
        await until(pilot, lambda: "no match" in screen.sub_title)
        # enter on a file in the list: its part of the patch at the top
        table = screen.query_one("#diff-files", DataTable)
        table.focus()
        table.move_cursor(row=1)  # tests/test_io.py
        await pilot.press("enter")
        start = next(i for i, r in enumerate(view.rows) if r.endswith("b/tests/test_io.py"))
        await until(pilot, lambda: view.scroll_offset.y == start, what="the file's patch")
        # esc closes an open search first, then the view
        await pilot.press("slash")
        await settled(pilot)
        await pilot.press("escape")
        await settled(pilot)
        assert isinstance(app.screen, DiffScreen)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)


async def test_a_box_without_work_gets_one_notification_and_no_view():
    service = FakeService()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await select(pilot, app, "beta")
        await pilot.press("u")
        said = "box beta was not made with a repository (hbtui new beta --repo PATH)"
        await until(pilot, lambda: any(said in n for n in notes(app)), what=lambda: notes(app))
        await settled(pilot)
        assert app.screen is app.main
        assert len([n for n in notes(app) if "beta" in n]) == 1


async def test_pull_runs_as_an_operation_and_says_what_landed():
    service = FakeService()
    service.diffs[(LOCAL, "alpha")] = work_diff("alpha")
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await select(pilot, app, "alpha")
        await pilot.press("P")
        await until(pilot, lambda: any("pull alpha: done" in n for n in notes(app)))
        await operations_done(pilot, app)
        assert ("pull", "alpha", LOCAL, False, None) in service.calls
        [note] = [n for n in notes(app) if "pull alpha: done" in n]
        assert "refs/remotes/box/alpha/hb/alpha → bbbbbbbbbbbb" in note
        assert "in /src/project" in note
        assert "1 file(s) uncommitted in the box, not pulled" in note
        # the box's log says what the core reported
        log = "\n".join(app.activities[(LOCAL, "alpha")].lines)
        assert "bundling the work in alpha" in log
        # a box without work: the core's one line
        await select(pilot, app, "beta")
        await pilot.press("P")
        await until(pilot, lambda: any("pull beta failed" in n for n in notes(app)))
        [note] = [n for n in notes(app) if "pull beta failed" in n]
        assert note.endswith("box beta was not made with a repository (hbtui new beta --repo PATH)")
        await operations_done(pilot, app)


async def test_the_compare_view_says_how_an_agent_ended_at_its_start():
    """A try's box whose agent ended at its start: its agent `ended`, and its last words
    over its check's output (the same record `try ls` reads)."""
    service = FakeService()
    record = sample_try(service)
    said = "claude ended at once in fix-1 (exit status 1): Unable to connect [b]x[/b]"
    record.ended["fix-1"] = said
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app, 7)
        await select(pilot, app, "fix-1")
        await pilot.press("T")
        await until(pilot, lambda: isinstance(app.screen, TryScreen))
        screen = app.screen
        await until(pilot, lambda: screen.rows, what="the try's rows")
        await settled(pilot)
        table = screen.query_one("#try-rows", DataTable)
        assert [row[:2] for row in cells(table)] == [
            ["fix-1", "ended"], ["fix-2", "idle"], ["fix-3", "idle"],
        ]  # fmt: skip
        output = str(screen.query_one("#try-output", Static).render())
        assert output.startswith(f"fix-1: {said}\nfix-1: the check's output"), output
        assert "3 passed in 0.12s" in output


async def test_the_compare_view_shows_the_try_and_keep_asks_first():
    service = FakeService()
    sample_try(service)
    service.agent_status["fix-3"] = "working"
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app, 7)
        await select(pilot, app, "alpha")
        await pilot.press("T")  # not a box of a try
        await until(pilot, lambda: any("is not a box of a try" in n for n in notes(app)))
        assert app.screen is app.main
        await select(pilot, app, "fix-2")
        await pilot.press("T")
        await until(pilot, lambda: isinstance(app.screen, TryScreen))
        screen = app.screen
        await until(pilot, lambda: screen.rows, what="the try's rows")
        await settled(pilot)
        table = screen.query_one("#try-rows", DataTable)
        assert cells(table) == [
            ["fix-1", "idle", "0", "3", "+7 -3", "pass"],
            ["fix-2", "idle", "1", "3", "+7 -3", "fail (1)"],
            ["fix-3", "working", "2", "3", "+7 -3", "-"],
        ]
        assert screen.selected() == "fix-2"  # where it was opened from
        output = str(screen.query_one("#try-output", Static).render())
        assert "FAILED tests/test_io.py::test_read" in output
        assert "ended" not in output
        # u: the diff of the box under the cursor
        await pilot.press("u")
        await until(pilot, lambda: isinstance(app.screen, DiffScreen))
        assert app.screen.key == (LOCAL, "fix-2")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        # k asks; n keeps everything as it is
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        question = str(app.screen.query_one("#question", Static).render())
        assert "Pull fix-2's work into /src/project and remove fix-1, fix-3?" in question
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen)
        assert not [c for c in service.calls if c[0] == "try_keep"]
        # k, y: kept, the others removed, back to the boxes
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await until(pilot, lambda: any("keep fix-2: done" in n for n in notes(app)))
        await operations_done(pilot, app)
        assert ("try_keep", "fix-2", LOCAL) in service.calls
        assert [b.name for b in service.views if b.name.startswith("fix")] == ["fix-2"]
        [note] = [n for n in notes(app) if "keep fix-2: done" in n]
        assert "refs/remotes/box/fix-2/hb/fix-2" in note and "removed fix-1, fix-3" in note
        await until(pilot, lambda: app.screen is app.main)
        await listed(pilot, app, 5)


async def test_a_compare_view_closed_while_its_checks_run_is_left_be():
    service = FakeService()
    sample_try(service)
    service.checks_gate = asyncio.Event()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app, 7)
        await select(pilot, app, "fix-1")
        await pilot.press("T")
        await until(pilot, lambda: ("try_rows", "fix", LOCAL) in service.calls)
        screen = app.screen
        assert "asking the boxes of fix" in str(screen.query_one("#try-summary").render())
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)
        service.checks_gate.set()
        await until(pilot, lambda: not [w for w in app.workers if w.group == "try"])
        await settled(pilot)
        assert not [n for n in notes(app) if "internal error" in n]


async def test_the_command_line_opens_the_compare_view_of_a_named_box():
    service = FakeService()
    sample_try(service, count=2)
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app, 6)
        await pilot.press("colon", *"try fix-1", "enter")
        await until(pilot, lambda: isinstance(app.screen, TryScreen))
        await until(pilot, lambda: app.screen.rows)
        assert app.screen.selected() == "fix-1"
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.main)


async def test_the_new_dialog_puts_a_repository_and_an_agent_on_a_task_in_the_box(tmp_path):
    service = FakeService()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
        dialog = app.screen
        await pilot.press(*"w1")
        await open_section(pilot, dialog, "work")
        ok = dialog.query_one("#ok", Button)
        repo, task = dialog.query_one("#repo", Input), dialog.query_one("#task", Input)
        agent = dialog.query_one("#agent", Select)

        async def problem(is_now: str) -> None:
            await until(
                pilot,
                lambda: text_of(dialog, "#work-problem") == is_now,
                what=lambda: f"{is_now!r}, not {text_of(dialog, '#work-problem')!r}",
            )
            assert ok.disabled == bool(is_now)

        task.value = "make tests/io pass"
        await problem("a task or an agent needs a repository")
        repo.value = str(tmp_path / "nowhere")
        await problem(f"{tmp_path / 'nowhere'} is not a folder")
        repo.value = f"{tmp_path}@main"
        await problem("a task needs an agent to do it: add --agent claude|codex|hermes")
        agent.value = "codex"
        await problem("")
        ok.press()
        await until(pilot, lambda: "w1" in service.new_specs, what="new called")
        seed = RepoSeed(tmp_path, "main", "main", "c" * 40)
        assert service.new_specs["w1"].work == WorkRequest(seed, "make tests/io pass", "codex")
        await operations_done(pilot, app)
        # no repository: no work, as before
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
        await pilot.press(*"w2", "enter")
        await until(pilot, lambda: "w2" in service.new_specs, what="new called")
        assert service.new_specs["w2"].work is None
        assert not [c for c in service.calls if c == ("repo_seed", "")]
        await operations_done(pilot, app)


async def test_a_new_box_whose_agent_ended_at_start_is_made_with_its_agent_ended(tmp_path):
    """The box is made and ready: its row and log say so, and the notification says how
    its agent ended (its last words), never that the new failed."""
    service = FakeService()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await pilot.press("n")
        await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
        dialog = app.screen
        await pilot.press(*"ends1")
        await open_section(pilot, dialog, "work")
        dialog.query_one("#repo", Input).value = f"{tmp_path}@main"
        dialog.query_one("#task", Input).value = "fix it"
        dialog.query_one("#agent", Select).value = "claude"
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled)
        dialog.query_one("#ok", Button).press()
        await operations_done(pilot, app)
        said = " | ".join(notes(app))
        assert "new ends1: made, its agent ended" in said and "bad key" in said, said
        assert "new ends1 failed" not in said, said
        activity = app.activities[(LOCAL, "ends1")]
        assert activity.failure is None
        assert any("new done, but claude ended at once" in line for line in activity.lines)
        assert service.views[service._find("ends1", LOCAL)].provisioning == "ready"


async def new_dialog_with_work(pilot, app, name: str) -> NewBoxDialog:
    await pilot.press("n")
    await until(pilot, lambda: isinstance(app.screen, NewBoxDialog))
    dialog = app.screen
    await pilot.press(*name)
    await open_section(pilot, dialog, "work")
    return dialog


async def test_the_new_dialog_copies_ignored_files_into_the_clone_and_may_skip_its_setup(
    tmp_path,
):
    repo = tmp_path / "app"
    repo.mkdir()
    (tmp_path / "outside").write_text("")
    service = FakeService()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        dialog = await new_dialog_with_work(pilot, app, "w1")
        ok = dialog.query_one("#ok", Button)
        copy, setup = dialog.query_one("#copy", Input), dialog.query_one("#setup", Checkbox)
        assert setup.value  # the repository's setup runs unless told not to

        async def problem(is_now: str) -> None:
            await until(
                pilot,
                lambda: text_of(dialog, "#work-problem") == is_now,
                what=lambda: f"{is_now!r}, not {text_of(dialog, '#work-problem')!r}",
            )
            assert ok.disabled == bool(is_now)

        copy.value = ".env"
        await problem("files to copy need a repository (the clone they go into)")
        dialog.query_one("#repo", Input).value = str(repo)
        await problem(f"copy .env: {repo / '.env'} does not exist")
        (repo / ".env").write_text("KEY=1\n")
        copy.value = ".env, ../outside"
        await problem(f"copy ../outside: {tmp_path / 'outside'} is not inside the work tree {repo}")
        copy.value = ".env, .env"
        await problem("")
        setup.value = False
        ok.press()
        await until(pilot, lambda: "w1" in service.new_specs, what="new called")
        seed = RepoSeed(repo, "", "refs/heads/main", "c" * 40)
        assert service.new_specs["w1"].work == WorkRequest(seed, copy=(".env",), setup=False)
        await operations_done(pilot, app)


async def test_a_copy_git_refuses_is_said_in_the_dialog_before_any_box_is_made(tmp_path):
    (tmp_path / "tracked.txt").write_text("")
    service = FakeService()
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        dialog = await new_dialog_with_work(pilot, app, "w1")
        dialog.query_one("#repo", Input).value = str(tmp_path)
        dialog.query_one("#copy", Input).value = "tracked.txt"
        service.tracked = {"tracked.txt"}
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled)
        dialog.query_one("#ok", Button).press()
        await until(
            pilot,
            lambda: "tracked.txt is tracked by git" in text_of(dialog, "#request-status"),
            what="the refusal in the dialog",
        )
        assert app.screen is dialog and "w1" not in service.new_specs
        await operations_done(pilot, app)


async def test_the_setup_prints_in_the_log_and_a_failed_one_leaves_a_made_box(tmp_path):
    service = FakeService()
    service.setup_lines = ["npm install", "npm ERR! missing script: prepare"]
    service.setup_fails = True
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        dialog = await new_dialog_with_work(pilot, app, "w1")
        dialog.query_one("#repo", Input).value = str(tmp_path)
        await until(pilot, lambda: not dialog.query_one("#ok", Button).disabled)
        dialog.query_one("#ok", Button).press()
        await operations_done(pilot, app)
        await select(pilot, app, "w1")
        log = log_text(app)
        assert "running the repository's .hbtui/setup.sh in w1" in log
        assert "npm ERR! missing script: prepare" in log
        assert (
            "new done, but the setup .hbtui/setup.sh in box w1 failed (exit status 1); its "
            "last lines: npm install | npm ERR! missing script: prepare; the box stays" in log
        )
        assert "new failed" not in log
        activity = app.activities[(LOCAL, "w1")]
        assert activity.failure is None and not activity.running
        assert any(n.startswith("new w1: made, its setup failed the setup") for n in notes(app))
        assert not any("new w1 failed" in n for n in notes(app))


async def test_the_branch_dialog_of_a_box_with_a_repository_may_skip_its_setup():
    service = FakeService()
    service.views[0] = replace(service.views[0], repo="/src/app")  # alpha, made with one
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        for source, untick, branch in (("alpha", True, "a1"), ("alpha", False, "a2")):
            await select(pilot, app, source)
            await pilot.press("b")
            await until(pilot, lambda: isinstance(app.screen, BranchDialog))
            dialog = app.screen
            dialog.query_one("#name", Input).value = branch
            if untick:
                dialog.query_one("#setup", Checkbox).value = False
            await settled(pilot)
            dialog.query_one("#ok", Button).press()
            await until(pilot, lambda b=branch: b in service.branch_setups, what="branch")
            await operations_done(pilot, app)
        assert service.branch_setups == {"a1": False, "a2": True}
        await select(pilot, app, "gamma")  # made without a repository: nothing to set up
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, BranchDialog))
        assert not app.screen.query("#setup")


async def test_footer_and_help_list_the_work_keys():
    app = make_app(FakeService())
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        # The rows come before the footer's keys (the first listing goes first).
        await until(pilot, lambda: app.main.query(FooterKey), what="the footer's keys")
        footer = {k.key: k.description for k in app.main.query(FooterKey)}
        assert (footer["u"], footer["P"], footer["T"]) == ("Diff", "Pull", "Try")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one(DataTable)
        ids = {str(table.get_row_at(y)[0]) for y in range(table.row_count)}
        assert {"diff", "pull", "try", "diff-search", "try-keep"} <= ids


# -- snapshots (docs/images/diff.svg, docs/images/try-compare.svg) --------------------------------


def test_diff_view_snapshot(snap_compare):
    service = FakeService()
    service.diffs[(LOCAL, "alpha")] = work_diff("alpha")
    app = HbtuiApp(service, clock=frozen_clock, refresh_seconds=60)

    async def run_before(pilot):
        await listed(pilot, app)
        await pilot.press("u")
        await until(pilot, lambda: getattr(app.screen, "shown", None) is not None)
        patch = app.screen.patch
        await until(pilot, lambda: patch.size.height > 20, what="the patch laid out")
        await settled(pilot)  # (the search places its match by the view's height)
        await pilot.press("slash")
        await until(pilot, lambda: app.screen.query_one("#diff-search").has_focus)
        await pilot.press(*"read", "enter")
        await until(pilot, lambda: patch.matches, what="the matches")
        await settled(pilot)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


def test_compare_view_snapshot(snap_compare):
    service = FakeService()
    sample_try(service)
    service.agent_status["fix-3"] = "working"
    app = HbtuiApp(service, clock=frozen_clock, refresh_seconds=60)

    async def run_before(pilot):
        await listed(pilot, app, 7)
        await select(pilot, app, "fix-2")
        await pilot.press("T")
        await until(pilot, lambda: getattr(app.screen, "rows", None))
        await settled(pilot)

    assert snap_compare(app, terminal_size=(120, 36), run_before=run_before)


async def test_the_box_table_shows_each_box_s_branch_once_one_has_a_repository():
    from dataclasses import replace

    from support.pilot import rows
    from support.tui_fakes import sample_boxes

    app = make_app(FakeService())
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: app.main.table.row_count == 4)
        assert "Branch" not in app.main.table.render_line(0).text.split()

    boxes = sample_boxes()
    boxes[0] = replace(boxes[0], repo="/home/u/proj", branch="hb/alpha", ahead=2)
    app = make_app(FakeService(boxes))
    async with app.run_test(size=(160, 45)) as pilot:
        await until(pilot, lambda: "Branch" in app.main.table.render_line(0).text.split())
        drawn = rows(app)
        assert "hb/alpha ↑2" in drawn["local/alpha"]
        assert "hb/" not in drawn["local/beta"]


async def test_pr_asks_where_the_work_goes_then_pushes_and_says_the_request():
    service = FakeService()
    service.diffs[(LOCAL, "alpha")] = work_diff("alpha")
    service.gh_url = "https://github.com/o/project/pull/3"
    app = make_app(service)
    async with app.run_test(size=SIZE) as pilot:
        await listed(pilot, app)
        await select(pilot, app, "alpha")
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the question")
        question = str(app.screen.query_one("#question", Static).render())
        assert "/src/project" in question and "push hb/alpha to origin as hb/alpha" in question
        await pilot.press("n")  # not now: nothing runs
        await until(pilot, lambda: app.screen is app.main, what="the question gone")
        assert not [c for c in service.calls if c[0] == "pr"]
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the question")
        await pilot.press("y")
        await until(pilot, lambda: any("pr alpha: done" in n for n in notes(app)))
        await operations_done(pilot, app)
        [note] = [n for n in notes(app) if "pr alpha: done" in n]
        assert "hb/alpha → origin (new branch)" in note and service.gh_url in note
        log = "\n".join(app.activities[(LOCAL, "alpha")].lines)
        assert "bundling the work in alpha" in log and "pushing bbbbbbbbbbbb to origin" in log
        # Without gh: the command to run; a box of several repositories: which, and how.
        service.gh_url = ""
        await pilot.press("L")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the question")
        await pilot.press("y")
        await until(pilot, lambda: len([n for n in notes(app) if "pr alpha: done" in n]) == 2)
        await operations_done(pilot, app)
        assert "gh is not installed; to open the pull request:" in notes(app)[-1]
        service.more_repos[(LOCAL, "alpha")] = ("web",)
        await pilot.press("L")
        said = "alpha has 2 repositories (project, web): hbtui pr alpha --repo NAME"
        await until(pilot, lambda: any(said in n for n in notes(app)), what=lambda: notes(app))
        assert app.screen is app.main
