"""The modal dialogs: new box, delete, save, load, extract, and a URL with no browser.

A dialog only collects input: submitting it dismisses it with a request
(`NewBoxRequest`, `DeleteRequest`, `SaveRequest`, `LoadRequest`,
`ExtractRequest`) holding the values as they were at that moment, and the
App runs the request. A dialog may ask the Service read-only questions (the
port map, whether a file is an archive or a folder a recipe, the backups
folder's archives) but never changes anything. Fields are checked as they
are typed, so a request that leaves a dialog has no problem the dialog
could have seen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, DataTable, Input, Label, Select, Static

from hbtui.config import EGRESS_MODES, host_pattern_problem, split_list
from hbtui.core.ports import BUSY, USED, PortSlot
from hbtui.core.views import BoxView
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL, name_problem
from hbtui.present import human_bytes
from hbtui.tui.widgets.port_grid import PortGrid

if TYPE_CHECKING:
    from hbtui.core.backups import ArchiveEntry
    from hbtui.core.service import Service

DIALOG_CSS = Path(__file__).with_name("dialogs.tcss")

R = TypeVar("R")


# -- what the dialogs return ---------------------------------------------------------------


@dataclass(frozen=True)
class NewBoxRequest:
    name: str
    host: str
    image: str  # "": the configured default
    cpus: int | None
    memory_mib: int | None
    port: int | None  # None: any free port
    recipe: Path | None = None  # None: the configured one
    use_base: bool = True  # from a base of the recipe when there is one
    branchable: bool = False
    credentials: tuple[str, ...] = ()  # presets whose keys the engine holds for the box
    egress: str = ""  # "": the configured policy
    allow: tuple[str, ...] = ()


@dataclass(frozen=True)
class BranchRequest:
    source: str
    name: str
    host: str
    port: int | None  # None: any free port


@dataclass(frozen=True)
class DeleteRequest:
    name: str
    host: str


@dataclass(frozen=True)
class SaveRequest:
    name: str
    host: str
    output: Path | None  # None: the backups folder
    passphrase: bytes = field(repr=False)
    verify: bool = True


@dataclass(frozen=True)
class LoadRequest:
    archive: Path
    name: str
    host: str
    passphrase: bytes = field(repr=False)


@dataclass(frozen=True)
class ExtractRequest:
    archive: Path
    dest: Path | None  # None: next to the archive
    passphrase: bytes = field(repr=False)


# -- the dialogs ---------------------------------------------------------------------------


class Field(Input):
    """A dialog's text field: enter submits the value as it was when enter was typed.

    Input's enter binding runs only once the key has bubbled up to the App, and
    by then the field may have taken the keys typed after it (`rr2`, enter, `z`
    submitted `rr2z`). Here enter is handled in the field's own queue, in the
    order the keys came.
    """

    async def _on_key(self, event: events.Key) -> None:
        # Textual calls Input's own handler after this one unless the default is prevented.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            await self.action_submit()


class Dialog(ModalScreen[R | None]):
    """A centred box with a title; escape cancels (dismisses with None)."""

    CSS_PATH = DIALOG_CSS  # read when the first dialog opens, not at startup
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]
    TITLE_TEXT = ""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.TITLE_TEXT, classes="dialog-title")
            yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def cancel_pressed(self) -> None:
        self.action_cancel()

    @staticmethod
    def as_submitted(event: Message) -> None:
        """Keys typed just after enter can reach a field before its Submitted message
        reaches the dialog: put the value back as it was submitted."""
        if isinstance(event, Input.Submitted):
            event.input.value = event.value


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _host_select(hosts: list[str]) -> ComposeResult:
    """A host choice, shown only when there is more than this machine."""
    if len(hosts) > 1:
        yield Label("Host")
        yield Select([(h, h) for h in hosts], value=LOCAL, allow_blank=False, id="host")


def _port_problem(text: str, slots: list[PortSlot], host: str) -> str | None:
    """Why a typed port cannot be the new box's (the host's port map, once loaded)."""
    if text in ("", "auto"):
        return None
    if not text.isdigit():
        return "the port is 'auto' or a number"
    port = int(text)
    if slots and not slots[0].port <= port <= slots[-1].port:
        return f"port {port} is outside {host}'s range {slots[0].port}-{slots[-1].port}"
    slot = next((s for s in slots if s.port == port), None)
    if slot is not None and slot.state == USED:
        return f"port {port} is used by box {slot.box}"
    if slot is not None and slot.state == BUSY:
        return f"port {port} is busy: another program on {host} listens there"
    return None


def _name_taken(name: str, host: str, taken: Collection[tuple[str, str]]) -> str | None:
    return f"a box named {name} exists on {host}" if (host, name) in taken else None


class NewBoxDialog(Dialog[NewBoxRequest]):
    """Name, image, recipe, CPUs, memory, port: each checked as you type (the name's
    rule and that no box on the host has it; a recipe folder; a free port in range)."""

    TITLE_TEXT = "New box"

    class Requested(Message):
        """Create was pressed: the App starts `request`, then dismisses the dialog once
        the box exists, or calls `refused` (the dialog stays open)."""

        def __init__(self, dialog: NewBoxDialog, request: NewBoxRequest) -> None:
            super().__init__()
            self.dialog = dialog
            self.request = request

    def __init__(
        self,
        service: Service,
        taken: Collection[tuple[str, str]] = (),
        *,
        port: int | None = None,
    ) -> None:
        super().__init__()
        self.service = service
        self.taken = taken  # (host, name) of the boxes there are
        self.port = port  # picked in the main screen's port allocator
        self.pending: NewBoxRequest | None = None  # sent, not yet made or refused
        self._close_when_current = False
        self.cancel_request: Callable[[], None] | None = None  # given by the App

    def compose_body(self) -> ComposeResult:
        defaults = self.service.config.defaults
        yield Label("Name")
        yield Field(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem")
        yield from _host_select(self.service.host_names())
        with Horizontal(classes="row"):
            with Vertical():
                yield Label("Image")
                yield Field(value=defaults.image, id="image")
            with Vertical(classes="wide"):
                yield Label("Recipe (a folder with provision/provision.sh)")
                yield Field(value=self._configured_recipe(), id="recipe")
        yield Label("", id="recipe-problem", classes="problem")
        with Horizontal(classes="row"):
            yield Checkbox("From a base when there is one", value=defaults.use_bases, id="use-base")
            yield Checkbox("Branchable", value=defaults.branchable, id="branchable")
        yield Label("", id="plan", classes="hint")
        with Horizontal(classes="row"):
            with Vertical(classes="wide"):
                yield Label("Credentials (presets; the keys stay out)")
                yield Field(
                    value=defaults.credentials, placeholder="anthropic,github", id="credentials"
                )
            with Vertical():
                yield Label("Egress")
                yield Select(
                    [(mode, mode) for mode in EGRESS_MODES],
                    value=defaults.egress,
                    allow_blank=False,
                    id="egress",
                )
        yield Label("", id="credentials-problem", classes="problem")
        yield Label("Allow list (hosts, comma-separated)", id="allow-label")
        yield Field(value=defaults.allow, placeholder="pypi.org,*.npmjs.org", id="allow")
        yield Label("", id="allow-problem", classes="problem")
        with Horizontal(classes="row"):
            with Vertical():
                yield Label("CPUs")
                yield Field(value=str(defaults.cpus), type="integer", id="cpus")
            with Vertical():
                yield Label("Memory (MiB)")
                yield Field(value=str(defaults.memory_mib), type="integer", id="memory")
            with Vertical():
                yield Label("Port")
                yield Field(value=str(self.port) if self.port else "auto", id="port")
        yield Label("", id="port-problem", classes="problem")
        yield Label("Pick a free port below (enter or click), or leave auto", classes="hint")
        yield PortGrid(id="new-port-grid")
        status = Label("", id="request-status")
        status.display = False  # until Create is pressed
        yield status
        with Horizontal(classes="buttons"):
            yield Button("Create", variant="primary", id="ok", disabled=True)
            yield Button("Cancel", id="cancel")

    def _configured_recipe(self) -> str:
        """The recipe `new` would use: the setting resolved, or as set when it is wrong."""
        try:
            return str(self.service.recipe_dir())
        except HbtuiError:
            return self.service.config.recipe_setting()

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()
        self._presets = {p.name for p in self.service.credential_presets()}
        self._stored = {s.name for s in self.service.secrets()}
        self.load_ports()
        self.check()

    def problems(self) -> dict[str, str | None]:
        """What is wrong with each field now, by the id of its problem line."""
        name = self.query_one("#name", Input).value.strip()
        recipe = self.query_one("#recipe", Input).value.strip()
        return {
            "#name-problem": (name_problem(name) if name else None)
            or _name_taken(name, self.host, self.taken),
            "#recipe-problem": self._recipe_problem(recipe),
            "#credentials-problem": self._credentials_problem(),
            "#allow-problem": self._allow_problem(),
            "#port-problem": _port_problem(
                self.query_one("#port", Input).value.strip(),
                self.query_one(PortGrid).slots,
                self.host,
            ),
        }

    def _credentials_problem(self) -> str | None:
        for name in split_list(self.query_one("#credentials", Input).value):
            if name not in self._presets:
                return f"no preset {name!r}; known: {', '.join(sorted(self._presets))}"
            if name not in self._stored:
                return f"no secret {name!r} stored: hbtui secrets set {name}"
        return None

    def _allow_problem(self) -> str | None:
        allow_list = self.query_one("#egress", Select).value == "allow-list"
        self.query_one("#allow", Input).display = allow_list
        self.query_one("#allow-label", Label).display = allow_list
        if not allow_list:
            return None
        hosts = split_list(self.query_one("#allow", Input).value)
        bad = next((h for h in hosts if host_pattern_problem(h)), None)
        if bad:
            return f"{bad!r}: {host_pattern_problem(bad)}"
        if not hosts and not split_list(self.query_one("#credentials", Input).value):
            return "an allow list needs a host (or a credential, whose hosts it adds)"
        return None

    def _show_plan(self) -> None:
        """How the box will be made: from a base (fast) or with the whole recipe, and why."""
        label = self.query_one("#plan", Label)
        recipe = self.query_one("#recipe", Input).value.strip()
        try:
            plan = self.service.new_plan(
                host=self.host,
                image=self.query_one("#image", Input).value.strip() or None,
                recipe=Path(recipe) if recipe else None,
                use_base=self.query_one("#use-base", Checkbox).value,
            )
        except (HbtuiError, OSError, RuntimeError):
            label.update("")
            return
        if plan.fast:
            label.update(Text(f"⚡ {plan.why}", "green"))
        elif plan.stale:
            label.update(Text(f"⚠ {plan.why}: untick 'From a base' or {plan.hint}", "yellow"))
        else:
            label.update(Text(plan.why + (f"; {plan.hint}" if plan.hint else ""), "dim"))

    def _recipe_problem(self, text: str) -> str | None:
        if not text:
            return "which recipe? (a folder with provision/provision.sh)"
        try:
            self.service.recipe_dir(Path(text))
        except (HbtuiError, OSError, RuntimeError) as exc:  # RuntimeError: ~user unknown
            return str(exc)
        return None

    def check(self) -> bool:
        """Show each field's problem; Create only when there is none and a name."""
        problems = self.problems()
        for selector, problem in problems.items():
            label = self.query_one(selector, Label)
            label.update(problem or "")
            label.display = bool(problem)  # a line only when there is something to say
        ok = not any(problems.values()) and bool(self.query_one("#name", Input).value.strip())
        self.query_one("#ok", Button).disabled = not ok
        self._show_plan()
        return ok

    @property
    def host(self) -> str:
        select = self.query("#host")
        return str(select.first(Select).value) if select else LOCAL

    @work(exclusive=True, group="ports", exit_on_error=False)
    async def load_ports(self) -> None:
        """Read-only: the chosen host's port map for the grid."""
        grid = self.query_one(PortGrid)
        try:
            grid.set_slots(await self.service.ports(self.host))
        except Exception as exc:
            self.query_one(".hint", Label).update(Text(f"port map unavailable: {exc}", "red"))
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
    @on(Select.Changed, "#egress")
    @on(Checkbox.Changed, "#use-base")
    def field_changed(self) -> None:
        self.check()

    @on(Input.Changed, "#port")
    def port_typed(self, event: Input.Changed) -> None:
        port = _int_or_none(event.value)
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
        name = self.query_one("#name", Input).value.strip()
        if not self.check():
            self.query_one("#name", Input).focus()
            return
        port = _int_or_none(self.query_one("#port", Input).value)
        self._send(
            NewBoxRequest(
                name=name,
                host=self.host,
                image=self.query_one("#image", Input).value.strip(),
                cpus=_int_or_none(self.query_one("#cpus", Input).value),
                memory_mib=_int_or_none(self.query_one("#memory", Input).value),
                port=port,
                recipe=self.service.recipe_dir(Path(self.query_one("#recipe", Input).value)),
                use_base=self.query_one("#use-base", Checkbox).value,
                branchable=self.query_one("#branchable", Checkbox).value,
                credentials=tuple(split_list(self.query_one("#credentials", Input).value)),
                egress=str(self.query_one("#egress", Select).value),
                allow=tuple(split_list(self.query_one("#allow", Input).value)),
            )
        )

    def _send(self, request: NewBoxRequest) -> None:
        """Lock the form (keys typed meanwhile change nothing) and hand the request over."""
        self.pending = request
        self._lock(True)
        self.query_one("#request-status", Label).display = True
        self.query_one("#request-status", Label).update(
            Text(f"creating {request.name}… (esc cancels)", "cyan")
        )
        self.post_message(self.Requested(self, request))

    def _lock(self, locked: bool) -> None:
        for widget in self.query("Input, Select, Checkbox, PortGrid, Button"):
            widget.disabled = locked
        if not locked:
            self.check()  # Create as the fields allow

    def refused(self, error: str, *, cancelled: bool = False) -> None:
        """The request ended before any box existed: say why and stay open (cancelled: close)."""
        self.pending = None
        self.cancel_request = None
        if cancelled:
            self.close()
            return
        self._lock(False)
        self.query_one("#request-status", Label).update(Text(error, "bold red"))
        self.query_one("#name", Input).focus()

    def close(self) -> None:
        """Dismiss now, or as soon as no other screen is above this one (a question)."""
        if self.app.screen is self:
            self.dismiss(None)
        else:
            self._close_when_current = True

    def on_screen_resume(self) -> None:
        if self._close_when_current:
            self.dismiss(None)

    def action_cancel(self) -> None:
        if self.pending is None:
            self.dismiss(None)
        elif self.cancel_request is not None:
            self.cancel_request()  # the App closes the dialog once it has rolled back
            self.query_one("#request-status", Label).update(
                Text(f"cancelling {self.pending.name}…", "yellow")
            )


class BranchDialog(Dialog[BranchRequest]):
    """A new box with the selected box's /data and installed state: its name and port,
    checked as typed, and which way the branch will go."""

    TITLE_TEXT = "Branch box"

    def __init__(self, service: Service, view: BoxView, taken: Collection[tuple[str, str]]) -> None:
        super().__init__()
        self.service = service
        self.view = view
        self.taken = taken
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
                f"{v.name} is not branchable: it is stopped, its disk packed, and started "
                "again; its running processes are not carried over. "
                "(Make boxes with --branchable to branch them at once.)",
            )
        yield Static(how, classes="hint")
        yield Label("Name of the new box")
        yield Field(value=f"{v.name}-b", placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem")
        yield Label("Port")
        yield Field(value="auto", id="port")
        yield Label("", id="port-problem", classes="problem")
        with Horizontal(classes="buttons"):
            yield Button("Branch", variant="primary", id="ok")
            yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()
        self.load_ports()
        self.check()

    @work(exclusive=True, group="ports", exit_on_error=False)
    async def load_ports(self) -> None:
        try:
            self.slots = await self.service.ports(self.view.host)
        except Exception as exc:
            self.notify(f"port map unavailable: {exc}", severity="warning")
        self.check()

    def check(self) -> bool:
        name = self.query_one("#name", Input).value.strip()
        problems = {
            "#name-problem": (name_problem(name) if name else "the new box needs a name")
            or _name_taken(name, self.view.host, self.taken),
            "#port-problem": _port_problem(
                self.query_one("#port", Input).value.strip(), self.slots, self.view.host
            ),
        }
        for selector, problem in problems.items():
            label = self.query_one(selector, Label)
            label.update(problem or "")
            label.display = bool(problem)
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
                    self.view.name,
                    self.query_one("#name", Input).value.strip(),
                    self.view.host,
                    _int_or_none(self.query_one("#port", Input).value),
                )
            )


class DeleteDialog(Dialog[DeleteRequest]):
    """Type the box's name to delete it."""

    TITLE_TEXT = "Delete box"

    def __init__(self, view: BoxView) -> None:
        super().__init__()
        self.view = view

    def compose_body(self) -> ComposeResult:
        v = self.view
        yield Static(
            Text.assemble(
                "Delete ",
                (v.name, "bold"),
                f" on {v.host}" if v.host != LOCAL else "",
                "? Its machine and its /data are removed and port ",
                str(v.port or "-"),
                " is freed.",
            )
        )
        if v.last_save:
            yield Static(f"Last save: {v.last_save}", classes="hint")
        else:
            yield Static(Text("This box was never saved.", style="bold yellow"))
        yield Label(f"Type {v.name} to confirm")
        yield Field(placeholder=v.name, id="confirm")
        with Horizontal(classes="buttons"):
            yield Button("Delete", variant="error", id="ok", disabled=True)
            yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#confirm", Input).focus()

    @on(Input.Changed, "#confirm")
    def typed(self, event: Input.Changed) -> None:
        self.query_one("#ok", Button).disabled = event.value.strip() != self.view.name

    @on(Input.Submitted, "#confirm")
    @on(Button.Pressed, "#ok")
    def confirm(self) -> None:
        if self.query_one("#confirm", Input).value.strip() == self.view.name:
            self.dismiss(DeleteRequest(self.view.name, self.view.host))


class UrlDialog(Dialog[None]):
    """No browser could be opened: say so, and offer the URL to copy (OSC 52, through the
    terminal, so it works over SSH too) or to open elsewhere."""

    TITLE_TEXT = "No browser here"

    def __init__(self, name: str, url: str, why: str) -> None:
        super().__init__()
        self.box = name
        self.url = url
        self.why = why

    def compose_body(self) -> ComposeResult:
        yield Static(f"Could not open a browser ({self.why}). The web UI of {self.box} is at:")
        yield Field(value=self.url, id="url")
        yield Static(
            "Copy puts it on your clipboard through the terminal (OSC 52; some terminals "
            "ask you to allow that).",
            classes="hint",
        )
        with Horizontal(classes="buttons"):
            yield Button("Copy URL", variant="primary", id="copy")
            yield Button("Close", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#copy", Button).focus()

    @on(Button.Pressed, "#copy")
    def copy(self) -> None:
        self.app.copy_to_clipboard(self.url)
        self.app.notify(self.url, title="URL copied to the clipboard")
        self.dismiss(None)


class FormDialog(Dialog[R]):
    """A form for an archive operation: checked on submit, dismissed with its request."""

    START_LABEL = "Start"

    def compose_body(self) -> ComposeResult:
        yield from self.compose_form()
        yield Label("", id="error", classes="problem")
        with Horizontal(classes="buttons"):
            yield Button(self.START_LABEL, variant="primary", id="ok")
            yield Button("Cancel", id="cancel")

    def compose_form(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.query(Input).first().focus()

    def problem(self) -> str | None:
        """Why the form cannot be submitted yet (None: it can)."""
        return None

    def request(self) -> R:
        """The form's values as a request (called once, when they pass `problem`)."""
        raise NotImplementedError

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def submit(self, event: Input.Submitted | Button.Pressed) -> None:
        self.as_submitted(event)
        problem = self.problem()
        self.query_one("#error", Label).update(problem or "")
        if not problem:
            self.dismiss(self.request())

    def text(self, selector: str) -> str:
        return self.query_one(selector, Input).value.strip()

    def path_or_none(self, selector: str) -> Path | None:
        text = self.text(selector)
        return Path(text).expanduser() if text else None

    def take_passphrase(self) -> bytes:
        """The typed passphrase as bytes; the input boxes are wiped."""
        secret = self.query_one("#passphrase", Input).value.encode()
        for widget in self.query(".secret").results(Input):
            widget.value = ""
        return secret


def _passphrase_inputs(twice: bool) -> ComposeResult:
    yield Label("Passphrase")
    yield Field(password=True, id="passphrase", classes="secret")
    if twice:
        yield Label("Passphrase again")
        yield Field(password=True, id="passphrase2", classes="secret")


def _archive_problem(service: Service, text: str) -> str | None:
    """The check `hbtui load` makes: an existing .hbx or old *.tar.gz.gpg, else one line why."""
    if not text:
        return "which archive? (pick one above, or type a path)"
    try:
        service.archive_kind(service.resolve_archive(text))
    except (HbtuiError, OSError, RuntimeError) as exc:  # RuntimeError: ~user unknown
        return str(exc)
    return None


class SaveDialog(FormDialog[SaveRequest]):
    """Destination, passphrase twice, verify."""

    TITLE_TEXT = "Save box"
    START_LABEL = "Save"

    def __init__(self, view: BoxView) -> None:
        super().__init__()
        self.view = view

    def compose_form(self) -> ComposeResult:
        yield Static(
            Text.assemble(
                "Save ",
                (self.view.name, "bold"),
                " to an encrypted archive (the box is paused meanwhile).",
            )
        )
        yield Label("Destination file (empty: the backups folder)")
        yield Field(placeholder="~/backups/NAME-DATE.hbx", id="output")
        yield from _passphrase_inputs(twice=True)
        yield Checkbox("Verify the archive after writing it", value=True, id="verify")

    def problem(self) -> str | None:
        first = self.query_one("#passphrase", Input).value
        if not first:
            return "type a passphrase"
        if first != self.query_one("#passphrase2", Input).value:
            return "the two passphrases differ"
        return None

    def request(self) -> SaveRequest:
        return SaveRequest(
            name=self.view.name,
            host=self.view.host,
            output=self.path_or_none("#output"),
            verify=self.query_one("#verify", Checkbox).value,
            passphrase=self.take_passphrase(),
        )


def _archive_cells(entry: ArchiveEntry) -> tuple[Text, ...]:
    if entry.kind != "hbx":
        verified = Text("old gpg backup", style="dim")
    elif entry.verified:
        verified = Text("✓ verified", style="green")
    else:
        verified = Text("not verified", style="yellow")
    return (
        Text(entry.box or "?", style="bold" if entry.box else "dim"),
        Text(entry.modified.replace("T", " ")[:16]),
        Text(human_bytes(entry.size), justify="right"),
        Text(".hbx" if entry.kind == "hbx" else ".tar.gz.gpg"),
        verified,
    )


class ArchiveForm(FormDialog[R]):
    """A form that starts by picking an archive: the backups folder listed newest first
    (box, date, size, format, verified), and a path field for an archive elsewhere.
    The archive picked last (in any run) is offered first."""

    def __init__(self, service: Service, taken: Collection[tuple[str, str]] = ()) -> None:
        super().__init__()
        self.service = service
        self.taken = taken  # (host, name) of the boxes there are
        self.folder = service.backups_dir()

    def compose_form(self) -> ComposeResult:
        yield Label(f"Archives in {self.folder}", id="archives-title")
        table: DataTable[Text] = DataTable(id="archives", cursor_type="row", zebra_stripes=True)
        table.add_columns("Box", "Saved (UTC)", "Size", "Format", "Verified")
        yield table
        yield Label("Archive file (picked above; or a path, relative to that folder first)")
        yield Field(placeholder="box-20261129T120000Z.hbx or /path/to/box.hbx", id="archive")
        yield Label("", id="archive-problem", classes="problem")
        yield from self.compose_rest()

    def compose_rest(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.query_one("#archive", Input).focus()
        self.list_archives()

    @work(exclusive=True, group="archives", exit_on_error=False)
    async def list_archives(self) -> None:
        """Read-only: the backups folder (a header read per file, so off the event loop)."""
        table = self.query_one("#archives", DataTable)
        try:
            entries, last = await asyncio.to_thread(
                lambda: (self.service.list_archives(), self.service.last_archive())
            )
        except Exception as exc:
            self.query_one("#archives-title", Label).update(Text(str(exc), "red"))
            table.display = False
            return
        if not entries:
            self.query_one("#archives-title", Label).update(
                f"No archives in {self.folder} yet: type a path"
            )
            table.display = False
        for entry in entries:
            table.add_row(*_archive_cells(entry), key=str(entry.path))
        paths = [e.path for e in entries]
        chosen = last if last is not None else (paths[0] if paths else None)
        if chosen is not None and not self.text("#archive"):
            self._show_choice(chosen)
        if chosen in paths:
            table.move_cursor(row=paths.index(chosen), animate=False)
            table.focus()

    def _show_choice(self, path: Path) -> None:
        """Fill the path field: a name alone for an archive in the backups folder."""
        shown = path.name if path.parent == self.folder.absolute() else str(path)
        self.query_one("#archive", Input).value = shown

    @on(DataTable.RowHighlighted, "#archives")
    def archive_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.has_focus and event.row_key.value is not None:
            self._show_choice(Path(event.row_key.value))

    @on(DataTable.RowSelected, "#archives")
    def archive_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self._show_choice(Path(event.row_key.value))
        self.query_one("#passphrase", Input).focus()

    @on(Input.Changed, "#archive")
    def archive_typed(self, event: Input.Changed) -> None:
        problem = _archive_problem(self.service, event.value.strip()) if event.value else None
        self.query_one("#archive-problem", Label).update(problem or "")

    def archive(self) -> Path:
        """The chosen archive, as the request carries it."""
        return self.service.resolve_archive(self.text("#archive"))


class LoadDialog(ArchiveForm[LoadRequest]):
    """Archive (picked), passphrase, new name (checked as you type) and host; the new box
    follows in the log pane."""

    TITLE_TEXT = "Load archive into a new box"
    START_LABEL = "Load"

    def compose_rest(self) -> ComposeResult:
        yield from _passphrase_inputs(twice=False)
        yield Label("Name of the new box")
        yield Field(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem")
        yield from _host_select(self.service.host_names())

    @property
    def host(self) -> str:
        select = self.query("#host")
        return str(select.first(Select).value) if select else LOCAL

    def _name_problem(self) -> str | None:
        name = self.text("#name")
        return name_problem(name) or _name_taken(name, self.host, self.taken)

    @on(Input.Changed, "#name")
    @on(Select.Changed, "#host")
    def name_changed(self) -> None:
        shown = self._name_problem() if self.text("#name") else None
        self.query_one("#name-problem", Label).update(shown or "")

    def problem(self) -> str | None:
        problem = _archive_problem(self.service, self.text("#archive"))
        if problem:
            return problem
        if not self.query_one("#passphrase", Input).value:
            return "type the archive's passphrase"
        return self._name_problem()

    def request(self) -> LoadRequest:
        return LoadRequest(
            archive=self.archive(),
            name=self.text("#name"),
            host=self.host,
            passphrase=self.take_passphrase(),
        )


class ExtractDialog(ArchiveForm[ExtractRequest]):
    """Unpack an archive's files (picked) into a folder, without making a box."""

    TITLE_TEXT = "Extract archive"
    START_LABEL = "Extract"

    def compose_rest(self) -> ComposeResult:
        yield Label("Into folder (empty: next to the archive)")
        yield Field(placeholder="folder", id="dest")
        yield from _passphrase_inputs(twice=False)

    def problem(self) -> str | None:
        problem = _archive_problem(self.service, self.text("#archive"))
        if problem:
            return problem
        if not self.query_one("#passphrase", Input).value:
            return "type the archive's passphrase"
        return None

    def request(self) -> ExtractRequest:
        return ExtractRequest(
            archive=self.archive(),
            dest=self.path_or_none("#dest"),
            passphrase=self.take_passphrase(),
        )
