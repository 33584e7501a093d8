"""A box's work and the tries: the diff view, pull, the compare view and keep."""
