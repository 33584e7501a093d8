"""The two ways into a box: its web UI in a browser, a shell on this terminal."""
