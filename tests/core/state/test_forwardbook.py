"""The records of running forwards: what `hbtui open BOX:PORT` finds, and what a killed
forward left behind."""

from __future__ import annotations

import os
import subprocess

from hbtui.core.foundation.forwardbook import ForwardBook, Forwarded


def test_running_lists_live_forwards_and_removes_a_killed_ones(tmp_path):
    book = ForwardBook(tmp_path / "forwards")
    mine = Forwarded("web", "local", 3000, 3000, os.getpid())
    other_box = Forwarded("api", "local", 3000, 3001, os.getpid())
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed = Forwarded("web", "local", 5173, 40000, dead.pid)
    for f in (killed, mine, other_box):
        book.add(f)
    (tmp_path / "forwards" / "local" / "web" / "notes.txt").write_text("a stray file")

    assert book.running("web", "local") == [mine]
    assert mine.mine and mine.url == "http://127.0.0.1:3000/"
    assert sorted(p.name for p in (tmp_path / "forwards" / "local" / "web").iterdir()) == [
        f"3000-3000-{os.getpid()}.json",
        "notes.txt",
    ]
    assert book.running("web", "elsewhere") == []
    book.remove(mine)
    assert book.running("web", "local") == []
