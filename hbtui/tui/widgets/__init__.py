"""Widgets of the dashboard: the box table, the log pane, the port grid."""
