"""One check of a host's fitness for boxes, as `doctor` and `hosts check` report it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    needed: bool = True  # a failed needed check fails the report; others are advice
    fix: str = ""

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def all_needed_pass(checks: Iterable[Check]) -> bool:
    return all(c.ok or not c.needed for c in checks)
