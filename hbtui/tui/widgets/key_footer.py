"""The footer, with help, quit and the palette pinned to its right end.

Textual's footer lists keys left to right and cuts off what does not fit;
on an 80-column terminal that would be `? Help` and `q Quit`, the two keys a
lost user needs. Pinned, they stay, and the other keys scroll under them.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.widgets import Footer
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

    async def recompose(self) -> None:
        """Not once the app is closing: Textual's footer recomposes when the bindings
        change, as they do while screens close; keys mounted then are never started, so
        the next recompose could not remove them and mounted `#pinned` twice."""
        if self.app.is_running:
            await super().recompose()

    def compose(self) -> ComposeResult:
        pinned = []
        for widget in super().compose():
            if isinstance(widget, FooterKey) and (
                widget.action in PINNED or widget.has_class("-command-palette")
            ):
                pinned.append(widget)
            else:
                yield widget
        if pinned:
            yield HorizontalGroup(*pinned, id="pinned")
