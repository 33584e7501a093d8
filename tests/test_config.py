import pytest

from hbtui.config import Config, HostSettings, load_config, parse_config, save_config
from hbtui.errors import UsageError
from hbtui.paths import resolve_paths

from support import SIM_RECIPE


def test_defaults_without_a_file(hbtui_home):
    cfg = load_config(resolve_paths())
    assert cfg.defaults.image == "ubuntu:24.04"
    assert (cfg.ports.low, cfg.ports.high) == (4790, 4999)


def test_round_trip(hbtui_home):
    paths = resolve_paths()
    cfg = Config()
    cfg.defaults.cpus = 4
    cfg.keymap = {"new": "N"}
    cfg.hosts["mac"] = HostSettings(ssh="me@mac.local", ports="5000-5100")
    save_config(paths, cfg)
    assert paths.config_file.parent == hbtui_home
    again = load_config(paths)
    assert again.defaults.cpus == 4 and again.keymap == {"new": "N"}
    assert again.hosts["mac"].ssh == "me@mac.local"


@pytest.mark.parametrize(
    "raw, message",
    [
        ({"ports": {"low": 5000, "high": 4000}}, "low <= high"),
        ({"defaults": {"cpus": "two"}}, "defaults.cpus must be an integer 1-256"),
        ({"defaults": {"colour": "red"}}, "unknown key defaults.colour"),
        ({"nonsense": 1}, "unknown key nonsense"),
        ({"hosts": {"mac": {"identity": "x"}}}, "needs an ssh"),
    ],
)
def test_bad_values_are_one_line_errors(raw, message):
    with pytest.raises(UsageError, match=message):
        parse_config(raw)


def test_broken_toml_names_the_file(hbtui_home):
    (hbtui_home / "config.toml").write_text("[defaults\n")
    with pytest.raises(UsageError, match=r"config\.toml"):
        load_config(resolve_paths())


def test_the_recipe_is_a_setting_both_front_ends_share(hbtui_home, monkeypatch, tmp_path):
    """`[defaults] recipe` picks the recipe for new boxes, HBTUI_RECIPE overrides it, and
    the Service (which the CLI and the dashboard both use) resolves it."""

    from hbtui.wiring import build_service

    monkeypatch.delenv("HBTUI_RECIPE", raising=False)
    (hbtui_home / "config.toml").write_text(f'[defaults]\nrecipe = "{SIM_RECIPE}"\n')
    assert build_service().recipe_dir() == SIM_RECIPE.resolve()
    monkeypatch.setenv("HBTUI_RECIPE", str(tmp_path))
    with pytest.raises(UsageError, match=f"not a recipe: {tmp_path}"):
        build_service().recipe_dir()
    monkeypatch.delenv("HBTUI_RECIPE")
    (hbtui_home / "config.toml").write_text("")
    assert (build_service().recipe_dir() / "provision" / "provision.sh").is_file()


def test_a_path_setting_s_tilde_is_the_home_folder(hbtui_home, monkeypatch, tmp_path):
    """`[engine] state_dir = "~/vms"` passed the config check (which expands ~) and the
    engine was handed "~/vms" as written: it made a folder named ~ wherever hbtui ran."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("HBTUI_SMOLVM", "HBTUI_SMOLVM_STATE_DIR", "HBTUI_RECIPE"):
        monkeypatch.delenv(var, raising=False)
    (hbtui_home / "config.toml").write_text(
        '[engine]\nstate_dir = "~/vms"\npath = "~/bin/smolvm"\n[defaults]\nrecipe = "~/recipe"\n'
    )
    config = load_config(resolve_paths())
    assert config.engine_state_dir() == str(tmp_path / "vms")
    assert config.engine_path_setting() == str(tmp_path / "bin/smolvm")
    assert config.recipe_setting() == str(tmp_path / "recipe")
    monkeypatch.setenv("HBTUI_SMOLVM_STATE_DIR", "~/other")
    assert config.engine_state_dir() == str(tmp_path / "other")
