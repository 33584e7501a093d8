"""config.toml as the front ends reach it (`service.settings`): the settings in force with
their sources, the commented template, one setting set, the file edited."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from hbtui.config import Config, read_config_table
from hbtui.paths import Paths

if TYPE_CHECKING:
    from hbtui.core.config.edit import Changed

# hbtui.core.config.text and edit load on first use: only the `config` verbs need them.


class Settings:
    """The settings of config.toml, read and changed the way loading checks them."""

    def __init__(self, paths: Paths, config: Config) -> None:
        self._paths = paths
        self._config = config

    def listing(self) -> str:
        """The settings in force as TOML, each marked with its source (default, file,
        environment)."""
        from hbtui.core.config.text import listing

        return listing(self._config, read_config_table(self._paths))

    def template(self) -> str:
        """Every setting with its default and what it is for, as commented TOML."""
        from hbtui.core.config.text import template

        return template()

    def set(self, key: str, value: str) -> Changed:
        """Set one setting in config.toml, checked as loading checks it; the rest of the
        file (comments too) stays as it was."""
        from hbtui.core.config.edit import set_value

        return set_value(self._paths, key, value)

    def edit(self, run_editor: Callable[[Path], None], again: Callable[[str], bool]) -> str:
        """config.toml edited by the user through `run_editor`, saved once it loads."""
        from hbtui.core.config.edit import edit

        return edit(self._paths, run_editor, again)
