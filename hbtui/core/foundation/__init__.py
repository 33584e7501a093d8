"""What every feature stands on: registry, hosts, ports, views, locks, specs, recipes.

The front ends take the value types below from here; each loads its module when first
used, so that a verb importing one foundation module (a pull: git, hosts, the registry)
does not load them all."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hbtui.core.foundation.lazy import later

if TYPE_CHECKING:
    from hbtui.core.foundation.forwardbook import Forwarded, check_port
    from hbtui.core.foundation.git import split_repo_ref
    from hbtui.core.foundation.hosts import WebAccess
    from hbtui.core.foundation.ports import BUSY, FREE, USED, PortSlot
    from hbtui.core.foundation.specs import LoadSpec, NewSpec, SaveSpec, WorkRequest
    from hbtui.core.foundation.views import (
        BOX,
        MISSING,
        BoxDetails,
        BoxListing,
        BoxStats,
        BoxView,
        DetailSection,
    )

__all__ = [
    "BOX",
    "BUSY",
    "FREE",
    "MISSING",
    "USED",
    "BoxDetails",
    "BoxListing",
    "BoxStats",
    "BoxView",
    "DetailSection",
    "Forwarded",
    "LoadSpec",
    "NewSpec",
    "PortSlot",
    "SaveSpec",
    "WebAccess",
    "WorkRequest",
    "check_port",
    "split_repo_ref",
]

__getattr__ = later(
    __name__,
    {
        "BOX": "views",
        "BUSY": "ports",
        "FREE": "ports",
        "MISSING": "views",
        "USED": "ports",
        "BoxDetails": "views",
        "BoxListing": "views",
        "BoxStats": "views",
        "BoxView": "views",
        "DetailSection": "views",
        "Forwarded": "forwardbook",
        "LoadSpec": "specs",
        "NewSpec": "specs",
        "PortSlot": "ports",
        "SaveSpec": "specs",
        "WebAccess": "hosts",
        "WorkRequest": "specs",
        "check_port": "forwardbook",
        "split_repo_ref": "git",
    },
)
