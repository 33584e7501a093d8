"""What every feature stands on: registry, hosts, ports, views, locks, specs, recipes."""

from __future__ import annotations

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
