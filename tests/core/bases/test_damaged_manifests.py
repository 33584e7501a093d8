"""A base manifest that cannot be read (cut short, edited by hand, a field of the wrong
type) is a damaged file, not a missing one: `base ls` names it and the next run keeps its
base's pack. Before, the leftovers sweep took the pack for a killed build's and deleted
it, and a manifest with a wrong-typed field made `base ls` a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import HBTUI_BIN

IDENT = "ubuntu-24.04-19a0a084-d74dcbf12bbd"


def dead_pid() -> int:
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def manifest(home: Path, pack: Path) -> dict[str, object]:
    return {
        "id": IDENT,
        "host": "local",
        "image": "ubuntu:24.04",
        "recipe": "d74dcbf12bbd",
        "recipe_dir": "/nowhere",
        "versions": "",
        "engine": "1.32.2",
        "pack": str(pack),
        "size": 3,
        "sha256": "0" * 64,
        "created": "2026-12-02T03:57:35Z",
        "built_in": 14.4,
    }


DAMAGES = {
    "cut short": lambda m: json.dumps(m)[:40],
    "not an object": lambda m: "[]",
    "a size that is text": lambda m: json.dumps({**m, "size": "huge"}),
    "a creation time that is a number": lambda m: json.dumps({**m, "created": 5}),
    "no pack": lambda m: json.dumps({k: v for k, v in m.items() if k != "pack"}),
}


@pytest.mark.parametrize("damage", DAMAGES, ids=list(DAMAGES))
def test_a_damaged_manifest_keeps_its_pack_and_is_named(hbtui_home, damage):
    local = hbtui_home / "bases" / "local"
    folder = local / f"{IDENT}-20261202T035945Z-{dead_pid()}"
    folder.mkdir(parents=True)
    pack = folder / "base.smolmachine"
    pack.write_bytes(b"abc")
    path = local / f"{IDENT}.json"
    path.write_text(DAMAGES[damage](manifest(hbtui_home, pack)))
    # A killed build of another base, which no manifest names: that one goes.
    killed = local / f"debian-12-00000000-d74dcbf12bbd-20261202T035945Z-{dead_pid()}"
    killed.mkdir()

    shown = subprocess.run([HBTUI_BIN, "base", "ls"], capture_output=True, text=True, timeout=60)

    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    assert shown.stderr.splitlines() == [
        f"! {path} is not a base manifest (damaged?): its base is not listed and its pack "
        "is kept; restore the file, or remove it and the base's folder"
    ]
    assert pack.read_bytes() == b"abc"
    assert not killed.exists()
