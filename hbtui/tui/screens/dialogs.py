"""The modal dialogs: new box, delete, save, load, extract.

Dialogs collect input and hand it to BoxService (through the App's
`run_operation`, so the work shows in the box's log too). The archive
dialogs stay open while their operation runs, to show bytes, rate and ETA;
Cancel there cancels the worker and the core rolls back what it made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, ProgressBar, Select, Static
from textual.worker import Worker

from hbtui.core.boxes import BoxView
from hbtui.core.names import name_problem
from hbtui.core.registry import LOCAL
from hbtui.events import Event, LogLine, Notice, Phase, Step, Transfer
from hbtui.tui.widgets.port_grid import PortGrid


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def duration(seconds: float) -> str:
    seconds = int(seconds)
    return (
        f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


class TransferMeter:
    """Bytes, rate and ETA from a stream of Transfer events (rate over ~5 s)."""

    WINDOW = 5.0

    def __init__(self, clock=time.monotonic) -> None:
        self.clock = clock
        self.samples: list[tuple[float, int]] = []

    def add(self, event: Transfer) -> str:
        now = self.clock()
        self.samples.append((now, event.done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.WINDOW:
            self.samples.pop(0)
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        rate = (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0
        text = human_bytes(event.done)
        if event.total:
            text += f" / {human_bytes(event.total)}"
        if rate > 0:
            text += f" · {human_bytes(rate)}/s"
            if event.total and event.total > event.done:
                text += f" · ETA {duration((event.total - event.done) / rate)}"
        return text


DIALOG_CSS = Path(__file__).with_name("dialogs.tcss")


class Dialog(ModalScreen[Any]):
    """A centred box with a title; escape cancels."""

    CSS_PATH = DIALOG_CSS  # read when the first dialog opens, not at startup
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    TITLE_TEXT = ""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.TITLE_TEXT, classes="dialog-title")
            yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        yield from ()

    def action_cancel(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class NewBoxRequest:
    name: str
    host: str
    image: str
    cpus: int | None
    memory_mib: int | None
    port: int | None


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


class NewBoxDialog(Dialog):
    """Name (checked as you type), image, CPUs, memory, port (auto or picked)."""

    TITLE_TEXT = "New box"

    def compose_body(self) -> ComposeResult:
        service = self.app.service
        defaults = service.config.defaults
        yield Label("Name")
        yield Input(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem")
        hosts = service.host_names()
        if len(hosts) > 1:
            yield Label("Host")
            yield Select([(h, h) for h in hosts], value=LOCAL, allow_blank=False, id="host")
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
        grid = self.query_one(PortGrid)
        try:
            grid.set_slots(await self.app.service.ports(self.host))
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
    def submitted(self) -> None:
        self.create()

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

    @on(Button.Pressed, "#cancel")
    def cancel_pressed(self) -> None:
        self.dismiss(None)


class DeleteDialog(Dialog):
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
            self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def cancel_pressed(self) -> None:
        self.dismiss(False)


class OperationDialog(Dialog):
    """A form, then the running operation's progress; Cancel rolls it back."""

    START_LABEL = "Start"

    def __init__(self) -> None:
        super().__init__()
        self.worker: Worker | None = None
        self.cancelling = False
        self.meter = TransferMeter()

    def compose_body(self) -> ComposeResult:
        yield from self.compose_form()
        with Vertical(id="progress", classes="progress"):
            yield Label("", id="phase")
            yield ProgressBar(id="bytes", show_eta=False)
            yield Label("", id="rate")
        yield Label("", id="error", classes="problem")
        with Horizontal(classes="buttons"):
            yield Button(self.START_LABEL, variant="primary", id="ok")
            yield Button("Cancel", id="cancel")

    def compose_form(self) -> ComposeResult:
        yield from ()

    def on_mount(self) -> None:
        self.query_one("#progress").display = False
        first = self.query(Input).first()
        first.focus()

    def problem(self) -> str | None:
        """Why the form cannot be submitted yet (None: it can)."""
        return None

    def start(self, observer, done) -> Worker | None:
        """Hand the form to the App's `run_operation`."""
        return None

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def submit(self) -> None:
        if self.worker is not None:
            return
        problem = self.problem()
        self.query_one("#error", Label).update(problem or "")
        if problem:
            return
        self.worker = self.start(self.observe, self.finished)
        if self.worker is None:
            return
        for widget in self.query(Input):
            widget.disabled = True
        self.query_one("#ok", Button).disabled = True
        self.query_one("#progress").display = True
        self.query_one("#cancel", Button).focus()

    def passphrase(self) -> bytes:
        """The typed passphrase as bytes; the input boxes are wiped."""
        secret = self.query_one("#passphrase", Input).value.encode()
        for widget in self.query(".secret").results(Input):
            widget.value = ""
        return secret

    def observe(self, event: Event) -> None:
        if isinstance(event, Phase):
            self.query_one("#phase", Label).update(event.message)
        elif isinstance(event, Step):
            self.query_one("#phase", Label).update(f"step {event.index}/{event.total} {event.name}")
        elif isinstance(event, Notice):
            self.query_one("#rate", Label).update(Text(event.message, style="yellow"))
        elif isinstance(event, Transfer):
            bar = self.query_one("#bytes", ProgressBar)
            bar.update(total=event.total, progress=event.done)
            label = self.meter.add(event)
            self.query_one("#rate", Label).update(f"{event.label}  {label}".strip())
        elif isinstance(event, LogLine) and event.stream == "stderr":
            self.query_one("#rate", Label).update(Text.from_ansi(event.text))

    def finished(self, result: Any, error: str) -> None:
        self.worker = None
        if self.cancelling:
            self.dismiss(None)
            return
        if error:
            self.query_one("#error", Label).update(error)
            self.query_one("#ok", Button).disabled = False
            for widget in self.query(Input):
                widget.disabled = False
            return
        self.dismiss(result)

    def action_cancel(self) -> None:
        if self.worker is None:
            self.dismiss(None)
        elif not self.cancelling:
            self.cancelling = True
            self.query_one("#phase", Label).update("cancelling: rolling back…")
            self.worker.cancel()

    @on(Button.Pressed, "#cancel")
    def cancel_pressed(self) -> None:
        self.action_cancel()


def _passphrase_inputs(twice: bool) -> ComposeResult:
    yield Label("Passphrase")
    yield Input(password=True, id="passphrase", classes="secret")
    if twice:
        yield Label("Passphrase again")
        yield Input(password=True, id="passphrase2", classes="secret")


class SaveDialog(OperationDialog):
    """Destination, passphrase twice, verify; then bytes, rate and ETA."""

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

    def start(self, observer, done) -> Worker | None:
        view = self.view
        output_text = self.query_one("#output", Input).value.strip()
        output = Path(output_text).expanduser() if output_text else None
        verify = self.query_one("#verify", Checkbox).value
        secret = self.passphrase()
        service = self.app.service
        return self.app.run_operation(
            (view.host, view.name),
            "save",
            lambda report: service.save(
                view.name, view.host, output=output, passphrase=secret, verify=verify, report=report
            ),
            observer=observer,
            done=done,
        )

    def finished(self, result: Any, error: str) -> None:
        if not error and not self.cancelling:
            self.app.notify(f"saved to {result}", title=f"save {self.view.name}", timeout=10)
        super().finished(result, error)


class LoadDialog(OperationDialog):
    """Archive path, passphrase, new name; the new box follows in the log pane."""

    TITLE_TEXT = "Load archive into a new box"
    START_LABEL = "Load"

    def __init__(self, hosts: list[str]) -> None:
        super().__init__()
        self.hosts = hosts

    def compose_form(self) -> ComposeResult:
        yield Label("Archive file")
        yield Input(placeholder="path/to/box.hbx", id="archive")
        yield from _passphrase_inputs(twice=False)
        yield Label("Name of the new box")
        yield Input(placeholder="a-z, 0-9 and -", id="name")
        yield Label("", id="name-problem", classes="problem")
        if len(self.hosts) > 1:
            yield Label("Host")
            yield Select([(h, h) for h in self.hosts], value=LOCAL, allow_blank=False, id="host")

    @on(Input.Changed, "#name")
    def name_changed(self, event: Input.Changed) -> None:
        self.query_one("#name-problem", Label).update(
            (name_problem(event.value) or "") if event.value else ""
        )

    def problem(self) -> str | None:
        archive = self.query_one("#archive", Input).value.strip()
        if not archive:
            return "which archive?"
        if not Path(archive).expanduser().is_file():
            return f"no such file: {archive}"
        if not self.query_one("#passphrase", Input).value:
            return "type the archive's passphrase"
        return name_problem(self.query_one("#name", Input).value.strip())

    def start(self, observer, done) -> Worker | None:
        archive = Path(self.query_one("#archive", Input).value.strip()).expanduser()
        name = self.query_one("#name", Input).value.strip()
        select = self.query("#host")
        host = str(select.first(Select).value) if select else LOCAL
        secret = self.passphrase()
        app, service = self.app, self.app.service
        app.follow_key = (host, name)
        return app.run_operation(
            (host, name),
            "load",
            lambda report: service.load(
                archive, name, host, passphrase=secret, recipe=app.recipe, report=report
            ),
            observer=observer,
            done=done,
        )


class ExtractDialog(OperationDialog):
    """Unpack an archive's files into a folder, without making a box."""

    TITLE_TEXT = "Extract archive"
    START_LABEL = "Extract"

    def compose_form(self) -> ComposeResult:
        yield Label("Archive file")
        yield Input(placeholder="path/to/box.hbx", id="archive")
        yield Label("Into folder (empty: next to the archive)")
        yield Input(placeholder="folder", id="dest")
        yield from _passphrase_inputs(twice=False)

    def problem(self) -> str | None:
        archive = self.query_one("#archive", Input).value.strip()
        if not archive or not Path(archive).expanduser().is_file():
            return f"no such file: {archive}" if archive else "which archive?"
        if not self.query_one("#passphrase", Input).value:
            return "type the archive's passphrase"
        return None

    def start(self, observer, done) -> Worker | None:
        archive = Path(self.query_one("#archive", Input).value.strip()).expanduser()
        dest_text = self.query_one("#dest", Input).value.strip()
        dest = Path(dest_text).expanduser() if dest_text else None
        secret = self.passphrase()

        async def extract(report):
            from hbtui.core import archive_ops

            return await archive_ops.extract(archive, dest, passphrase=secret, report=report)

        return self.app.run_operation(None, "extract", extract, observer=observer, done=done)

    def finished(self, result: Any, error: str) -> None:
        if not error and not self.cancelling:
            self.app.notify(f"extracted into {result}", title="extract", timeout=10)
        super().finished(result, error)
