"""The `[keymap]` check (a pure function of the config layer) and what `config show` says."""

from __future__ import annotations

import os
import subprocess

import pytest

from hbtui.config import check_keymap
from hbtui.tui.actions import (
    ACTIONS,
    BY_ID,
    COMMANDS,
    LOG,
    MAIN,
    PORTS,
    TABLE,
    default_keys,
    in_scope,
    scopes,
)

from support import HBTUI_BIN, SIM_RECIPE

DEFAULTS = {"new": "n", "start": "s", "stop": "x", "quit": "q"}


def test_a_good_keymap_is_kept_whole():
    keymap = {"new": "ctrl+n", "quit": "ctrl+q,q", "start": "n", "stop": "s"}
    check = check_keymap(keymap, {**DEFAULTS, "save": "w"})
    assert check.keymap == keymap and check.problems == []


def test_an_unknown_action_is_reported_and_dropped():
    check = check_keymap({"frobnicate": "z", "new": "N"}, DEFAULTS)
    assert check.keymap == {"new": "N"}
    [problem] = check.problems
    assert problem.startswith("[keymap] frobnicate: no such action (known: new, start, stop")


def test_a_key_bound_to_another_actions_default_keeps_the_default():
    check = check_keymap({"new": "s"}, DEFAULTS)
    assert check.keymap == {}
    assert check.problems == [
        '[keymap] new = "s": s is also bound to start, which keeps it; back to the default: new (n)'
    ]


def test_two_entries_on_one_key_are_one_problem_and_the_first_keeps_it():
    """new and start both on z: one line; new (first in the table) keeps z, start gets
    its default s back; stop = "n" is fine, since new no longer has n."""
    check = check_keymap({"new": "z", "start": "z", "stop": "n", "quit": "ctrl+q"}, DEFAULTS)
    assert check.keymap == {"new": "z", "stop": "n", "quit": "ctrl+q"}
    assert check.problems == [
        '[keymap] start = "z": z is also bound to new, which keeps it; '
        "back to the default: start (s)"
    ]


def test_a_default_coming_back_can_clash_in_turn():
    """start = "n" and new = "s" swap keys: fine. new = "x" clashes with stop, so new
    gets n back, which start (remapped to n) then loses to it."""
    assert check_keymap({"new": "s", "start": "n"}, DEFAULTS).problems == []
    check = check_keymap({"new": "x", "start": "n"}, DEFAULTS)
    assert check.keymap == {}
    assert [p.split(":")[0] for p in check.problems] == [
        '[keymap] new = "x"',
        '[keymap] start = "n"',
    ]


def test_keys_clash_only_within_a_scope():
    defaults = {**DEFAULTS, "log-next": "n"}
    scopes = {ident: "main" for ident in DEFAULTS} | {"log-next": "log"}
    assert check_keymap({}, defaults, scopes).problems == []
    assert check_keymap({"log-next": "s"}, defaults, scopes).problems == []  # shadows, by design
    assert check_keymap({"stop": "n"}, defaults, scopes).problems == [
        '[keymap] stop = "n": n is also bound to new, which keeps it; back to the default: stop (x)'
    ]


def test_the_same_key_twice_in_one_entry_is_no_clash():
    assert check_keymap({"quit": "q,q"}, DEFAULTS).problems == []


def test_the_actions_table_has_one_id_per_action_and_no_key_twice_in_a_scope():
    assert len(BY_ID) == len(ACTIONS)
    assert check_keymap({}, default_keys(), scopes()).problems == []
    for scope in (MAIN, TABLE, LOG, PORTS):
        keys = [k.strip() for a in in_scope(scope) for k in a.keys.split(",")]
        assert len(keys) == len(set(keys)), scope


def test_the_command_line_offers_the_main_screens_actions_only():
    offered = set(COMMANDS.values())
    assert {"stop", "new", "quit"} <= offered
    assert {"diff-next", "log-wrap", "try-keep", "port-pick", "up"}.isdisjoint(offered)
    assert all(BY_ID[ident].scope == MAIN for ident in offered)


def test_the_log_and_the_table_keys_can_be_remapped():
    check = check_keymap({"log-wrap": "ctrl+w", "down": "ctrl+n"}, default_keys(), scopes())
    assert check.problems == [] and check.keymap == {"log-wrap": "ctrl+w", "down": "ctrl+n"}


def config_show(home, env_extra=None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HBTUI_HOME": str(home)}
    env.pop("HBTUI_RECIPE", None)
    env.update(env_extra or {})
    return subprocess.run(
        [HBTUI_BIN, "config", "show"], capture_output=True, text=True, env=env, timeout=60
    )


def test_config_show_lists_keymap_problems_and_the_recipe_in_use(tmp_path):
    (tmp_path / "config.toml").write_text(
        f'[defaults]\nrecipe = "{SIM_RECIPE}"\n[keymap]\nnew = "s"\nfrob = "z"\nquit = "ctrl+q"\n'
    )
    done = config_show(tmp_path)
    assert done.returncode == 0, done.stderr
    comments = [line for line in done.stdout.splitlines() if line.startswith("#")]
    assert comments[0] == f"# recipe in use: {SIM_RECIPE.resolve()}"
    assert comments[1].startswith("# [keymap] frob: no such action")
    assert comments[2] == (
        '# [keymap] new = "s": s is also bound to start, which keeps it; '
        "back to the default: new (n)"
    )
    assert len(comments) == 3
    assert 'quit = "ctrl+q"' in done.stdout  # the file's values are shown as they are


def test_config_show_says_when_the_recipe_setting_is_no_recipe(tmp_path):
    done = config_show(tmp_path, {"HBTUI_RECIPE": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert f"# recipe: not a recipe: {tmp_path.resolve()} has no provision/provision.sh" in (
        done.stdout.splitlines()
    )


@pytest.mark.parametrize("keymap", ["", '[keymap]\nnew = "ctrl+n"\n'])
def test_config_show_stays_valid_toml(tmp_path, keymap):
    import tomllib

    (tmp_path / "config.toml").write_text(keymap)
    done = config_show(tmp_path)
    assert done.returncode == 0, done.stderr
    assert "defaults" in tomllib.loads(done.stdout)
