"""The host's record of each box made with a repository (`WorkBook`): for each repository
in the box, its path, the seed commit, the clone's folder in the box and its branch; and
the agent's task. The seed is the
host's word, never the box's: it defines "what the agent did" and is what every pulled
branch must contain. A foundation record, as the registry is: a box's listing shows where
its work is; hbtui.core.work reads and writes it.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from hbtui.core.foundation import git as gitops
from hbtui.errors import HbtuiError
from hbtui.paths import Paths, UnreadableFile, make_folder, read_state
from hbtui.statefile import write_atomic

SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class WorkRecord:
    """Where a box's work came from, as the host recorded it at `new --repo`."""

    repo: str
    seed: str
    ref: str  # what the seed was resolved from (refs/heads/main, HEAD, a commit)
    clone: str  # the clone's folder in the box
    branch: str  # hb/BOX

    @classmethod
    def from_json(cls, data: object) -> WorkRecord | None:
        if not isinstance(data, dict):
            return None
        fields = {k: data.get(k) for k in ("repo", "seed", "ref", "clone", "branch")}
        if not all(isinstance(v, str) for v in fields.values()):
            return None
        if not SHA.fullmatch(str(fields["seed"])):
            return None
        return cls(**{k: str(v) for k, v in fields.items()})

    @property
    def name(self) -> str:
        """What `--repo NAME` picks it by: its clone's folder name (unique in its box)."""
        return PurePosixPath(self.clone).name


@dataclass(frozen=True)
class BoxWork:
    """A box's work: each repository cloned in it (the first is where its agent works)
    and the task it was given."""

    repos: tuple[WorkRecord, ...]
    task: str = ""

    @property
    def first(self) -> WorkRecord:
        return self.repos[0]

    def to_json(self) -> dict[str, object]:
        return {"repos": [asdict(r) for r in self.repos], "task": self.task}

    @classmethod
    def from_json(cls, data: object) -> BoxWork | None:
        """A record as written now ({"repos": [...], "task": ...}), or as one repository's
        fields alone, as it was before a box could hold several."""
        if not isinstance(data, dict):
            return None
        if "repos" not in data:
            one = WorkRecord.from_json(data)
            return None if one is None else cls((one,))
        repos, task = data.get("repos"), data.get("task", "")
        if not isinstance(repos, list) or not repos or not isinstance(task, str):
            return None
        records = [WorkRecord.from_json(r) for r in repos]
        if any(r is None for r in records):
            return None
        return cls(tuple(r for r in records if r is not None), task)


class WorkBook:
    """One JSON record per box made with a repository: `<data>/work/<host>/<box>.json`."""

    MAX = 1 << 20  # a task may be 64 KiB, and JSON writes a control character as six

    def __init__(self, paths: Paths) -> None:
        self.root = paths.data_dir / "work"
        self._counted: dict[tuple[str, str, str], int | None] = {}  # (repo, seed, head)

    def _path(self, host: str, name: str) -> Path:
        return self.root / host / f"{name}.json"

    def get(self, host: str, name: str) -> BoxWork | None:
        raw = read_state(self._path(host, name), self.MAX)
        if raw is None:
            return None
        try:
            record = BoxWork.from_json(json.loads(raw))
        except (UnicodeDecodeError, ValueError):
            record = None
        if record is None:  # not "made without a repository": it was, and this is damaged
            raise UnreadableFile(
                self._path(host, name),
                "not a work record (damaged?): restore it from a copy, or remove it and the "
                "box's diff and pull with it (its clone in the box is untouched)",
            )
        return record

    def put(self, host: str, name: str, work: BoxWork) -> None:
        make_folder(self.root / host)
        write_atomic(self._path(host, name), json.dumps(work.to_json(), indent=2).encode())

    def drop(self, host: str, name: str) -> None:
        self._path(host, name).unlink(missing_ok=True)

    def place(self, host: str, name: str) -> BoxWork | None:
        """The box's record for a listing: a damaged one shows as none (the verbs that
        need it say what is wrong)."""
        try:
            return self.get(host, name)
        except UnreadableFile:
            return None

    async def ahead(self, record: WorkRecord, box: str) -> int | None:
        """Commits the box's branch is ahead of its seed as far as the host knows: from
        the repository's remote-tracking ref of its last pull (read from the repository's
        files, counted by git once per commit it names); None before any pull, or when
        the repository cannot say."""
        head = pulled_head(Path(record.repo), gitops.target_ref(box, record.branch))
        if head is None:
            return None
        key = (record.repo, record.seed, head)
        if key not in self._counted:
            try:
                said = await gitops.git_out(
                    Path(record.repo), "rev-list", "--count", f"{record.seed}..{head}"
                )
            except (HbtuiError, OSError):
                said = ""
            self._counted[key] = int(said) if said.isdigit() else None
        return self._counted[key]


def pulled_head(repo: Path, ref: str) -> str | None:
    """The commit `ref` names in `repo` (a loose ref, else packed-refs), read from its
    files: no git process for a listing. None when `repo` is no plain repository here."""
    git = repo / ".git"
    try:
        raw = read_state(git / ref, 4096)
        if raw is None:
            packed = read_state(git / "packed-refs", 16 << 20) or b""
            tail = f" {ref}".encode()
            raw = next(
                (line[: -len(tail)] for line in packed.splitlines() if line.endswith(tail)), None
            )
    except (UnreadableFile, NotADirectoryError):
        return None
    sha = raw.decode(errors="replace").strip() if raw else ""
    return sha if SHA.fullmatch(sha) else None
