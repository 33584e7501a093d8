"""The archive dialogs: save a box, load an archive into a new box, extract an archive;
and the requests they return (each knows the Service call that runs it). Load and
Extract pick their archive with picker.py's ArchiveFields."""

from __future__ import annotations

from collections.abc import Awaitable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Checkbox, Input, Label, Select, Static

from hbtui.core.foundation import BoxView, LoadSpec, SaveSpec
from hbtui.events import Report
from hbtui.names import LOCAL, name_problem
from hbtui.tui.archives.picker import ArchiveFields
from hbtui.tui.dialogs.base import Dialog, Field, Form, Passphrase, host_select, name_taken
from hbtui.tui.requests import SpecRequest

if TYPE_CHECKING:
    from hbtui.core.service import Service
    from hbtui.tui.failure import Failure


@dataclass(frozen=True)
class SaveRequest(SpecRequest):
    spec: SaveSpec
    passphrase: bytes = field(repr=False)

    operation: ClassVar[str] = "save"

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.archives.save(self.spec, passphrase=self.passphrase, report=report)


@dataclass(frozen=True)
class LoadRequest(SpecRequest):
    spec: LoadSpec
    passphrase: bytes = field(repr=False)

    operation: ClassVar[str] = "load"
    makes: ClassVar[bool] = True

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.archives.load(self.spec, passphrase=self.passphrase, report=report)


@dataclass(frozen=True)
class ExtractRequest:
    archive: Path
    dest: Path | None  # None: next to the archive
    passphrase: bytes = field(repr=False)

    operation: ClassVar[str] = "extract"
    makes: ClassVar[bool] = False
    key: ClassVar[None] = None  # concerns no box
    holds: ClassVar[None] = None

    def call(self, service: Service, report: Report) -> Awaitable[object]:
        return service.archives.extract(
            self.archive, self.dest, passphrase=self.passphrase, report=report
        )


class SaveFields:
    """What Save and Save several ask alike (the passphrase twice, whether to verify),
    and the request they make of it for a box."""

    def __init__(self, verify: str) -> None:
        self.passphrase = Passphrase(twice=True)
        self.verify = Checkbox(verify, value=True, id="verify")

    def compose(self) -> ComposeResult:
        yield from self.passphrase.compose()
        yield self.verify

    def problem(self) -> str | None:
        return self.passphrase.problem("type a passphrase")

    def request(self, view: BoxView, output: Path | None = None) -> SaveRequest:
        spec = SaveSpec(view.name, view.host, output=output, verify=self.verify.value)
        return SaveRequest(spec, passphrase=self.passphrase.take())


class SaveDialog(Dialog[SaveRequest]):
    """Destination, passphrase twice, verify."""

    TITLE_TEXT = "Save box"

    def __init__(self, service: Service, view: BoxView) -> None:
        super().__init__()
        self.service = service
        self.view = view
        self.fields = SaveFields("Verify the archive after writing it")

    def compose_body(self) -> ComposeResult:
        with Form("Save", self.problem, self.save):
            yield Static(
                Text.assemble(
                    "Save ",
                    (self.view.name, "bold"),
                    " to an encrypted archive (the box is paused meanwhile).",
                ),
                markup=False,
            )
            yield Label("Destination file (empty: the backups folder)")
            yield Field(placeholder="~/backups/NAME-DATE.hbx", id="output")
            yield from self.fields.compose()

    def on_mount(self) -> None:
        self.focus_field(self.query_one("#output", Input))

    def problem(self) -> str | None:
        output = self.path_or_none("#output")
        return self.fields.problem() or (
            self.service.archives.output_problem(output) if output is not None else None
        )

    def save(self) -> None:
        self.dismiss(self.fields.request(self.view, self.path_or_none("#output")))


class LoadDialog(Dialog[LoadRequest]):
    """Archive (picked), passphrase, new name (checked as you type) and host; the new box
    follows in the log pane."""

    TITLE_TEXT = "Load archive into a new box"

    def __init__(
        self,
        service: Service,
        taken: Collection[tuple[str, str]] = (),
        again: LoadRequest | None = None,
        failure: Failure | None = None,
    ) -> None:
        super().__init__()
        self.service = service
        self.taken = taken  # (host, name) of the boxes there are
        self.fields = ArchiveFields(service, again, failure)

    def compose_body(self) -> ComposeResult:
        with Form("Load", lambda: self.fields.problem() or self._name_problem(), self.load):
            yield self.fields.picker
            yield from self.fields.passphrase.compose()
            yield Label("Name of the new box")
            yield Field(placeholder="a-z, 0-9 and -", id="name")
            yield Label("", id="name-problem", classes="problem", markup=False)
            yield from host_select(self.service.hosts.names())

    def on_mount(self) -> None:
        self.fields.start(self, self.fill)

    @property
    def host(self) -> str:
        select = self.query("#host")
        return str(select.first(Select).value) if select else LOCAL

    def fill(self, request: LoadRequest) -> None:
        """The fields as `request` had them, but for the passphrase."""
        spec = request.spec
        self.fields.picker.show(spec.archive)
        self.query_one("#name", Input).value = spec.name
        if self.query("#host"):
            self.query_one("#host", Select).value = spec.host

    def _name_problem(self) -> str | None:
        name = self.text("#name")
        return name_problem(name) or name_taken(name, self.host, self.taken)

    @on(Input.Changed, "#name")
    @on(Select.Changed, "#host")
    def name_changed(self) -> None:
        shown = self._name_problem() if self.text("#name") else None
        self.query_one("#name-problem", Label).update(shown or "")

    def load(self) -> None:
        spec = LoadSpec(self.fields.picker.archive(), self.text("#name"), self.host)
        self.dismiss(LoadRequest(spec, passphrase=self.fields.passphrase.take()))


class ExtractDialog(Dialog[ExtractRequest]):
    """Unpack an archive's files (picked) into a folder, without making a box. (`taken`:
    as Load is given it; no box is made, so none is asked about.)"""

    TITLE_TEXT = "Extract archive"

    def __init__(
        self,
        service: Service,
        taken: Collection[tuple[str, str]] = (),
        again: ExtractRequest | None = None,
        failure: Failure | None = None,
    ) -> None:
        super().__init__()
        self.fields = ArchiveFields(service, again, failure)

    def compose_body(self) -> ComposeResult:
        with Form("Extract", self.fields.problem, self.extract):
            yield self.fields.picker
            yield Label("Into folder (empty: next to the archive)")
            yield Field(placeholder="folder", id="dest")
            yield from self.fields.passphrase.compose()

    def on_mount(self) -> None:
        self.fields.start(self, self.fill)

    def fill(self, request: ExtractRequest) -> None:
        """The fields as `request` had them, but for the passphrase."""
        self.fields.picker.show(request.archive)
        self.query_one("#dest", Input).value = str(request.dest or "")

    def extract(self) -> None:
        self.dismiss(
            ExtractRequest(
                archive=self.fields.picker.archive(),
                dest=self.path_or_none("#dest"),
                passphrase=self.fields.passphrase.take(),
            )
        )
