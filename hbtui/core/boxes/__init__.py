"""Boxes: making, starting, stopping, removing and remaking one; the steps inside it."""
