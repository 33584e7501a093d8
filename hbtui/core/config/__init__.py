"""config.toml for people: the template, the settings and their sources, set, edit."""
