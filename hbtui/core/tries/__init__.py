"""Best of N: one task given to N boxes, their results side by side, one kept."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbtui.core.foundation.lazy import later
from hbtui.core.tries.book import CheckResult, TryRecord

if TYPE_CHECKING:
    from hbtui.core.tries.operations import TryRow

__all__ = ["CheckResult", "TryRecord", "TryRow"]

# These live beside the box operations or the archive format: each loads when first used.
__getattr__ = later(__name__, {"TryRow": "operations"})
