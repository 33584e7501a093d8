"""Work in and out, below the simulator: what a box's answers may name and hold."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from hbtui.core.foundation import git as gitops
from hbtui.core.foundation.git import WIP_REF, BundleRefused, check_ref_name, parse_heads
from hbtui.core.work import agent as work_agent
from hbtui.core.work import book as work_book
from hbtui.core.work import box as work_box
from hbtui.core.work import diff as work_diff
from hbtui.core.work import operations as work
from hbtui.core.work import pull as work_pull
from hbtui.errors import UsageError
from hbtui.names import LOCAL

SHA = "a" * 40


@pytest.mark.parametrize(
    "ref",
    [
        "refs/heads/hb/b1",
        "refs/heads/main",
        "refs/heads/feature/x.y_z-1",
    ],
)
def test_a_box_may_offer_its_branches(ref):
    check_ref_name(ref, wip=False)
    assert gitops.target_ref("b1", ref) == "refs/remotes/box/b1/" + ref[len("refs/heads/") :]


@pytest.mark.parametrize(
    "ref",
    [
        "HEAD",
        "refs/tags/v1",
        "refs/remotes/origin/main",
        "refs/heads/../../config",
        "refs/heads/a..b",
        "refs/heads/.hidden",
        "refs/heads/x/.y",
        "refs/heads/x.lock",
        "refs/heads/-x",
        "refs/heads/a b",
        "refs/heads/a:b",
        "refs/heads/a*",
        "refs/heads/",
        "refs/heads/a//b",
        "refs/heads/x\x1b]0;t\x07",
        "refs/heads/HEAD",  # git makes no such branch; on the host it is the remote's HEAD
        WIP_REF,  # only with --wip
    ],
)
def test_anything_else_is_refused_by_name(ref):
    with pytest.raises(BundleRefused, match="outside its branches"):
        check_ref_name(ref, wip=False)


def test_a_branch_name_no_file_system_can_hold_is_refused_by_name():
    """A 3,000-character branch passed every check, then failed `git update-ref` ("cannot
    lock ref") once its objects were in the host repository."""
    check_ref_name("refs/heads/" + "a" * 200 + "/" + "b" * 200, wip=False)
    with pytest.raises(BundleRefused, match="longer than"):
        check_ref_name("refs/heads/" + "a" * 3000, wip=False)
    with pytest.raises(BundleRefused, match="longer than"):
        check_ref_name("refs/heads/x/" + "c" * 256 + "/y", wip=False)


@pytest.mark.parametrize("wip", [True, False])
@pytest.mark.parametrize("branch", ["hbtui-wip", "HBTUI-Wip", "hbtui-wip/x"])
def test_the_wip_ref_lands_beside_the_branches_and_no_branch_may_take_its_place(branch, wip):
    """A branch hbtui-wip pulled without --wip landed on the WIP ref, and the next pull
    removed it as stale; a folder of that name, or the name in other case (one file on a
    file system that folds case), would collide with it too."""
    check_ref_name(WIP_REF, wip=True)
    assert gitops.target_ref("b1", WIP_REF) == "refs/remotes/box/b1/hbtui-wip"
    with pytest.raises(BundleRefused, match=f"branch {branch}, a name hbtui keeps"):
        check_ref_name(f"refs/heads/{branch}", wip=wip)
    check_ref_name("refs/heads/hbtui-wipe", wip=wip)


def test_heads_are_parsed_strictly():
    assert parse_heads(f"{SHA} refs/heads/main\n".encode(), wip=False) == [(SHA, "refs/heads/main")]
    for bad in (b"", b"zz refs/heads/main\n", f"{SHA} refs/heads/a\n{SHA} refs/heads/a\n".encode()):
        with pytest.raises(BundleRefused):
            parse_heads(bad, wip=False)


def test_repo_and_ref_split_at_the_last_at_unless_the_path_exists(tmp_path: Path):
    odd = tmp_path / "a@b"
    odd.mkdir()
    assert gitops.split_repo_ref(str(odd)) == (odd, "")
    assert gitops.split_repo_ref(f"{tmp_path}/r@main") == (tmp_path / "r", "main")
    assert gitops.split_repo_ref("@v1") == (Path("."), "v1")
    with pytest.raises(UsageError):
        gitops.split_repo_ref(f"{tmp_path}/r@")


def test_the_pull_cap_is_a_number_of_bytes(monkeypatch):
    monkeypatch.setenv(work_pull.PULL_MAX_ENV, "1024")
    assert work_pull.pull_max() == 1024
    for bad in ("0", "-1", "1G", " "):
        monkeypatch.setenv(work_pull.PULL_MAX_ENV, bad)
        with pytest.raises(UsageError, match=work_pull.PULL_MAX_ENV):
            work_pull.pull_max()
    monkeypatch.delenv(work_pull.PULL_MAX_ENV)
    assert work_pull.pull_max() == work_pull.PULL_MAX_DEFAULT


def test_a_diff_from_the_box_reaches_the_terminal_without_escapes():
    record = work_book.WorkRecord("/r", SHA, "refs/heads/main", "/c", "hb/b1")
    answer = work_box.Answer(
        tagged=[
            ("head", "b" * 40),
            ("branch", "hb/b1\x1b]0;pwned\x07"),
            ("dirty", "2"),
            ("commit", f"{'c' * 40} subject \x1b[2J wiped"),
            ("commit", "not-a-sha subject"),
            ("num", "3\t1\tsrc/a.py"),
            ("num", "-\t-\tlogo.png"),
            ("num", "junk"),
            ("patch", ""),
        ],
        body=["+\x1b]52;c;ZXZpbA==\x07clip", "+\x1b[31mred\x1b[0m", "+tab\there"],
    )
    d = work_diff._parse_diff("b1", "local", record, answer)
    assert d.branch == "hb/b1" and d.uncommitted == 2 and d.head == "b" * 40
    assert [c.subject for c in d.commits] == ["subject wiped"]
    assert [(f.path, f.added, f.deleted) for f in d.files] == [
        ("src/a.py", 3, 1),
        ("logo.png", None, None),
    ]
    assert d.patch == "+clip\n+red\n+tab\there\n"


@pytest.mark.parametrize(
    ("task", "agent", "words"),
    [
        ("do", "", "--agent"),
        ("do", "vim", "unknown agent"),
        ("x" * (work.TASK_MAX + 1), "claude", "longer"),
        ("a\x00b", "claude", "NUL"),
    ],
)
def test_a_task_is_checked_before_any_box_is_made(task, agent, words):
    with pytest.raises(UsageError, match=words):
        work.check_task(task, agent)


async def test_a_stream_left_early_ends_its_child_at_once(tmp_path: Path):
    """`pull` stops reading a box that sends too much: the exec must end then, not when
    the event loop closes (which leaves it running, and warns at exit)."""
    import contextlib
    import os

    from hbtui.engine.client import EngineStream
    from hbtui.engine.runner import LocalRunner

    pidfile = tmp_path / "pid"
    argv = ["sh", "-c", f"echo $$ > {pidfile}; echo first; exec sleep 60"]
    stream = EngineStream(LocalRunner().stream(argv, timeout=30), argv)
    lines = aiter(stream)
    async with contextlib.aclosing(lines):  # type: ignore[type-var]
        assert await anext(lines) == "first"
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


@pytest.mark.parametrize("odd", ["line\nbreak", 'quote" back\\slash', "tab\there"])
async def test_a_repository_at_an_odd_path_still_lends_its_objects(tmp_path: Path, odd: str):
    """The seed is made in a repository that borrows the host repository's objects by an
    alternates line: a newline in the path split that line, and the seed 'did not exist'."""
    import subprocess

    repo = tmp_path / odd
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    (repo / "f").write_text("x\n")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    seed = await gitops.resolve_seed(str(repo))
    out = tmp_path / "out"
    out.mkdir()
    bundle = await gitops.seed_bundle(seed, out)
    heads = subprocess.run(
        ["git", "bundle", "list-heads", str(bundle)], capture_output=True, text=True, check=True
    )
    assert heads.stdout.split() == [seed.seed, gitops.SEED_REF]


@pytest.mark.parametrize("verb", ["diff", "pull"])
def test_a_box_that_does_not_exist_is_named_so(hbtui_home, verb):
    """`diff nosuch` said the box 'was not made with a repository', as if it existed."""
    import os

    from support.cli import hbtui, one_line_error

    done = hbtui(verb, "nosuch", env=dict(os.environ))
    assert one_line_error(done) == "error: no box named 'nosuch' (see: hbtui ls)"


def test_a_try_names_each_box_once_in_its_progress():
    """`try` showed "t-1: t-1 is ready" and "t-1: t-1: full provisioning": a box's own
    message already names it; t-10's message is not t-1's."""
    from hbtui.core.tries.operations import prefixed
    from hbtui.events import Event, LogLine, Notice, Phase

    seen: list[Event] = []
    relay = prefixed("t-1", seen.append)
    for event in (
        Phase("reserving a port"),
        Phase("t-1 is ready at http://127.0.0.1:4799/"),
        Notice("t-1: full provisioning: no base"),
        Phase("t-10 is ready"),
        Phase("t-1x is ready"),
        LogLine("a line of the box's log"),
    ):
        relay(event)
    assert [(type(e).__name__, e.message) for e in seen] == [
        ("Phase", "t-1: reserving a port"),
        ("Phase", "t-1 is ready at http://127.0.0.1:4799/"),
        ("Notice", "t-1: full provisioning: no base"),
        ("Phase", "t-1: t-10 is ready"),
        ("Phase", "t-1: t-1x is ready"),
    ]


async def test_an_interrupted_try_ends_once_every_box_is_rolled_back():
    """A branch N ways SIGTERMed left a box registered: the first box to end cancelled
    (one whose own rollback was quick) ended the wait for all of them, so the others'
    rollbacks were cut off when the process closed. Now the interrupted call ends only
    once each box's own rollback has, and removes the boxes made after."""
    from hbtui.core.tries.operations import make_boxes
    from hbtui.errors import Cancelled
    from hbtui.events import ignore

    said: list[str] = []
    waiting: list[str] = []
    all_waiting = asyncio.Event()

    async def make(box: str, report: object) -> None:
        if box == "t-1":
            return  # made
        waiting.append(box)
        if len(waiting) == 2:
            all_waiting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            if box == "t-2":  # its work step: removed at once, the cancel goes on
                said.append("t-2 rolled back")
                raise
            for _ in range(100):  # a rollback of many steps (the machine deleted, the row)
                await asyncio.sleep(0)
            said.append("t-3 rolled back")
            raise Cancelled("cancelled: box 't-3' was rolled back") from None

    async def undo(box: str) -> None:
        said.append(f"{box} removed")

    making = asyncio.ensure_future(make_boxes(["t-1", "t-2", "t-3"], make, undo, ignore))
    await all_waiting.wait()
    making.cancel()
    with pytest.raises(asyncio.CancelledError):
        await making
    assert said == ["t-2 rolled back", "t-3 rolled back", "t-1 removed"]


def test_an_agent_that_ends_leaves_its_words_and_a_shell(tmp_path: Path):
    """An agent that cannot start (no login) used to take its window, and its words, with
    it: the launcher now says how it ended and leaves a shell in the clone."""
    task = tmp_path / "task"
    task.write_text("do it; $(touch pwned)")
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "claude").write_text('#!/bin/sh\necho "Not logged in: got $1"\nexit 3\n')
    (fake / "claude").chmod(0o755)
    launcher = tmp_path / "start"
    launcher.write_text(work_agent.launcher("claude", str(task)))
    done = subprocess.run(
        ["bash", str(launcher)], cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
        text=True, env={"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(tmp_path)}, timeout=30,
    )  # fmt: skip
    assert "Not logged in: got do it; $(touch pwned)" in done.stdout
    assert "[hbtui] claude ended (exit status 3); this is a shell in the clone." in done.stdout
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / "hbtui-ended").read_text() == "3\n"  # where the wait for it looks


def test_what_the_wait_for_an_agent_reads_of_its_box_is_checked_and_made_safe():
    """The wait step's answer and the pane's last lines are the box's: an ended agent's
    words are one line with no escape, no art, not the launcher's own line nor the shell
    after it, at most WORDS_MAX characters."""
    said = [
        "\x1b]0;a title\x07 ░░▓▓██",
        "Unable to connect \x1b[31mto\x1b[0m the API\x07",
        "",
        "Failed: EAI_AGAIN\tretry\x9b2J",
        "[hbtui] claude ended (exit status 3); this is a shell in the clone.",
        "agent@b1:~/work/proj$ ",
    ]
    answer = work_box.Answer(tagged=[("ended", "3 2412")], said=said)
    start = work_agent.read_start("b1", "claude", answer)
    assert (start.state, start.status, start.seconds) == ("ended", 3, 2.412)
    assert start.words == "Unable to connect to the API | Failed: EAI_AGAIN retry 2J"
    long = work_box.Answer(tagged=[("ended", "70000 x")], said=["word " * 400])
    start = work_agent.read_start("b1", "claude", long)
    assert start.status is None and start.seconds == 0.0
    assert len(start.words) == work_agent.WORDS_MAX and "\n" not in start.words
    took = work_agent.read_start("b1", "codex", work_box.Answer(tagged=[("took", "$(x) 9")]))
    assert (took.state, took.event) == ("took", "an event")
    failed = work_agent.read_start("b1", "hermes", work_box.Answer(said=["no"], returncode=5))
    assert (failed.state, failed.words) == ("unseen", "the wait step failed: no")
    # Numbers int() refuses, or too long for a float, were a traceback.
    for word in ("ended", "took", "running", "gone"):
        for rest in ("\u00b2 \u00b2", "1 " + "9" * 400, "1 " + "9" * 5000):
            lied = work_agent.read_start("b1", "claude", work_box.Answer(tagged=[(word, rest)]))
            assert (lied.seconds, lied.status) in ((0.0, None), (0.0, 1)), (word, rest)


@pytest.mark.parametrize("value", ["0", "-1", "601", "soon", "nan"])
def test_the_wait_for_an_agent_is_bounded_by_a_number_of_seconds(monkeypatch, value):
    monkeypatch.setenv(work_agent.WAIT_ENV, value)
    with pytest.raises(UsageError, match=work_agent.WAIT_ENV):
        work.check_task("x", "claude")
    monkeypatch.setenv(work_agent.WAIT_ENV, "2.5")
    assert work_agent.wait_seconds() == 2.5


@pytest.mark.parametrize(
    ("agent", "credentials", "said"),
    [
        ("claude", "", "binds no credential to ANTHROPIC_API_KEY: claude will ask to log in "
         "(--credential anthropic when making it, or log it in inside the box: hbtui enter b1)"),
        ("codex", "anthropic", "binds no credential to OPENAI_API_KEY"),
        ("claude", "github,anthropic", None),
        ("claude", "claude-subscription", None),  # a subscription is its key too
        ("codex", "openai,gone-preset", None),
        ("hermes", "", None),
    ],
)  # fmt: skip
def test_an_agent_without_its_key_is_said_before_it_starts(agent, credentials, said):
    from hbtui.config import Config
    from hbtui.core.foundation.registry import BoxRecord

    record = BoxRecord(name="b1", port=4800, credentials=credentials)
    boxes = SimpleNamespace(
        config=Config(),
        registry=SimpleNamespace(read=lambda: SimpleNamespace(get=lambda n, h: record)),
    )
    told = work_agent.unkeyed(boxes, "b1", LOCAL, agent)  # type: ignore[arg-type]
    if said is None:
        assert told is None
    else:
        assert told is not None and said in told


@pytest.mark.parametrize("text", ["garbage", '{"repo": 5}', "[]", '{"seed": "zz"}'])
def test_a_damaged_work_record_is_named_not_taken_for_none(tmp_path: Path, text: str):
    """`diff` and `pull` of a box whose record was damaged said it was "not made with a
    repository"; the record's path is named instead."""
    from hbtui.paths import UnreadableFile, resolve_paths

    paths = resolve_paths({"HBTUI_HOME": str(tmp_path)})
    book = work_book.WorkBook(paths)
    (book.root / LOCAL).mkdir(parents=True)
    (book.root / LOCAL / "r1.json").write_text(text)
    with pytest.raises(UnreadableFile, match=r"r1\.json: not a work record"):
        book.get(LOCAL, "r1")
    assert book.get(LOCAL, "other") is None


def test_a_diff_names_each_file_as_it_is_not_as_git_quotes_it():
    """`diff --stat` and `--json` showed git's quoted form: "caf\\303\\251.txt" for
    café.txt, with the quotes. A quoted name is read back to the name (control
    characters still dropped)."""
    record = work_book.WorkRecord("/r", SHA, "refs/heads/main", "/c", "hb/b1")
    answer = work_box.Answer(
        tagged=[
            ("num", '1\t0\t"caf\\303\\251.txt"'),
            ("num", '1\t0\t"say \\"hi\\".txt"'),
            ("num", '1\t0\t"back\\\\slash"'),
            ("num", '1\t0\t"f\\033[31mred"'),
            ("num", "1\t0\tcafé.txt"),  # core.quotepath=off: as it is
            ("num", '1\t0\t"bad\\3"'),  # a broken quote is shown, not read
        ],
    )
    d = work_diff._parse_diff("b1", "local", record, answer)
    assert [f.path for f in d.files] == [
        "café.txt",
        'say "hi".txt',
        "back\\slash",
        "fred",
        "café.txt",
        '"bad\\3"',
    ]
