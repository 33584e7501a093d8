"""`hbtui doctor`: can this host run boxes, and with --probe, does a machine boot."""
