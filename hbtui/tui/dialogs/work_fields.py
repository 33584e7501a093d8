"""The New dialog's work fields (`new --repo PATH[@REF] --agent A --task TEXT`): a
repository to clone in the box, and an agent to start on a task there (docs/work.md).
The seed itself is resolved when the request runs (it runs git), not as typed."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.dom import DOMNode
from textual.widgets import Input, Label, Select

from hbtui.core.gitops import split_repo_ref
from hbtui.core.work import AGENTS, check_task
from hbtui.errors import HbtuiError
from hbtui.tui.dialogs.base import Field


def compose_work_fields() -> ComposeResult:
    with Horizontal(classes="row"):
        with Vertical(classes="wide"):
            yield Label("Repository to clone in the box: PATH[@REF]")
            yield Field(placeholder=".  or  ~/src/app@main", id="repo")
        with Vertical():
            yield Label("Agent")
            yield Select([(a, a) for a in AGENTS], prompt="none", id="agent")
    yield Label("Task (the agent's first prompt)")
    yield Field(placeholder="make the flaky test in tests/io pass", id="task")
    yield Label("", id="work-problem", classes="problem")


def work_fields(form: DOMNode) -> tuple[str, str, str]:
    """(repository, task, agent) as typed; "" for none."""
    agent = form.query_one("#agent", Select).value
    return (
        form.query_one("#repo", Input).value.strip(),
        form.query_one("#task", Input).value.strip(),
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
