"""What the operations that take many options are asked to do, as one value each.

The CLI, the dashboard's dialogs and the tests' fake Service all build these and hand
them to `Service`; an option is added here once instead of in every signature between
a flag and the engine. Passphrases are not part of a spec: they are secrets, passed
beside it, so a spec can be shown, logged or compared freely.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hbtui.core.foundation.git import RepoSeed
from hbtui.names import LOCAL


@dataclass(frozen=True)
class WorkRequest:
    """`new --repo`: the seed to put in the box (and `more`, each another repository's,
    cloned beside it), and the agent to start on the task in the first."""

    seed: RepoSeed
    task: str = ""
    agent: str = ""
    copy: tuple[str, ...] = ()  # git-ignored files of the first work tree copied into its clone
    setup: bool = True  # run each repository's .hbtui/setup.sh in its clone before the agent
    more: tuple[RepoSeed, ...] = ()

    @property
    def seeds(self) -> tuple[RepoSeed, ...]:
        return (self.seed, *self.more)


@dataclass(frozen=True)
class NewSpec:
    """`hbtui new`: None anywhere means the configured default."""

    name: str
    host: str = LOCAL
    image: str | None = None
    cpus: int | None = None
    memory_mib: int | None = None
    port: int | None = None  # None: any free port (picked at random)
    recipe: Path | None = None
    start: bool = True
    use_base: bool = True  # from a base of the recipe and image when there is one
    branchable: bool | None = None
    credentials: tuple[str, ...] | None = None  # presets whose keys the engine holds
    egress: str | None = None
    allow: tuple[str, ...] | None = None  # hosts of an allow-list egress
    agent_permissions: str | None = None
    work: WorkRequest | None = None  # a repository cloned in the box, an agent on a task


@dataclass(frozen=True)
class SaveSpec:
    """`hbtui save`: a box's /data into an archive."""

    name: str
    host: str = LOCAL
    output: Path | None = None  # None: the backups folder
    verify: bool = True  # read the archive back before calling it saved


@dataclass(frozen=True)
class LoadSpec:
    """`hbtui load`: a new box from an archive."""

    archive: Path
    name: str
    host: str = LOCAL
    recipe: Path | None = None
    repo: Path | None = None  # the host repository a --repo box's archive links to
