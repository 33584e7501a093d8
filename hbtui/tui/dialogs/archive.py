"""The archive dialogs: save a box, load an archive into a new box, extract an archive;
and the requests they return (each knows the Service call that runs it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.widgets import Checkbox, DataTable, Input, Label, Select, Static

from hbtui.core.foundation import BoxView, LoadSpec, SaveSpec
from hbtui.errors import HbtuiError
from hbtui.events import Report
from hbtui.names import LOCAL, name_problem
from hbtui.present import human_bytes
from hbtui.tui.dialogs.base import (
    Field,
    FormDialog,
    R,
    host_select,
    name_taken,
    passphrase_inputs,
)
from hbtui.tui.requests import SpecRequest

if TYPE_CHECKING:
    from hbtui.core.archives import ArchiveEntry
    from hbtui.core.service import Service


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


def _archive_problem(service: Service, text: str) -> str | None:
    """The check `hbtui load` makes: an existing .hbx or old *.tar.gz.gpg, else one line why."""
    if not text:
        return "which archive? (pick one above, or type a path)"
    try:
        service.archives.kind(service.archives.resolve(text))
    except (HbtuiError, OSError, RuntimeError) as exc:  # RuntimeError: ~user unknown
        return str(exc)
    return None


class SaveDialog(FormDialog[SaveRequest]):
    """Destination, passphrase twice, verify."""

    TITLE_TEXT = "Save box"
    START_LABEL = "Save"

    def __init__(self, service: Service, view: BoxView) -> None:
        super().__init__()
        self.service = service
        self.view = view

    def compose_form(self) -> ComposeResult:
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
        yield from passphrase_inputs(twice=True)
        yield Checkbox("Verify the archive after writing it", value=True, id="verify")

    def problem(self) -> str | None:
        first = self.query_one("#passphrase", Input).value
        if not first:
            return "type a passphrase"
        if first != self.query_one("#passphrase2", Input).value:
            return "the two passphrases differ"
        output = self.path_or_none("#output") if self.query("#output") else None
        return self.service.archives.output_problem(output) if output is not None else None

    def request(self) -> SaveRequest:
        return SaveRequest(
            SaveSpec(
                self.view.name,
                self.view.host,
                output=self.path_or_none("#output"),
                verify=self.query_one("#verify", Checkbox).value,
            ),
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
    The archive picked last (in any run) is offered first. Given `again` (a request its
    archive's passphrase did not open), the form comes back as it was sent, but for the
    passphrase, with `error` said once."""

    def __init__(
        self,
        service: Service,
        taken: Collection[tuple[str, str]] = (),
        again: R | None = None,
        error: str = "",
    ) -> None:
        super().__init__()
        self.service = service
        self.taken = taken  # (host, name) of the boxes there are
        self.folder = service.archives.folder()
        self.again = again
        self.again_error = error

    def compose_form(self) -> ComposeResult:
        yield Label(f"Archives in {self.folder}", id="archives-title", markup=False)
        table: DataTable[Text] = DataTable(id="archives", cursor_type="row", zebra_stripes=True)
        table.add_columns("Box", "Saved (UTC)", "Size", "Format", "Verified")
        yield table
        yield Label("Archive file (picked above; or a path, relative to that folder first)")
        yield Field(placeholder="box-20261129T120000Z.hbx or /path/to/box.hbx", id="archive")
        yield Label("", id="archive-problem", classes="problem", markup=False)
        yield from self.compose_rest()

    def compose_rest(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        if self.again is not None:
            self.fill(self.again)
            self.query_one("#error", Label).update(self.again_error)
        self.list_archives()

    def first_field(self) -> Input:
        return self.query_one("#archive" if self.again is None else "#passphrase", Input)

    def fill(self, request: R) -> None:
        """The fields as `request` had them, but for the passphrase."""
        raise NotImplementedError

    @work(exclusive=True, group="archives", exit_on_error=False)
    async def list_archives(self) -> None:
        """Read-only: the backups folder (a header read per file, so off the event loop)."""
        table = self.query_one("#archives", DataTable)
        try:
            entries, last = await asyncio.to_thread(
                lambda: (self.service.archives.listing(), self.service.archives.last())
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
            if self.again is None:  # asked again: the passphrase keeps the focus
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
        fields = list(self.query(Input))  # on to the field after the path (Extract: its folder)
        fields[fields.index(self.query_one("#archive", Input)) + 1].focus()

    @on(Input.Changed, "#archive")
    def archive_typed(self, event: Input.Changed) -> None:
        problem = _archive_problem(self.service, event.value.strip()) if event.value else None
        self.query_one("#archive-problem", Label).update(problem or "")

    def archive(self) -> Path:
        """The chosen archive, as the request carries it."""
        return self.service.archives.resolve(self.text("#archive"))

    def problem(self) -> str | None:
        """The archive, then its passphrase: what every archive form needs first."""
        problem = _archive_problem(self.service, self.text("#archive"))
        if problem:
            return problem
        if not self.query_one("#passphrase", Input).value:
            return "type the archive's passphrase"
        return None


class LoadDialog(ArchiveForm[LoadRequest]):
    """Archive (picked), passphrase, new name (checked as you type) and host; the new box
    follows in the log pane."""

    TITLE_TEXT = "Load archive into a new box"
    START_LABEL = "Load"

    def compose_rest(self) -> ComposeResult:
        yield from passphrase_inputs(twice=False)
        yield Label("Name of the new box")
        yield Field(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem", markup=False)
        yield from host_select(self.service.hosts.names())

    @property
    def host(self) -> str:
        select = self.query("#host")
        return str(select.first(Select).value) if select else LOCAL

    def fill(self, request: LoadRequest) -> None:
        spec = request.spec
        self._show_choice(spec.archive)
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

    def problem(self) -> str | None:
        return super().problem() or self._name_problem()

    def request(self) -> LoadRequest:
        return LoadRequest(
            LoadSpec(self.archive(), self.text("#name"), self.host),
            passphrase=self.take_passphrase(),
        )


class ExtractDialog(ArchiveForm[ExtractRequest]):
    """Unpack an archive's files (picked) into a folder, without making a box."""

    TITLE_TEXT = "Extract archive"
    START_LABEL = "Extract"

    def compose_rest(self) -> ComposeResult:
        yield Label("Into folder (empty: next to the archive)")
        yield Field(placeholder="folder", id="dest")
        yield from passphrase_inputs(twice=False)

    def fill(self, request: ExtractRequest) -> None:
        self._show_choice(request.archive)
        self.query_one("#dest", Input).value = str(request.dest or "")

    def request(self) -> ExtractRequest:
        return ExtractRequest(
            archive=self.archive(),
            dest=self.path_or_none("#dest"),
            passphrase=self.take_passphrase(),
        )
