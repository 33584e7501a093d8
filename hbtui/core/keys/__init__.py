"""Keys outside the box: the secret store, credential presets, the archive passphrase."""

from __future__ import annotations

from hbtui.core.keys.passphrase import (
    SecretsPassphraseNeeded,
    get_passphrase,
    read_secret_value,
    scrub_environment,
    secrets_passphrase_without_prompt,
)

__all__ = [
    "SecretsPassphraseNeeded",
    "get_passphrase",
    "read_secret_value",
    "scrub_environment",
    "secrets_passphrase_without_prompt",
]
