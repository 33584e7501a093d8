"""The smolvm engine layer: locating the binary, running it, typed results."""

from hbtui.engine.client import Engine, EngineStream
from hbtui.engine.errors import (
    EngineError,
    EngineLineTooLong,
    EngineMissing,
    EngineTimeout,
    MachineExists,
    MachineNotFound,
    MachineNotRunning,
)
from hbtui.engine.locate import MIN_VERSION, Located, locate_engine
from hbtui.engine.models import ExecResult, Machine, MachineSpec

__all__ = [
    "MIN_VERSION",
    "Engine",
    "EngineError",
    "EngineLineTooLong",
    "EngineMissing",
    "EngineStream",
    "EngineTimeout",
    "ExecResult",
    "Located",
    "Machine",
    "MachineExists",
    "MachineNotFound",
    "MachineNotRunning",
    "MachineSpec",
    "locate_engine",
]
