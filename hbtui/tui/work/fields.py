"""The New dialog's work fields (`new --repo PATH[@REF] --agent A --task TEXT --copy PATH
[--no-setup]`): a repository to clone in the box, git-ignored files of its work tree to
copy into the clone, whether its `.hbtui/setup.sh` runs, and an agent to start on a task
there (docs/work.md). They are made when their section is first opened; until then each
is at its default. What needs git (the seed, whether git ignores the files to copy) is
read when the request runs, before any box is made, not as typed."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Checkbox, Label, Select

from hbtui.config import split_list
from hbtui.core.foundation import WorkRequest, split_repo_ref
from hbtui.core.work import AGENTS, check_task
from hbtui.errors import HbtuiError
from hbtui.tui.dialogs.base import Field

if TYPE_CHECKING:
    from hbtui.core.service import Service

SETUP_LABEL = "Run the repository's .hbtui/setup.sh in the clone (if it has one)"


def compose_work_fields(keep: Callable[[Widget], object]) -> ComposeResult:
    """The fields, each handed to `keep` as it is made (the form reads them from then on)."""
    repo = Field(placeholder=".  or  ~/src/app@main", id="repo")
    agent = Select([(a, a) for a in AGENTS], prompt="none", id="agent")
    copy = Field(placeholder=".env, config/local.json", id="copy")
    setup = Checkbox(SETUP_LABEL, value=True, id="setup")
    task = Field(placeholder="make the flaky test in tests/io pass", id="task")
    problem = Label("", id="work-problem", classes="problem", markup=False)
    for widget in (repo, agent, copy, setup, task, problem):
        keep(widget)
    with Horizontal(classes="row"):
        with Vertical(classes="wide"):
            yield Label("Repository to clone in the box: PATH[@REF]")
            yield repo
        with Vertical():
            yield Label("Agent")
            yield agent
    yield Label("Copy into the clone: git-ignored files of its work tree, comma-separated")
    yield copy
    yield setup
    yield Label("Task (the agent's first prompt)")
    yield task
    yield problem


# The fields before the section is opened.
WORK_DEFAULTS: dict[str, object] = {
    "#repo": "",
    "#task": "",
    "#agent": "",
    "#copy": "",
    "#setup": True,
}


@dataclass(frozen=True)
class WorkFields:
    """The section as typed ("" and () for none): what the request carries."""

    repo: str = ""
    task: str = ""
    agent: str = ""
    copy: tuple[str, ...] = ()
    setup: bool = True

    @classmethod
    def read(cls, value: Callable[[str], object]) -> WorkFields:
        """Each field read by `value(selector)`."""
        agent = value("#agent")
        return cls(
            str(value("#repo")).strip(),
            str(value("#task")).strip(),
            agent if isinstance(agent, str) else "",
            tuple(split_list(str(value("#copy")))),
            bool(value("#setup")),
        )

    def problem(self) -> str | None:
        """The fields as `new --repo --task --agent --copy` checks them, short of git."""
        if not self.repo:
            if self.task or self.agent:
                return "a task or an agent needs a repository"
            return "files to copy need a repository (the clone they go into)" if self.copy else None
        try:
            path, _ = split_repo_ref(self.repo)
            if not path.is_dir():
                return f"{path} is not a folder"
            check_task(self.task, self.agent)
        except HbtuiError as exc:
            return exc.message
        return next((p for c in self.copy if (p := copy_problem(path, c))), None)

    async def request(self, service: Service) -> WorkRequest | None:
        """What the box is made with (None: no repository): the seed read and the files
        to copy checked as `new` checks them, by git; a UsageError refuses it first."""
        if not self.repo:
            return None
        seed = await service.work.repo_seed(self.repo)
        copy = await service.work.repo_copies(seed, self.copy) if self.copy else ()
        return WorkRequest(seed, self.task, self.agent, copy=copy, setup=self.setup)


def copy_problem(top: Path, text: str) -> str | None:
    """A path to copy that is missing, or that is or leads outside the work tree `top`."""
    given = Path(text).expanduser()
    named = Path(os.path.normpath(given if given.is_absolute() else top / given))
    if not named.exists():
        return f"copy {text}: {named} does not exist"
    real_top = top.resolve()
    for each in (named.parent.resolve() / named.name, named.resolve()):
        if real_top not in each.parents:
            return f"copy {text}: {named.resolve()} is not inside the work tree {top}"
    return None
