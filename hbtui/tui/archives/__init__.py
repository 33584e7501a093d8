"""Archives: save, load and extract, and the window that shows their progress."""
