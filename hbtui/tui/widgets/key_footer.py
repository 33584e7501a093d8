"""The footer, with help, quit and the palette pinned to its right end.

Textual's footer lists keys left to right and cuts off what does not fit;
on an 80-column terminal that would be `? Help` and `q Quit`, the two keys a
lost user needs. Pinned, they stay, and the other keys scroll under them.

Textual rebuilds a footer's keys whenever the bindings may have changed (every focus
change, every screen pushed or resumed); this one rebuilds only when the keys it shows
differ, which is most of what opening or closing a dialog used to cost.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.widgets import Footer, Input
from textual.widgets._footer import FooterKey

PINNED = ("app.help", "app.quit")


class KeyFooter(Footer):
    DEFAULT_CSS = """
    KeyFooter #pinned {
        dock: right;
        width: auto;
        height: 1;
        background: $footer-background;
        border-left: vkey $foreground 20%;
    }
    KeyFooter #pinned FooterKey.-command-palette { dock: none; border-left: none; }
    """

    _shown: tuple[Any, ...] | None = None  # the keys of the last compose

    def _keys(self) -> tuple[Any, ...]:
        """What compose would show now: each shown binding, its label and whether enabled.
        While a text field has the focus, a key it would type (`/`, `q`, `?`) is no key:
        it goes into the field, so the footer does not offer it."""
        if not self._bindings_ready:
            return ()
        typing = isinstance(self.screen.focused, Input)
        shown: list[Any] = [self._first()]
        for _, b, enabled, tip in self.screen.active_bindings.values():
            if not (b.show or b.action == "app.command_palette"):
                continue
            display = self.app.get_key_display(b)
            if typing and _typed(display):
                continue
            shown.append((b.key, display, b.description, b.action, enabled, tip))
        return tuple(shown)

    async def recompose(self) -> None:
        """Only when the keys shown would change, and not once the app is closing or the
        footer's screen is gone:
        Textual's footer recomposes when the bindings change, as they do while screens
        close; keys mounted then are never started, so the next recompose could not
        remove them and mounted `#pinned` twice."""
        if self.app.is_running and self.is_attached and self._keys() != self._shown:
            await super().recompose()

    def compose(self) -> ComposeResult:
        self._shown = self._keys()
        yield from self._compose_pinned()

    def _first(self) -> frozenset[str]:
        """The actions the screen wants shown first (`footer_first`: the selected box's
        agent keys), where a narrow footer cannot cut them off."""
        first = getattr(self.screen, "footer_first", None)
        return first() if callable(first) else frozenset()

    def _compose_pinned(self) -> ComposeResult:
        pinned, leading, rest = [], [], []
        typing = isinstance(self.screen.focused, Input)
        first = self._first()
        for widget in super().compose():
            if typing and isinstance(widget, FooterKey) and _typed(widget.key_display):
                continue
            if isinstance(widget, FooterKey) and (
                widget.action in PINNED or widget.has_class("-command-palette")
            ):
                pinned.append(widget)
            elif isinstance(widget, FooterKey) and widget.action in first:
                leading.append(widget)
            else:
                rest.append(widget)
        yield from leading
        yield from rest
        if pinned:
            yield HorizontalGroup(*pinned, id="pinned")


def _typed(display: str) -> bool:
    """A key a text field takes as a character (`/`, `q`, `?`), by how the footer shows it."""
    return len(display) == 1 and display.isprintable()
