"""Branching a box from the dashboard: the Branch dialog and the request it returns."""

from __future__ import annotations

from collections.abc import Awaitable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.widgets import Button, Checkbox, Input, Label, Static

from hbtui.core.agents import AgentSession
from hbtui.core.foundation import BoxView, PortSlot
from hbtui.events import Report
from hbtui.names import name_problem
from hbtui.tui.activity import BoxKey
from hbtui.tui.boxes.ending import sessions_text
from hbtui.tui.dialogs.base import Dialog, Field, int_or_none, name_taken, ok_cancel, port_problem
from hbtui.tui.requests import BoxRequest
from hbtui.tui.work.fields import SETUP_LABEL

if TYPE_CHECKING:
    from hbtui.core.service import Service


@dataclass(frozen=True)
class BranchRequest(BoxRequest):
    source: str
    port: int | None  # None: any free port
    setup: bool = True  # the repository's .hbtui/setup.sh runs in a branch of a box with one

    operation: ClassVar[str] = "branch"
    makes: ClassVar[bool] = True

    @property
    def holds(self) -> BoxKey:
        return (self.host, self.source)

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.branch(
            self.source, self.name, self.host, port=self.port, setup=self.setup, report=report
        )


class BranchDialog(Dialog[BranchRequest]):
    """A new box with the selected box's /data and installed state: its name and port,
    checked as typed, and which way the branch will go."""

    TITLE_TEXT = "Branch box"

    def __init__(
        self,
        service: Service,
        view: BoxView,
        taken: Collection[tuple[str, str]],
        *,
        ending: list[AgentSession] | None = None,
    ) -> None:
        super().__init__()
        self.service = service
        self.view = view
        self.taken = taken
        self.ending = ending or []  # the agents at work that restarting the source ends
        self.slots: list[PortSlot] = []

    def compose_body(self) -> ComposeResult:
        v = self.view
        if v.branchable:
            how = Text.assemble(
                ("⚡ ", "green"),
                f"{v.name} runs branchable: the engine branches it at once, memory included; "
                f"{v.name} keeps running.",
            )
        else:
            how = Text.assemble(
                ("⚠ ", "yellow"),
                f"{v.name} is not branchable: it stops, its disk is copied, and it starts "
                "again; its running processes (its agents too) end. "
                "(Make boxes with --branchable to branch them at once.)",
            )
        yield Static(how, classes="hint", markup=False)
        if self.ending:
            yield Static(
                Text(f"Its agents at work end when {v.name} stops:", style="bold yellow"),
                markup=False,
            )
            yield Static(sessions_text(self.ending), id="ending", markup=False)
        yield Label("Name of the new box")
        yield Field(value=f"{v.name}-b", placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem", markup=False)
        yield Label("Port")
        yield Field(value="auto", id="port")
        yield Label("", id="port-problem", classes="problem", markup=False)
        if v.repo:  # its clone goes with it, and the repository's setup runs there
            yield Checkbox(SETUP_LABEL, value=True, id="setup")
        yield from ok_cancel("Branch")

    def on_mount(self) -> None:
        self.focus_field(self.query_one("#name", Input))
        self.load_ports()
        self.check()

    @work(exclusive=True, group="ports", exit_on_error=False)
    async def load_ports(self) -> None:
        try:
            self.slots = await self.service.boxes.ports(self.view.host)
        except Exception as exc:
            self.notify(f"port map unavailable: {exc}", severity="warning")
        self.check()

    def check(self) -> bool:
        name = self.query_one("#name", Input).value.strip()
        problems = {
            "#name-problem": (name_problem(name) if name else "the new box needs a name")
            or name_taken(name, self.view.host, self.taken),
            "#port-problem": port_problem(
                self.query_one("#port", Input).value.strip(), self.slots, self.view.host
            ),
        }
        for selector, problem in problems.items():
            self.say(selector, problem or "")
        ok = not any(problems.values())
        self.query_one("#ok", Button).disabled = not ok
        return ok

    @on(Input.Changed)
    def field_changed(self) -> None:
        self.check()

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def branch(self, event: Input.Submitted | Button.Pressed) -> None:
        self.as_submitted(event)
        if self.check():
            self.dismiss(
                BranchRequest(
                    name=self.query_one("#name", Input).value.strip(),
                    host=self.view.host,
                    source=self.view.name,
                    port=int_or_none(self.query_one("#port", Input).value),
                    setup=all(c.value for c in self.query("#setup").results(Checkbox)),
                )
            )
