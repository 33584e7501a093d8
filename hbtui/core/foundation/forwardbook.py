"""The forwards running on this machine (`hbtui forward`), one small file each.

A forward lives in the process that made it; its file lets another process find its URL
(`hbtui open BOX:PORT`, the dashboard's details view). A file whose process is gone
is a leftover of a kill, removed when it is next read.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from hbtui.errors import UsageError
from hbtui.paths import make_folder
from hbtui.statefile import write_atomic


def check_port(port: int, what: str = "port") -> int:
    """A TCP port number (a box's, or a host port asked for): the dashboard's forward
    dialog checks its fields with this too."""
    if not 1 <= port <= 65535:
        raise UsageError(f"{what} {port} is out of range: 1 to 65535")
    return port


@dataclass(frozen=True)
class Forwarded:
    """One running forward: 127.0.0.1:local_port here reaches box_port on the box's own
    loopback, for as long as process `pid` runs."""

    box: str
    host: str
    box_port: int
    local_port: int
    pid: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}/"

    @property
    def mine(self) -> bool:
        """Made by this process (the dashboard lists and ends its own)."""
        return self.pid == os.getpid()

    def to_json(self) -> dict[str, object]:
        return {
            "box": self.box,
            "host": self.host,
            "port": self.box_port,
            "local_port": self.local_port,
            "url": self.url,
            "pid": self.pid,
        }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: not ours to judge
    return True


class ForwardBook:
    """`<data>/forwards/HOST/BOX/BOXPORT-LOCALPORT-PID.json`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _file(self, f: Forwarded) -> Path:
        return self.folder / f.host / f.box / f"{f.box_port}-{f.local_port}-{f.pid}.json"

    def add(self, f: Forwarded) -> None:
        path = self._file(f)
        make_folder(path.parent)
        write_atomic(path, json.dumps(f.to_json()).encode())

    def remove(self, f: Forwarded) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._file(f).unlink()

    def running(self, box: str, host: str) -> list[Forwarded]:
        """The box's forwards whose process runs, by box port; leftovers are removed."""
        found: list[Forwarded] = []
        folder = self.folder / host / box
        try:
            names = sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return []
        for name in names:
            f = self._read(folder / name, box, host)
            if f is None:
                continue
            if _alive(f.pid):
                found.append(f)
            else:
                self.remove(f)
        return sorted(found, key=lambda f: (f.box_port, f.local_port))

    @staticmethod
    def _read(path: Path, box: str, host: str) -> Forwarded | None:
        """The record its name is (its JSON is for people), or None for a name that is
        not one: a stray file is left alone."""
        stem, _, ext = path.name.partition(".")
        parts = stem.split("-")
        if ext != "json" or len(parts) != 3 or not all(p.isdigit() and len(p) < 8 for p in parts):
            return None
        box_port, local_port, pid = (int(p) for p in parts)
        return Forwarded(box, host, box_port, local_port, pid)
