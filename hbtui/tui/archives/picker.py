"""The archive Load and Extract start from: picked in the backups folder's list, or typed
as a path; and what the two forms hold alike around it (the passphrase, the way back when
that did not open the archive)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Generic

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Input, Label

from hbtui.errors import HbtuiError
from hbtui.present import human_bytes
from hbtui.tui.dialogs.base import Dialog, Field, Passphrase, R

if TYPE_CHECKING:
    from hbtui.core.archives import ArchiveEntry
    from hbtui.core.service import Service
    from hbtui.tui.failure import Failure


def archive_problem(service: Service, text: str) -> str | None:
    """The check `hbtui load` makes: an existing .hbx or old *.tar.gz.gpg, else one line why."""
    if not text:
        return "which archive? (pick one above, or type a path)"
    try:
        service.archives.kind(service.archives.resolve(text))
    except (HbtuiError, OSError, RuntimeError) as exc:  # RuntimeError: ~user unknown
        return str(exc)
    return None


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


class ArchivePicker(Vertical):
    """The backups folder listed newest first (box, date, size, format, verified), and a
    path field for an archive elsewhere. The archive picked last (in any run) is offered
    first; enter on a row goes on to the form's next field."""

    DEFAULT_CSS = "ArchivePicker { height: auto; }"

    def __init__(self, service: Service, *, focus_list: bool) -> None:
        super().__init__()
        self.service = service
        self.folder = service.archives.folder()
        self.focus_list = focus_list  # once listed (asked again, the passphrase keeps it)
        self.path = Field(placeholder="box-20261129T120000Z.hbx or /path/to/box.hbx", id="archive")

    def compose(self) -> ComposeResult:
        yield Label(f"Archives in {self.folder}", id="archives-title", markup=False)
        table: DataTable[Text] = DataTable(id="archives", cursor_type="row", zebra_stripes=True)
        table.add_columns("Box", "Saved (UTC)", "Size", "Format", "Verified")
        yield table
        yield Label("Archive file (picked above; or a path, relative to that folder first)")
        yield self.path
        yield Label("", id="archive-problem", classes="problem", markup=False)

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
        if chosen is not None and not self.path.value.strip():
            self.show(chosen)
        if chosen in paths:
            table.move_cursor(row=paths.index(chosen), animate=False)
            if self.focus_list:
                table.focus()

    def show(self, path: Path) -> None:
        """Fill the path field: a name alone for an archive in the backups folder."""
        self.path.value = path.name if path.parent == self.folder.absolute() else str(path)

    @on(DataTable.RowHighlighted, "#archives")
    def archive_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.has_focus and event.row_key.value is not None:
            self.show(Path(event.row_key.value))

    @on(DataTable.RowSelected, "#archives")
    def archive_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.show(Path(event.row_key.value))
        fields = list(self.screen.query(Input))  # on to the field after the path
        fields[fields.index(self.path) + 1].focus()

    @on(Input.Changed, "#archive")
    def archive_typed(self, event: Input.Changed) -> None:
        problem = archive_problem(self.service, event.value.strip()) if event.value else None
        line = self.query_one("#archive-problem", Label)
        if line.content != (problem or ""):  # an update lays the whole screen out again
            line.update(problem or "")

    def problem(self) -> str | None:
        return archive_problem(self.service, self.path.value.strip())

    def archive(self) -> Path:
        """The chosen archive, as the request carries it."""
        return self.service.archives.resolve(self.path.value.strip())


class ArchiveFields(Generic[R]):
    """What Load and Extract hold alike: the picker and the archive's passphrase. Given
    `again` (a request its archive's passphrase did not open), the form comes back as it
    was sent, but for the passphrase, with its `failure` said once."""

    def __init__(self, service: Service, again: R | None, failure: Failure | None) -> None:
        self.picker = ArchivePicker(service, focus_list=again is None)
        self.passphrase = Passphrase(twice=False)
        self.again = again
        self.failure = failure

    def start(self, dialog: Dialog[R], fill: Callable[[R], None]) -> None:
        """Open `dialog`'s form: refilled by `fill` when asked again, the list read, the
        focus in the path field (asked again: the passphrase)."""
        if self.again is not None:
            fill(self.again)
            said = self.failure.text if self.failure is not None else ""
            dialog.query_one("#error", Label).update(said)
        self.picker.list_archives()
        dialog.focus_field(self.picker.path if self.again is None else self.passphrase.field)

    def problem(self) -> str | None:
        """The archive, then its passphrase: what every archive form needs first."""
        return self.picker.problem() or self.passphrase.problem("type the archive's passphrase")
