"""What every dialog shares: the frame, the text field, the form and its passphrase,
and the checks of a box name, a host and a port that several dialogs make. A dialog is a
`Dialog` and holds the rest (fields, checks, an archive picker): it does not inherit them.

A dialog only collects input: submitting it dismisses it with a request (each
feature's module defines its own, next to its dialog) holding the values as
they were at that moment, and the App runs the request. A dialog may ask the
Service read-only questions (the port map, whether a file is an archive or a
folder a recipe, the backups folder's archives) but never changes anything.
Fields are checked as they are typed, so a request that leaves a dialog has
no problem the dialog could have seen.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.message_pump import _MessagePumpMeta
from textual.screen import ModalScreen
from textual.validation import ValidationResult
from textual.widget import Widget
from textual.widgets import Button, Collapsible, Input, Label, Select
from textual.widgets.button import ButtonVariant

from hbtui.core.foundation import BUSY, USED, PortSlot
from hbtui.names import LOCAL
from hbtui.tui.widgets.key_footer import KeyFooter
from hbtui.tui.widgets.text_input import TextInput

DIALOG_CSS = Path(__file__).with_name("dialogs.tcss")

R = TypeVar("R")
S = TypeVar("S")


class Field(TextInput):
    """A dialog's text field: enter submits the value as it was when enter was typed.

    Input's enter binding runs only once the key has bubbled up to the App, and
    by then the field may have taken the keys typed after it (`rr2`, enter, `z`
    submitted `rr2z`). Here enter is handled in the field's own queue, in the
    order the keys came.
    """

    def validate(self, value: str) -> ValidationResult | None:
        """No validators (dialogs check their fields themselves): nothing to mark. Input
        would set its `-valid` class for every value, and the first, given to the
        constructor, restyled the field before it was even mounted (a third of what a
        dialog of fields cost to open)."""
        if self.validators:
            return super().validate(value)
        self._valid = True
        return None

    async def _on_key(self, event: events.Key) -> None:
        # Textual calls Input's own handler after this one unless the default is prevented.
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            await self.action_submit()


class LazySection(Collapsible):
    """A folded part of a form whose fields are made the first time it is opened (enter or
    a click on its title): a dialog pays for the widgets it shows, not for every option it
    has (the New dialog with all of its ~70 widgets took ~0.5 s of CPU to show)."""

    @dataclass
    class Filled(Message):
        """The section's fields are mounted: the form can read and check them."""

        section: LazySection

    def __init__(self, title: str, fields: Callable[[], ComposeResult], *, id: str) -> None:
        super().__init__(title=title, collapsed=True, id=id)
        self._fields = fields
        self.filled = False

    def watch_collapsed(self, collapsed: bool) -> None:
        if not collapsed and not self.filled:
            self.filled = True
            self.call_next(self._fill, self.query_one(Collapsible.Contents))

    async def _fill(self, contents: Widget) -> None:
        await contents.mount_compose(self._fields())
        self.post_message(self.Filled(self))


class Closable(ModalScreen[S]):
    """A screen the App closes when its operation has got far enough: at once, or as soon
    as no other screen (a question) is above it, since dismiss() pops the top screen."""

    _close_when_current = False

    def close(self) -> None:
        if self.app.screen is self:
            self.dismiss(None)
        else:
            self._close_when_current = True

    def on_screen_resume(self) -> None:
        if self._close_when_current:
            self.dismiss(None)


class _DialogMeta(_MessagePumpMeta, ABCMeta):
    """Textual's classes have a metaclass of their own: a dialog's is both it and ABCMeta,
    so a dialog that leaves out what it must provide fails as it is made, not as it shows."""


class Dialog(Closable[R | None], metaclass=_DialogMeta):
    """A centred box with a title; escape cancels (dismisses with None).

    Tab and shift+tab move the focus as soon as the App reads them (priority bindings):
    Textual's own run only once the key has bubbled back up from the field, and the keys
    typed meanwhile went to the field being left (a passphrase typed fast after tab landed
    in the Save dialog's path field, in clear, on a loaded machine)."""

    CSS_PATH = DIALOG_CSS  # read when the first dialog opens, not at startup
    AUTO_FOCUS = ""  # each dialog focuses its first field itself (see focus_field)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("tab", "app.focus_next", "Next field", show=False, priority=True),
        Binding("shift+tab", "app.focus_previous", "Previous field", show=False, priority=True),
    ]
    TITLE_TEXT = ""

    def __init__(self) -> None:
        super().__init__()
        self._said: dict[str, str | Text] = {}  # what `say` last showed in each line

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.TITLE_TEXT, classes="dialog-title", markup=False)
            yield from self.compose_body()
        yield KeyFooter(compact=True)  # this dialog's keys, over the main screen's

    @abstractmethod
    def compose_body(self) -> ComposeResult:
        """The dialog's fields and buttons, under its title."""

    def focus_field(self, field: Widget) -> None:
        """Focus a field, scrolling the form only as far as it must to show it: Textual
        centres what it focuses (its own auto-focus too, hence none), and in an 80x24
        terminal that scrolled the form's first lines out of sight, the title (which box
        it acts on) among them."""
        field.focus(scroll_visible=False)
        self.call_after_refresh(field.scroll_visible, animate=False)

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def cancel_pressed(self) -> None:
        self.action_cancel()

    def say(self, selector: str, text: str | Text) -> None:
        """Show a line (hidden while empty), touching the dialog's layout only when the
        line's height may change: a field checked as it is typed must not re-lay out the
        whole dialog on every key."""
        label = self.query_one(selector, Label)
        said = self._said.get(selector)
        if said == text:
            return
        self._said[selector] = text
        width = label.content_region.width
        lines = [-(-cell_len(str(t)) // width) if width and t else 0 for t in (said, text)]
        label.update(text, layout=not width or lines[0] != lines[1])
        label.display = bool(text)

    @staticmethod
    def as_submitted(event: Message) -> None:
        """Keys typed just after enter can reach a field before its Submitted message
        reaches the dialog: put the value back as it was submitted."""
        if isinstance(event, Input.Submitted):
            event.input.value = event.value

    def text(self, selector: str) -> str:
        return self.query_one(selector, Input).value.strip()

    def path_or_none(self, selector: str) -> Path | None:
        text = self.text(selector)
        return Path(text).expanduser() if text else None


def int_or_none(text: str) -> int | None:
    text = text.strip()
    return int(text) if text.isdigit() else None


def host_select(hosts: list[str]) -> ComposeResult:
    """A host choice, shown only when there is more than this machine."""
    if len(hosts) > 1:
        yield Label("Host")
        yield Select([(h, h) for h in hosts], value=LOCAL, allow_blank=False, id="host")


def port_problem(text: str, slots: list[PortSlot], host: str) -> str | None:
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


def name_taken(name: str, host: str, taken: Collection[tuple[str, str]]) -> str | None:
    return f"a box named {name} exists on {host}" if (host, name) in taken else None


def ok_cancel(
    label: str, *, variant: ButtonVariant = "primary", disabled: bool = False
) -> ComposeResult:
    """The row a dialog ends with: its action (`#ok`, what Enter does) and Cancel."""
    with Horizontal(classes="buttons"):
        yield Button(label, variant=variant, id="ok", disabled=disabled)
        yield Button("Cancel", id="cancel")


class Form(Vertical):
    """A dialog's form: the fields composed in it (`with Form(...):`), then the line that
    says why it cannot be submitted yet (`#error`), its action (`#ok`, labelled `verb`) and
    Cancel. Enter in a field, or the action, checks it (`problem`) and, when nothing is
    wrong, runs `then` (the dialog dismissed with its request)."""

    DEFAULT_CSS = "Form { height: auto; }"

    def __init__(
        self, verb: str, problem: Callable[[], str | None], then: Callable[[], object]
    ) -> None:
        super().__init__()
        self.verb = verb
        self._problem = problem
        self._then = then

    def compose(self) -> ComposeResult:
        yield Label("", id="error", classes="problem", markup=False)
        yield from ok_cancel(self.verb)

    @on(Input.Submitted)
    @on(Button.Pressed, "#ok")
    def submitted(self, event: Input.Submitted | Button.Pressed) -> None:
        Dialog.as_submitted(event)
        problem = self._problem()
        self.query_one("#error", Label).update(problem or "")
        if not problem:
            self._then()


class Passphrase:
    """A dialog's passphrase field (or two, the second to be sure of it): composed,
    checked, and taken as bytes, the fields wiped as it is taken."""

    def __init__(self, *, twice: bool) -> None:
        self.field = Field(password=True, id="passphrase", classes="secret")
        self.again = Field(password=True, id="passphrase2", classes="secret") if twice else None

    def compose(self) -> ComposeResult:
        yield Label("Passphrase")
        yield self.field
        if self.again is not None:
            yield Label("Passphrase again")
            yield self.again

    def problem(self, missing: str) -> str | None:
        """`missing` while none is typed; typed twice, whether the two differ."""
        if not self.field.value:
            return missing
        if self.again is not None and self.again.value != self.field.value:
            return "the two passphrases differ"
        return None

    def take(self) -> bytes:
        secret = self.field.value.encode()
        for field in (self.field, self.again):
            if field is not None:
                field.value = ""
        return secret
