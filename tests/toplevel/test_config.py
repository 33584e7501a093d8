import os
import pty
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

from hbtui.config import Config, HostSettings, load_config, parse_config, save_config
from hbtui.core.config.text import template
from hbtui.errors import UsageError
from hbtui.paths import resolve_paths
from hbtui.schema import to_table

from support import HBTUI_BIN, ROOT, SIM_RECIPE


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
    assert build_service().boxes.recipe_dir() == SIM_RECIPE.resolve()
    monkeypatch.setenv("HBTUI_RECIPE", str(tmp_path))
    with pytest.raises(UsageError, match=f"not a recipe: {tmp_path}"):
        build_service().boxes.recipe_dir()
    monkeypatch.delenv("HBTUI_RECIPE")
    (hbtui_home / "config.toml").write_text("")
    assert (build_service().boxes.recipe_dir() / "provision" / "provision.sh").is_file()


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


# ---------------------------------------------------------------------------
# config show, set and edit, through the CLI.


def config_cli(*args: str, env_extra=None, **kw) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [HBTUI_BIN, "config", *args], capture_output=True, text=True, env=env, timeout=60, **kw
    )


def one_error(done: subprocess.CompletedProcess[str], status: int = 2) -> str:
    assert (done.returncode, done.stdout) == (status, ""), done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith("error: ") and "Traceback" not in done.stderr
    return line


def test_the_template_is_every_setting_at_its_default_and_the_docs_show_it():
    """One source for the commented template: the schema. It loads as the defaults, says
    what each setting is for, and is the block docs/boxes.md shows."""
    done = config_cli("show", "--template")
    assert done.returncode == 0, done.stderr
    assert parse_config(tomllib.loads(done.stdout)) == Config()
    assert done.stdout == template()
    named_entries = {"hosts": {}, "credentials": {}}  # shown as commented examples
    assert {**tomllib.loads(done.stdout), **named_entries} == to_table(Config())
    values = [ln for ln in done.stdout.splitlines() if " = " in ln and not ln.startswith("#")]
    assert [ln for ln in values if "  # " not in ln] == ["low = 4790", "high = 4999"]  # [ports]
    assert "# [hosts.NAME]" in done.stdout and "# [credentials.NAME]" in done.stdout
    docs = (ROOT / "docs" / "boxes.md").read_text()
    assert f"```toml\n{done.stdout}```" in docs


def test_config_show_marks_where_each_value_comes_from(hbtui_home, tmp_path):
    """`[engine] path = ""` was shown while HBTUI_SMOLVM was in force, and nothing said
    which values the file set."""
    (hbtui_home / "config.toml").write_text(
        '# mine\n[defaults]\ncpus = 4\n[engine]\npath = "/opt/smolvm"\n[keymap]\nnew = "N"\n'
    )
    env = {"HBTUI_SMOLVM": str(tmp_path / "sim"), "HBTUI_RECIPE": ""}
    done = config_cli("show", env_extra=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert re.search(r"^cpus = 4 +# file$", done.stdout, re.M), done.stdout
    assert re.search(r"^memory_mib = 4096 +# default$", done.stdout, re.M)
    assert (
        f'path = "{tmp_path / "sim"}"  # environment (HBTUI_SMOLVM; the file says "/opt/smolvm")'
        in lines
    )
    assert re.search(r'^new = "N" +# file$', done.stdout, re.M)
    shown = tomllib.loads(done.stdout)  # still TOML: the values in force
    assert shown["engine"]["path"] == str(tmp_path / "sim") and shown["defaults"]["cpus"] == 4
    (hbtui_home / "config.toml").unlink()
    assert "# file" not in config_cli("show", env_extra=env).stdout


def test_config_set_changes_one_value_and_keeps_the_rest_of_the_file(hbtui_home):
    text = (
        "# my settings\n"
        "refresh_seconds = 5.0  # a slow terminal\n\n"
        "[defaults]\n"
        "cpus = 2      # small boxes\n"
        'image = "debian:12"\n'
    )
    config = hbtui_home / "config.toml"
    config.write_text(text)
    done = config_cli("set", "defaults.cpus", "4")
    assert (done.returncode, done.stdout) == (0, "✓ defaults.cpus = 4 (was 2)\n"), done.stderr
    assert config.read_text() == text.replace("cpus = 2 ", "cpus = 4 ")
    assert config.stat().st_mode & 0o777 == 0o600
    assert config_cli("set", "refresh_seconds", "3").stdout == (
        "✓ refresh_seconds = 3.0 (was 5.0)\n"
    )
    assert config_cli("set", "hosts.mac.ssh", "me@mac.local").returncode == 0
    assert config_cli("set", "keymap.new", "ctrl+n").returncode == 0
    assert config_cli("set", "defaults.branchable", "true").returncode == 0
    cfg = load_config(resolve_paths())
    assert (cfg.defaults.cpus, cfg.refresh_seconds, cfg.defaults.branchable) == (4, 3.0, True)
    assert cfg.hosts["mac"].ssh == "me@mac.local" and cfg.keymap == {"new": "ctrl+n"}
    assert config.read_text().startswith(
        "# my settings\nrefresh_seconds = 3.0  # a slow terminal\n"
    )


def test_config_set_without_a_file_makes_one(hbtui_home):
    done = config_cli("set", "engine.path", "/opt/smolvm", env_extra={"HBTUI_SMOLVM": "/x"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        '✓ engine.path = "/opt/smolvm" (was the default)\n'
        "note: HBTUI_SMOLVM overrides engine.path in this environment\n"
    )
    assert (hbtui_home / "config.toml").read_text() == '[engine]\npath = "/opt/smolvm"\n'


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("defaults.cpu", "4", "no setting named defaults.cpu (hbtui config show --template"),
        ("defaults", "4", "defaults is a table: name one of its settings, like defaults.image"),
        ("hosts.mac", "x", "like hosts.NAME.ssh"),
        ("defaults.cpus", "four", 'defaults.cpus must be an integer 1-256, got "four"'),
        ("defaults.cpus", "0", "defaults.cpus must be an integer 1-256, got 0"),
        ("refresh_seconds", "nan", "refresh_seconds must be a number 0.5-3600"),
        ("agent_alerts", "yes", 'agent_alerts must be true or false, got "yes"'),
        ("defaults.egress", "closed", "defaults.egress must be one of"),
        ("ports.low", "5000", "ports: need 1024 <= low <= high <= 65535, got 5000-4999"),
        ("hosts.mac.identity", "~/.ssh/id", 'hosts.mac needs an ssh = "USER@HOST" key'),
    ],
)
def test_config_set_refuses_an_unknown_key_or_a_bad_value_writing_nothing(
    hbtui_home, key, value, message
):
    config = hbtui_home / "config.toml"
    config.write_text("[defaults]\ncpus = 2  # mine\n")
    before = config.stat()
    line = one_error(config_cli("set", key, value))
    assert message in line, line
    after = config.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert config.read_text() == "[defaults]\ncpus = 2  # mine\n"


def test_config_set_puts_right_the_value_that_kept_the_file_from_loading(hbtui_home):
    config = hbtui_home / "config.toml"
    config.write_text("[defaults]\ncpus = 0\n")
    assert "defaults.cpus must be" in one_error(config_cli("show"))
    assert config_cli("set", "defaults.cpus", "3").returncode == 0
    assert "cpus = 3" in config_cli("show").stdout


def editor(tmp_path: Path, *steps: str) -> dict[str, str]:
    """An $EDITOR that runs the shell `steps` in turn, one per call, on the file ($1)."""
    script = tmp_path / f"edit{len(list(tmp_path.glob('edit*.sh')))}.sh"
    calls = script.with_suffix(".calls")
    cases = "".join(f"  {i}) {step} ;;\n" for i, step in enumerate(steps, 1))
    script.write_text(
        f"#!/bin/sh\nn=$(($(cat {calls} 2>/dev/null || echo 0) + 1))\necho $n > {calls}\n"
        f"case $n in\n{cases}esac\n"
    )
    script.chmod(0o755)
    scratch = tmp_path / "tmp"
    scratch.mkdir(exist_ok=True)
    return {"EDITOR": str(script), "VISUAL": "", "TMPDIR": str(scratch)}


def test_config_edit_saves_an_edit_that_loads(hbtui_home, tmp_path):
    config = hbtui_home / "config.toml"
    config.write_text("# mine\n[defaults]\ncpus = 2\n")
    env = editor(tmp_path, "sed -i 's/cpus = 2/cpus = 6/' \"$1\"")
    done = config_cli("edit", env_extra=env)
    assert (done.returncode, done.stdout) == (0, f"✓ saved {config}\n"), done.stderr
    assert config.read_text() == "# mine\n[defaults]\ncpus = 6\n"
    assert list((tmp_path / "tmp").iterdir()) == []  # the copy edited is gone


def test_config_edit_without_a_file_starts_from_the_template(hbtui_home, tmp_path):
    env = editor(tmp_path, "sed -i 's/^cpus = 2 /cpus = 3 /' \"$1\"")
    assert config_cli("edit", env_extra=env).returncode == 0
    assert (hbtui_home / "config.toml").read_text() == template().replace("cpus = 2 ", "cpus = 3 ")
    (hbtui_home / "config.toml").unlink()
    done = config_cli("edit", env_extra=editor(tmp_path, "true"))
    assert done.stdout.startswith("no change to ") and not (hbtui_home / "config.toml").exists()


def test_config_edit_refuses_an_edit_that_does_not_load(hbtui_home, tmp_path):
    """Without a terminal there is nobody to edit it again: one line, the old file kept."""
    config = hbtui_home / "config.toml"
    config.write_text("[defaults]\ncpus = 2\n")
    env = editor(tmp_path, "sed -i 's/cpus = 2/cpus = 0/' \"$1\"")
    line = one_error(config_cli("edit", env_extra=env))
    assert line == (
        "error: your edit: defaults.cpus must be an integer 1-256, got 0 (config.toml is unchanged)"
    )
    assert config.read_text() == "[defaults]\ncpus = 2\n"
    assert list((tmp_path / "tmp").iterdir()) == []
    broken = editor(tmp_path, "echo '[defaults' > \"$1\"")
    assert "your edit: not valid TOML" in one_error(config_cli("edit", env_extra=broken))
    failing = {**editor(tmp_path, "true"), "EDITOR": "false"}
    assert one_error(config_cli("edit", env_extra=failing), 1) == (
        "error: the editor 'false' exited with status 1; config.toml is unchanged"
    )
    assert config.read_text() == "[defaults]\ncpus = 2\n"


def test_config_edit_offers_another_go_at_a_terminal(hbtui_home, tmp_path):
    config = hbtui_home / "config.toml"
    config.write_text("[defaults]\ncpus = 2\n")
    env = editor(
        tmp_path,
        "sed -i 's/cpus = 2/cpus = 0/' \"$1\"",
        "sed -i 's/cpus = 0/cpus = 8/' \"$1\"",
    )
    primary, secondary = pty.openpty()
    child = subprocess.Popen(
        [HBTUI_BIN, "config", "edit"],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, **env},
        text=True,
    )
    os.close(secondary)
    seen = b""
    while b"Edit it again? [Y/n]" not in seen:
        chunk = os.read(primary, 1024)
        assert chunk, seen
        seen += chunk
    assert b"your edit: defaults.cpus must be an integer 1-256, got 0" in seen
    os.write(primary, b"y\n")
    out, _ = child.communicate(timeout=60)
    os.close(primary)
    assert (child.returncode, out) == (0, f"✓ saved {config}\n")
    assert config.read_text() == "[defaults]\ncpus = 8\n"


def test_config_edit_never_overwrites_a_change_made_meanwhile(hbtui_home, tmp_path):
    config = hbtui_home / "config.toml"
    config.write_text("[defaults]\ncpus = 2\n")
    env = editor(tmp_path, f"sed -i 's/cpus = 2/cpus = 6/' \"$1\" {config}")
    line = one_error(config_cli("edit", env_extra=env), 1)
    assert line.startswith("error: config.toml changed while you edited it; nothing saved")
    assert config.read_text() == "[defaults]\ncpus = 6\n"  # the other change, kept
    [kept] = (tmp_path / "tmp").iterdir()
    assert str(kept / "config.toml") in line


def test_the_file_s_own_verbs_work_when_it_does_not_load(hbtui_home, tmp_path):
    """config path, edit and show --template are how a broken file gets put right."""
    config = hbtui_home / "config.toml"
    config.write_text("[defaults\n")
    assert "not valid TOML" in one_error(config_cli("show"))
    assert config_cli("path").stdout == f"{config}\n"
    assert config_cli("show", "--template").returncode == 0
    env = editor(tmp_path, "printf '[defaults]\\ncpus = 3\\n' > \"$1\"")
    assert config_cli("edit", env_extra=env).returncode == 0
    assert load_config(resolve_paths()).defaults.cpus == 3
