"""Screens of the dashboard: the main screen, the modal dialogs, help."""
