"""The smolvm engine layer: locating the binary, running it, typed results."""

from hbtui.engine.capture import Bound
from hbtui.engine.client import Engine, EngineStream
from hbtui.engine.errors import (
    EngineError,
    EngineLineTooLong,
    EngineMissing,
    EngineOutputTooLong,
    EngineTimeout,
    MachineExists,
    MachineNotFound,
    MachineNotPaused,
    MachineNotRunning,
    MachinePaused,
)
from hbtui.engine.locate import MIN_VERSION, Located, locate_engine
from hbtui.engine.models import ExecResult, Machine, MachineSpec
from hbtui.engine.runner import Pipe

__all__ = [
    "MIN_VERSION",
    "Bound",
    "Engine",
    "EngineError",
    "EngineLineTooLong",
    "EngineMissing",
    "EngineOutputTooLong",
    "EngineStream",
    "EngineTimeout",
    "ExecResult",
    "Located",
    "Machine",
    "MachineExists",
    "MachineNotFound",
    "MachineNotPaused",
    "MachineNotRunning",
    "MachinePaused",
    "MachineSpec",
    "Pipe",
    "locate_engine",
]
