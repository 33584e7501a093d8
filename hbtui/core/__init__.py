"""The core, without Textual: the Service over feature packages over a foundation."""
