"""The New dialog's Options section (a base or not, branchable, credentials, egress and its
allow list, CPUs, memory): its fields, made when the section is first opened (the configured
defaults stand for them until then), and their checks."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, Protocol, TypeVar

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Checkbox, Label, Select

from hbtui.config import EGRESS_MODES, Defaults, host_pattern_problem, split_list
from hbtui.tui.dialogs.base import Field

W = TypeVar("W", bound=Widget)


class Keep(Protocol):
    """The form's note of a widget as it is made (NewBoxDialog.keep)."""

    def __call__(self, widget: W) -> W: ...


def option_defaults(defaults: Defaults) -> dict[str, object]:
    """Each option field's value before the section is opened: the config's."""
    return {
        "#use-base": defaults.use_bases,
        "#branchable": defaults.branchable,
        "#credentials": defaults.credentials,
        "#egress": defaults.egress,
        "#allow": defaults.allow,
        "#cpus": str(defaults.cpus),
        "#memory": str(defaults.memory_mib),
    }


def compose_options(value: Callable[[str], Any], keep: Keep) -> ComposeResult:
    """The fields, each at `value(selector)` and handed to `keep` as it is made."""
    with Horizontal(classes="row"):
        base = Checkbox("From a base when there is one", value("#use-base"), id="use-base")
        yield keep(base)
        yield keep(Checkbox("Branchable", value=value("#branchable"), id="branchable"))
    with Horizontal(classes="row"):
        with Vertical(classes="wide"):
            yield Label("Credentials (presets; the keys stay out)")
            yield keep(
                Field(value=value("#credentials"), placeholder="anthropic,github", id="credentials")
            )
        with Vertical():
            yield Label("Egress")
            yield keep(
                Select(
                    [(mode, mode) for mode in EGRESS_MODES],
                    value=value("#egress"),
                    allow_blank=False,
                    id="egress",
                )
            )
    yield keep(Label("", id="credentials-problem", classes="problem", markup=False))
    yield keep(Label("Allow list (hosts, comma-separated)", id="allow-label", markup=False))
    yield keep(Field(value=value("#allow"), placeholder="pypi.org,*.npmjs.org", id="allow"))
    yield keep(Label("", id="allow-problem", classes="problem", markup=False))
    with Horizontal(classes="row"):
        with Vertical():
            yield Label("CPUs")
            yield keep(Field(value=value("#cpus"), type="integer", id="cpus"))
        with Vertical():
            yield Label("Memory (MiB)")
            yield keep(Field(value=value("#memory"), type="integer", id="memory"))


def credentials_problem(
    credentials: str, presets: Collection[str] | None, stored: Collection[str]
) -> str | None:
    """Each preset named must exist and have its secret stored (None: not read yet)."""
    if presets is None:
        return None  # not read yet (Create stays off until they are)
    for name in split_list(credentials):
        if name not in presets:
            return f"no preset {name!r}; known: {', '.join(sorted(presets))}"
        if name not in stored:
            return f"no secret {name!r} stored: hbtui secrets set {name}"
    return None


def allow_problem(egress: str, allow: str, credentials: str) -> str | None:
    """An allow list (egress "allow-list" only) of host patterns, not empty."""
    if egress != "allow-list":
        return None
    hosts = split_list(allow)
    bad = next((h for h in hosts if host_pattern_problem(h)), None)
    if bad:
        return f"{bad!r}: {host_pattern_problem(bad)}"
    if not hosts and not split_list(credentials):
        return "an allow list needs a host (or a credential, whose hosts it adds)"
    return None
