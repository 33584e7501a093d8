"""The actions table (actions.py) as Textual bindings, one list per scope."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from hbtui.tui.actions import in_scope


def bindings(scope: str) -> list[BindingType]:
    """The bindings of one scope, each with its id, so `[keymap]` can remap it."""
    return [Binding(a.keys, a.action, a.label, id=a.id, show=a.show) for a in in_scope(scope)]
