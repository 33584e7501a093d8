"""The dashboard's one-line text inputs: Textual's Input, without a layout a key."""

from __future__ import annotations

from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Input


class TextInput(Input):
    """An Input whose typing repaints it alone.

    Input sets its virtual size (its text's width) on every key, and a widget's virtual
    size is a layout reactive: every key typed laid the whole screen out again (a dialog
    and the dashboard under it). A field's box never depends on its text, which only
    scrolls inside it, so a change of that width repaints the field alone.
    """

    virtual_size = Reactive(Size(0, 0))
