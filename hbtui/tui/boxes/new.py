"""Making a box from the dashboard: the New box dialog and the request it returns (it
knows the Service call that runs it). The Branch dialog is in branch.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Button, Checkbox, Input, Label, Select

from hbtui.config import split_list
from hbtui.core.foundation import NewSpec
from hbtui.errors import HbtuiError
from hbtui.events import Report
from hbtui.names import LOCAL, name_problem
from hbtui.tui.boxes.new_options import (
    allow_problem,
    compose_options,
    credentials_problem,
    option_defaults,
)
from hbtui.tui.boxes.port_grid import PortGrid
from hbtui.tui.dialogs.base import (
    Dialog,
    Field,
    LazySection,
    host_select,
    int_or_none,
    name_taken,
    ok_cancel,
    port_problem,
)
from hbtui.tui.requests import SpecRequest
from hbtui.tui.work.fields import WORK_DEFAULTS, WorkFields, compose_work_fields

if TYPE_CHECKING:
    from hbtui.core.service import Service
    from hbtui.tui.failure import Failure


W = TypeVar("W", bound=Widget)


@dataclass(frozen=True)
class NewBoxRequest(SpecRequest):
    spec: NewSpec
    work: WorkFields = field(default_factory=WorkFields)  # a repository, resolved as it runs

    operation: ClassVar[str] = "new"
    makes: ClassVar[bool] = True

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return self._new(service, report)

    async def _new(self, service: Service, report: Report) -> object:
        """The repository's seed and the files to copy are read first (git runs): a wrong
        one is refused before any box exists, and the dialog says why."""
        work = await self.work.request(service)
        spec = replace(self.spec, work=work) if work is not None else self.spec
        return await service.new(spec, report=report)


# The folded sections' fields and problem lines, by the id of their section.
SECTION_OF = {
    **dict.fromkeys(
        ("#use-base", "#branchable", "#credentials", "#credentials-problem", "#egress"),
        "options",
    ),
    **dict.fromkeys(("#allow", "#allow-problem", "#cpus", "#memory"), "options"),
    **dict.fromkeys((*WORK_DEFAULTS, "#work-problem"), "work"),
}
PORT_HINT = "Pick a free port below (enter or click), or leave auto: any free port"


class NewBoxDialog(Dialog[NewBoxRequest]):
    """Name, image, recipe, CPUs, memory, port: each checked as you type (the name's
    rule and that no box on the host has it; a recipe folder; a free port in range).

    It shows before it asks the Service anything: the configured recipe, the presets and
    stored secrets, the plan and the port map come from workers and fill in after the
    first paint (Create stays off until they have). A key checks only what it can change,
    in memory: the plan is worked out again only when the host, image, recipe or base
    choice changes, never on a name or port key.
    """

    TITLE_TEXT = "New box"

    @dataclass
    class Requested(Message):
        """Create was pressed: the App starts `request`, then dismisses the dialog once
        the box exists, or calls `refused` (the dialog stays open)."""

        dialog: NewBoxDialog
        request: NewBoxRequest

    def __init__(
        self,
        service: Service,
        taken: Collection[tuple[str, str]] = (),
        *,
        port: int | None = None,
    ) -> None:
        super().__init__()
        self.service = service
        self.hosts = service.hosts.names()
        self._made: dict[str, Widget] = {}  # the folded sections' widgets made, by selector
        # The folded sections' fields until they are opened (see `value`).
        self._defaults = {**option_defaults(service.config.defaults), **WORK_DEFAULTS}
        self._fresh(taken, port)

    def _fresh(self, taken: Collection[tuple[str, str]], port: int | None) -> None:
        """What one opening of the dialog knows, as it starts."""
        self.taken = taken  # (host, name) of the boxes there are
        self.port = port  # picked in the main screen's port allocator
        self.pending: NewBoxRequest | None = None  # sent, not yet made or refused
        self.cancel_request: Callable[[], None] | None = None  # given by the App
        # From the Service, once read (see load_context): None until then.
        self._presets: set[str] | None = None
        self._create_when_read = False  # Create was asked for before the reads came in
        self._stored: set[str] = set()
        self._recipe_checked: tuple[str, str | None] | None = None  # (text, its problem)
        self._planned: tuple[object, ...] | None = None  # what the plan shown is for
        self._said = {}
        self._close_when_current = False
        self._reopened = False  # reopen() ran: the reads are due once it shows

    def _fields(self) -> dict[str, str]:
        """The fields outside the folded sections, as they start."""
        image = self.service.config.defaults.image
        return {"#name": "", "#image": image, "#recipe": "", "#port": str(self.port or "auto")}

    def compose_body(self) -> ComposeResult:
        yield Label("Name")
        yield Field(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem", markup=False)
        yield from host_select(self.hosts)
        with Horizontal(classes="row"):
            with Vertical():
                yield Label("Image")
                yield Field(value=self._fields()["#image"], id="image")
            with Vertical(classes="wide"):
                yield Label("Recipe (a folder with provision/provision.sh)")
                yield Field(placeholder="reading the configured recipe…", id="recipe")
        yield Label("", id="recipe-problem", classes="problem", markup=False)
        yield Label("", id="plan", classes="hint", markup=False)
        yield LazySection(
            "Options: base, branchable, credentials, egress, CPUs, memory",
            partial(compose_options, self.value, self.keep),
            id="options",
        )
        yield LazySection(
            "Work: a repository to clone, an agent on a task",
            partial(compose_work_fields, self.keep),
            id="work",
        )
        with Horizontal(classes="row"):
            yield Label("Port", classes="inline")
            yield Field(value=self._fields()["#port"], id="port")
        yield Label("", id="port-problem", classes="problem", markup=False)
        yield Label(PORT_HINT, id="port-hint", classes="hint", markup=False)
        yield PortGrid(id="new-port-grid")
        status = Label("", id="request-status", markup=False)
        status.display = False  # until Create is pressed
        yield status
        yield from ok_cancel("Create", disabled=True)

    def keep(self, widget: W) -> W:
        """Note a folded section's widget as it is made: the form reads it from then on
        (a widget inside a container is found by a query only once that has mounted)."""
        self._made[f"#{widget.id}"] = widget
        return widget

    def _filled(self, selector: str) -> bool:
        """Whether the field (or problem line) is there: always, unless it is one of a
        folded section's that has not been made yet. Asked without a query (a query walks
        the whole form: a few per key were most of what a key cost)."""
        return selector not in SECTION_OF or selector in self._made

    def value(self, selector: str) -> Any:
        """A field's value: as typed once its section is open, the configured default
        before."""
        widget = self._made.get(selector)
        if widget is None:
            return self._defaults[selector]
        assert isinstance(widget, Input | Checkbox | Select)
        return widget.value

    def _configured_recipe(self) -> str:
        """The recipe `new` would use: the setting resolved, or as set when it is wrong."""
        try:
            return str(self.service.boxes.recipe_dir())
        except HbtuiError:
            return self.service.config.recipe_setting()

    def on_mount(self) -> None:
        self.focus_field(self.query_one("#name", Input))
        self.check()
        # The reads start once the first frame is drawn: answered before it (the port map
        # at once), they would lay out and draw the form a second time ahead of that frame.
        self.call_after_refresh(self._load)

    def reopen(self, taken: Collection[tuple[str, str]], *, port: int | None = None) -> None:
        """Open again, closed before, as a new dialog would: the App keeps this one, since
        composing its widgets was most of what opening it cost. Every field at its default
        (a folded section's made fields too, the section folded), every line as composed,
        the form unlocked, nothing of the last request, the port map and the reads to come
        again once it shows. Called before it is pushed."""
        self.workers.cancel_node(self)  # a late answer for the last opening changes nothing
        self._fresh(taken, port)
        self._reopened = True
        for selector, value in {**self._fields(), **self._defaults}.items():
            widget = (
                self.query_one(selector) if selector not in SECTION_OF else self._made.get(selector)
            )
            if isinstance(widget, Select) and value == "":
                value = Select.NULL
            if isinstance(widget, Input | Checkbox | Select) and widget.value != value:
                widget.value = value
        if self.hosts[1:]:
            self.query_one("#host", Select).value = LOCAL
        for section in self.query(LazySection):
            section.collapsed = True
        self.query_one("#plan", Label).update("")
        self.query_one("#plan", Label).display = True
        self.query_one("#port-hint", Label).update(PORT_HINT)
        status = self.query_one("#request-status", Label)
        status.update("")
        status.display = False
        grid = self.query_one(PortGrid)
        grid.picked, grid.hovered, grid.cursor = port, None, 0
        grid.set_slots([])
        self._lock(False)
        self.query_one(".dialog").scroll_home(animate=False)
        self.focus_field(self.query_one("#name", Input))

    def on_screen_resume(self) -> None:
        # Closable's own handler runs too (Textual calls each class's): calling it here
        # as well dismissed twice, and the second popped the main screen.
        if self._reopened:  # the reads, once the first frame is drawn (see on_mount)
            self._reopened = False
            self.call_after_refresh(self._load)

    def _load(self) -> None:
        self.load_context()
        self.load_ports()

    @work(exclusive=True, group="context", exit_on_error=False)
    async def load_context(self) -> None:
        """Read-only, off the event loop: the configured recipe, the presets, the stored
        secrets (the registry and the secrets file)."""

        def read() -> tuple[str, str | None, set[str], set[str]]:
            recipe = self._configured_recipe()
            try:
                stored = {s.name for s in self.service.secrets.listing()}
            except (HbtuiError, OSError) as exc:  # a damaged secrets file: none can be used
                self.app.call_from_thread(
                    self.notify, str(exc), title="stored secrets unreadable", severity="warning"
                )
                stored = set()
            presets = {p.name for p in self.service.secrets.presets()}
            return recipe, self._check_recipe(recipe), presets, stored

        recipe, problem, presets, stored = await asyncio.to_thread(read)
        field = self.query_one("#recipe", Input)
        if not field.value:  # unless one was typed meanwhile
            field.value = recipe
            self._recipe_checked = (recipe, problem)
        self._presets, self._stored = presets, stored
        if self._create_when_read:  # typed ahead of the reads: the Enter is not lost
            self._create_when_read = False
            self._lock(False)
            self._create()
        else:
            self.check()

    def problems(self) -> dict[str, str | None]:
        """What is wrong with each field now, by the id of its problem line."""
        name = self.query_one("#name", Input).value.strip()
        recipe = self.query_one("#recipe", Input).value.strip()
        return {
            "#name-problem": (name_problem(name) if name else None)
            or name_taken(name, self.host, self.taken),
            "#recipe-problem": self._recipe_problem(recipe),
            "#credentials-problem": self._credentials_problem(),
            "#allow-problem": self._allow_problem(),
            "#work-problem": WorkFields.read(self.value).problem(),
            "#port-problem": port_problem(
                self.query_one("#port", Input).value.strip(),
                self.query_one(PortGrid).slots,
                self.host,
            ),
        }

    def _credentials_problem(self) -> str | None:
        return credentials_problem(str(self.value("#credentials")), self._presets, self._stored)

    def _allow_problem(self) -> str | None:
        egress = str(self.value("#egress"))
        if self._filled("#allow"):  # the list's field shows only for an allow list
            self._made["#allow"].display = egress == "allow-list"
            self._made["#allow-label"].display = egress == "allow-list"
        return allow_problem(egress, str(self.value("#allow")), str(self.value("#credentials")))

    def _plan_inputs(self) -> tuple[str, str | None, Path | None, bool]:
        recipe = self.query_one("#recipe", Input).value.strip()
        return (
            self.host,
            self.query_one("#image", Input).value.strip() or None,
            Path(recipe) if recipe else None,
            bool(self.value("#use-base")),
        )

    @work(exclusive=True, group="plan", exit_on_error=False)
    async def show_plan(self) -> None:
        """How the box will be made: from a base (fast) or with the whole recipe, and why
        (the recipe hashed, the bases read: off the event loop, and only for new inputs)."""
        inputs = self._plan_inputs()
        if inputs == self._planned:
            return
        self._planned = inputs
        host, image, recipe, use_base = inputs
        try:
            plan = await asyncio.to_thread(
                self.service.boxes.plan, host=host, image=image, recipe=recipe, use_base=use_base
            )
        except (HbtuiError, OSError, RuntimeError):
            self.say("#plan", "")
            return
        if plan.fast:
            self.say("#plan", Text(f"⚡ {plan.why}", "green"))
        elif plan.stale:
            self.say("#plan", Text(f"⚠ {plan.why}: untick 'From a base' or {plan.hint}", "yellow"))
        else:
            self.say("#plan", Text(plan.why + (f"; {plan.hint}" if plan.hint else ""), "dim"))

    def _recipe_problem(self, text: str) -> str | None:
        """The typed recipe's problem, checked again only when the text changes."""
        if self._presets is None:
            return None  # the configured recipe is still being read
        if self._recipe_checked is None or self._recipe_checked[0] != text:
            self._recipe_checked = (text, self._check_recipe(text))
        return self._recipe_checked[1]

    def _check_recipe(self, text: str) -> str | None:
        if not text:
            return "which recipe? (a folder with provision/provision.sh)"
        try:
            self.service.boxes.recipe_dir(Path(text))
        except (HbtuiError, OSError, RuntimeError) as exc:  # RuntimeError: ~user unknown
            return str(exc)
        return None

    def check(self) -> bool:
        """Show each field's problem; Create only when there is none and a name."""
        problems = self.problems()
        for selector, problem in problems.items():
            if self._filled(selector):
                self.say(selector, problem or "")  # a line only when there is something to say
            elif problem:  # a default of a folded section: open it to show what is wrong
                self.query_one(f"#{SECTION_OF[selector]}", LazySection).collapsed = False
        ok = (
            not any(problems.values())
            and self._presets is not None
            and bool(self.query_one("#name", Input).value.strip())
        )
        self.query_one("#ok", Button).disabled = not ok
        if self._presets is not None and self._plan_inputs() != self._planned:
            self.show_plan()
        return ok

    @property
    def host(self) -> str:
        return str(self.query_one("#host", Select).value) if self.hosts[1:] else LOCAL

    @work(exclusive=True, group="ports", exit_on_error=False)
    async def load_ports(self) -> None:
        """Read-only: the chosen host's port map for the grid."""
        grid = self.query_one(PortGrid)
        try:
            grid.set_slots(await self.service.boxes.ports(self.host))
        except Exception as exc:
            self.query_one("#port-hint", Label).update(Text(f"port map unavailable: {exc}", "red"))
        self.check()  # the typed port against this host's map

    @on(Select.Changed, "#host")
    def host_changed(self) -> None:
        self.load_ports()
        self.check()

    @on(Input.Changed, "#name")
    @on(Input.Changed, "#recipe")
    @on(Input.Changed, "#image")
    @on(Input.Changed, "#credentials")
    @on(Input.Changed, "#allow")
    @on(Input.Changed, "#repo")
    @on(Input.Changed, "#task")
    @on(Input.Changed, "#copy")
    @on(Select.Changed, "#agent")
    @on(Select.Changed, "#egress")
    @on(Checkbox.Changed, "#use-base")
    def field_changed(self) -> None:
        self.check()

    @on(LazySection.Filled)
    def section_filled(self) -> None:
        self.check()  # its fields as made, their problem lines included

    @on(Input.Changed, "#port")
    def port_typed(self, event: Input.Changed) -> None:
        port = int_or_none(event.value)
        grid = self.query_one(PortGrid)
        grid.picked = port
        if port is not None:
            grid.move_to(port)
        grid.refresh()
        self.check()

    @on(PortGrid.Picked)
    def port_picked(self, event: PortGrid.Picked) -> None:
        self.query_one("#port", Input).value = str(event.port)

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def create(self, event: Input.Submitted | Button.Pressed) -> None:
        if self.pending is not None:
            return
        self.as_submitted(event)
        if self._presets is None:  # the recipe and the presets are still being read
            # Carried out once they are in, for the form as it is now: locked meanwhile,
            # as a sent one is. Not when what can be told already is wrong.
            if any(self.problems().values()):
                self.check()
            else:
                self._create_when_read = True
                self._lock(True)
            return
        self._create()

    def _create(self) -> None:
        name = self.query_one("#name", Input).value.strip()
        if not self.check():
            self.query_one("#name", Input).focus()
            return
        value = self.value
        egress = str(value("#egress"))
        self._send(
            NewBoxRequest(
                NewSpec(
                    name,
                    host=self.host,
                    image=self.query_one("#image", Input).value.strip() or None,
                    cpus=int_or_none(value("#cpus")),
                    memory_mib=int_or_none(value("#memory")),
                    port=int_or_none(self.query_one("#port", Input).value),
                    recipe=self.service.boxes.recipe_dir(
                        Path(self.query_one("#recipe", Input).value)
                    ),
                    use_base=value("#use-base"),
                    branchable=value("#branchable"),
                    credentials=tuple(split_list(value("#credentials"))),
                    egress=egress or None,
                    allow=(tuple(split_list(value("#allow"))) if egress == "allow-list" else None),
                ),
                WorkFields.read(value),
            )
        )

    def _send(self, request: NewBoxRequest) -> None:
        """Lock the form (keys typed meanwhile change nothing) and hand the request over."""
        self.pending = request
        self._lock(True)
        self.query_one("#request-status", Label).display = True
        self.query_one("#request-status", Label).update(
            Text(f"creating {request.spec.name}… (esc cancels)", "cyan")
        )
        self.post_message(self.Requested(self, request))

    def _lock(self, locked: bool) -> None:
        for widget in self.query("Input, Select, Checkbox, PortGrid, Button, LazySection"):
            widget.disabled = locked
        if not locked:
            self.check()  # Create as the fields allow

    def refused(self, failure: Failure) -> None:
        """The request ended before any box existed: say why and stay open (cancelled: close)."""
        self.pending = None
        self.cancel_request = None
        if failure.cancelled:
            self.close()
            return
        self._lock(False)
        self.query_one("#request-status", Label).update(Text(failure.text, "bold red"))
        self.query_one("#name", Input).focus()

    def action_cancel(self) -> None:
        if self.pending is None:
            self.dismiss(None)
        elif self.cancel_request is not None:
            self.cancel_request()  # the App closes the dialog once it has rolled back
            self.query_one("#request-status", Label).update(
                Text(f"cancelling {self.pending.spec.name}…", "yellow")
            )
