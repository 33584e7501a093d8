"""The boxes: the main screen, the box table, the details view, and the keys that act on
boxes (new, branch, start, stop, remove, cancel) with the read-only questions about them."""
