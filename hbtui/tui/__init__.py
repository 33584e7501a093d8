"""The Textual dashboard (`hbtui` with no verb).

Only this package imports Textual; it calls BoxService for everything and
keeps nothing but presentation state (selection, per-box log buffers).
"""
