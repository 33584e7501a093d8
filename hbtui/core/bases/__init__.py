"""Instant boxes: building a base, branching a box, and what a killed build left."""
