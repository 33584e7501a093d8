"""The Textual dashboard (`hbtui` with no verb).

Only this package imports Textual; it calls nothing of the core but the
`Service` (hbtui.core.service) and keeps nothing but presentation state
(selection, per-box log buffers). app.py holds the Service and runs the
operations; each feature (a package here: boxes, agents, work, archives, shell)
asks its questions and acts on its keys, and its results (messages.py) go to
the screens, which own the widgets.
"""
