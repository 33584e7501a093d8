"""Archives: HBX files, a box's /data saved into one and loaded back, the backups."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbtui.core.foundation.lazy import later

if TYPE_CHECKING:
    from hbtui.core.archives.backups import ArchiveEntry

__all__ = ["ArchiveEntry"]

# These live beside the box operations or the archive format: each loads when first used.
__getattr__ = later(__name__, {"ArchiveEntry": "backups"})
