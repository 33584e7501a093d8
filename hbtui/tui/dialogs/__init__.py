"""The dashboard's dialogs, one module per feature: `new` (new box, branch), `archive`
(save, load, extract; `archive_picker`: the archive Load and Extract start from),
`remove`, `bulk` (save several), `confirm` (yes/no, quitting), `url` (no browser); `base`
holds what they share. A dialog returns a request through `dismiss()`, defined next to
it, that knows which Service call runs it."""
