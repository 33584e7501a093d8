"""hbtui: boxes for AI coding agents, one smolvm microVM each."""

__version__ = "0.1.0"
