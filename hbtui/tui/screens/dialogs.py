"""The modal dialogs: new box, delete, save, load, extract.

A dialog only collects input: submitting it dismisses it with a request
(`NewBoxRequest`, `DeleteRequest`, `SaveRequest`, `LoadRequest`,
`ExtractRequest`) holding the values as they were at that moment, and the
App runs the request. A dialog may ask the Service read-only questions (the
port map, whether a file is an archive) but never changes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from hbtui.core.views import BoxView
from hbtui.errors import HbtuiError
from hbtui.names import LOCAL, name_problem
from hbtui.tui.widgets.port_grid import PortGrid

if TYPE_CHECKING:
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
        self.dismiss(None)


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def _host_select(hosts: list[str]) -> ComposeResult:
    """A host choice, shown only when there is more than this machine."""
    if len(hosts) > 1:
        yield Label("Host")
        yield Select([(h, h) for h in hosts], value=LOCAL, allow_blank=False, id="host")


class NewBoxDialog(Dialog[NewBoxRequest]):
    """Name (checked as you type), image, CPUs, memory, port (auto or picked)."""

    TITLE_TEXT = "New box"

    def __init__(self, service: Service) -> None:
        super().__init__()
        self.service = service

    def compose_body(self) -> ComposeResult:
        defaults = self.service.config.defaults
        yield Label("Name")
        yield Input(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem")
        yield from _host_select(self.service.host_names())
        yield Label("Image")
        yield Input(value=defaults.image, id="image")
        with Horizontal(classes="row"):
            with Vertical():
                yield Label("CPUs")
                yield Input(value=str(defaults.cpus), type="integer", id="cpus")
            with Vertical():
                yield Label("Memory (MiB)")
                yield Input(value=str(defaults.memory_mib), type="integer", id="memory")
            with Vertical():
                yield Label("Port")
                yield Input(value="auto", id="port")
        yield Label("Pick a free port below (enter or click), or leave auto", classes="hint")
        yield PortGrid(id="new-port-grid")
        with Horizontal(classes="buttons"):
            yield Button("Create", variant="primary", id="ok", disabled=True)
            yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()
        self.load_ports()

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

    @on(Select.Changed, "#host")
    def host_changed(self) -> None:
        self.load_ports()

    @on(Input.Changed, "#name")
    def name_changed(self, event: Input.Changed) -> None:
        problem = name_problem(event.value)
        self.query_one("#name-problem", Label).update(problem or "")
        self.query_one("#ok", Button).disabled = problem is not None

    @on(Input.Changed, "#port")
    def port_typed(self, event: Input.Changed) -> None:
        port = _int_or_none(event.value)
        grid = self.query_one(PortGrid)
        grid.picked = port
        if port is not None:
            grid.move_to(port)
        grid.refresh()

    @on(PortGrid.Picked)
    def port_picked(self, event: PortGrid.Picked) -> None:
        self.query_one("#port", Input).value = str(event.port)

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def create(self) -> None:
        name = self.query_one("#name", Input).value.strip()
        if name_problem(name):
            self.query_one("#name", Input).focus()
            return
        port_text = self.query_one("#port", Input).value.strip()
        port = _int_or_none(port_text)
        if port is None and port_text not in ("", "auto"):
            self.notify("the port is 'auto' or a number", severity="warning")
            return
        self.dismiss(
            NewBoxRequest(
                name=name,
                host=self.host,
                image=self.query_one("#image", Input).value.strip(),
                cpus=_int_or_none(self.query_one("#cpus", Input).value),
                memory_mib=_int_or_none(self.query_one("#memory", Input).value),
                port=port,
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
        yield Input(placeholder=v.name, id="confirm")
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
    def submit(self) -> None:
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
    yield Input(password=True, id="passphrase", classes="secret")
    if twice:
        yield Label("Passphrase again")
        yield Input(password=True, id="passphrase2", classes="secret")


def _archive_problem(service: Service, text: str) -> str | None:
    """The check `hbtui load` makes: an existing .hbx or old *.tar.gz.gpg, else one line why."""
    if not text:
        return "which archive?"
    try:
        service.archive_kind(Path(text).expanduser())
    except (HbtuiError, OSError) as exc:
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
        yield Input(placeholder="~/backups/NAME-DATE.hbx", id="output")
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


class LoadDialog(FormDialog[LoadRequest]):
    """Archive path, passphrase, new name (and host); the new box follows in the log pane."""

    TITLE_TEXT = "Load archive into a new box"
    START_LABEL = "Load"

    def __init__(self, service: Service) -> None:
        super().__init__()
        self.service = service

    def compose_form(self) -> ComposeResult:
        yield Label("Archive file")
        yield Input(placeholder="path/to/box.hbx", id="archive")
        yield from _passphrase_inputs(twice=False)
        yield Label("Name of the new box")
        yield Input(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem")
        yield from _host_select(self.service.host_names())

    @on(Input.Changed, "#name")
    def name_changed(self, event: Input.Changed) -> None:
        self.query_one("#name-problem", Label).update(
            (name_problem(event.value) or "") if event.value else ""
        )

    def problem(self) -> str | None:
        problem = _archive_problem(self.service, self.text("#archive"))
        if problem:
            return problem
        if not self.query_one("#passphrase", Input).value:
            return "type the archive's passphrase"
        return name_problem(self.text("#name"))

    def request(self) -> LoadRequest:
        select = self.query("#host")
        return LoadRequest(
            archive=Path(self.text("#archive")).expanduser(),
            name=self.text("#name"),
            host=str(select.first(Select).value) if select else LOCAL,
            passphrase=self.take_passphrase(),
        )


class ExtractDialog(FormDialog[ExtractRequest]):
    """Unpack an archive's files into a folder, without making a box."""

    TITLE_TEXT = "Extract archive"
    START_LABEL = "Extract"

    def __init__(self, service: Service) -> None:
        super().__init__()
        self.service = service

    def compose_form(self) -> ComposeResult:
        yield Label("Archive file")
        yield Input(placeholder="path/to/box.hbx", id="archive")
        yield Label("Into folder (empty: next to the archive)")
        yield Input(placeholder="folder", id="dest")
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
            archive=Path(self.text("#archive")).expanduser(),
            dest=self.path_or_none("#dest"),
            passphrase=self.take_passphrase(),
        )
