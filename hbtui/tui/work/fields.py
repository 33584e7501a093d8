"""The New dialog's work fields (`new --repo PATH[@REF] --agent A --task TEXT`): a
repository to clone in the box, and an agent to start on a task there (docs/work.md).
They are made when their section is first opened; until then each is empty. The seed
itself is resolved when the request runs (it runs git), not as typed."""

from __future__ import annotations

from collections.abc import Callable

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Label, Select

from hbtui.core.foundation import split_repo_ref
from hbtui.core.work import AGENTS, check_task
from hbtui.errors import HbtuiError
from hbtui.tui.dialogs.base import Field


def compose_work_fields(keep: Callable[[Widget], object]) -> ComposeResult:
    """The fields, each handed to `keep` as it is made (the form reads them from then on)."""
    repo = Field(placeholder=".  or  ~/src/app@main", id="repo")
    agent = Select([(a, a) for a in AGENTS], prompt="none", id="agent")
    task = Field(placeholder="make the flaky test in tests/io pass", id="task")
    problem = Label("", id="work-problem", classes="problem", markup=False)
    for widget in (repo, agent, task, problem):
        keep(widget)
    with Horizontal(classes="row"):
        with Vertical(classes="wide"):
            yield Label("Repository to clone in the box: PATH[@REF]")
            yield repo
        with Vertical():
            yield Label("Agent")
            yield agent
    yield Label("Task (the agent's first prompt)")
    yield task
    yield problem


WORK_DEFAULTS = {"#repo": "", "#task": "", "#agent": ""}  # before the section is opened


def work_fields(value: Callable[[str], object]) -> tuple[str, str, str]:
    """(repository, task, agent) as typed, each read by `value(selector)`; "" for none."""
    repo, task, agent = (value(selector) for selector in ("#repo", "#task", "#agent"))
    return (
        str(repo).strip(),
        str(task).strip(),
        agent if isinstance(agent, str) else "",
    )


def work_problem(repo: str, task: str, agent: str) -> str | None:
    """The fields as `new --repo --task --agent` checks them."""
    if not repo:
        return "a task or an agent needs a repository" if task or agent else None
    try:
        path, _ = split_repo_ref(repo)
        if not path.is_dir():
            return f"{path} is not a folder"
        check_task(task, agent)
    except HbtuiError as exc:
        return exc.message
    return None
