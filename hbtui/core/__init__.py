"""The core: boxes, ports, registry, lifecycle, archives. No Textual here."""
