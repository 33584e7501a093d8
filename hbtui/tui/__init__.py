"""The Textual dashboard (`hbtui` with no verb).

Only this package imports Textual; it calls nothing of the core but the
`Service` (hbtui.core.service) and keeps nothing but presentation state
(selection, per-box log buffers). app.py runs the Service calls and routes
their results (messages.py) to the screens, which own the widgets.
"""
