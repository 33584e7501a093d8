"""What the dashboard's dialogs share: `base` (the frame, the text field, the form and its
passphrase, the checks several dialogs make), `confirm` (yes/no, quitting) and `secrets`
(the secrets file's passphrase, asked whatever the feature). Each feature's own dialogs live
in its package (`tui/boxes/new.py`, `tui/archives/dialogs.py`, …). A dialog returns a
request through `dismiss()`, defined next to it, that knows which Service call runs it."""
