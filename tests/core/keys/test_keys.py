"""Keys never in the box against the simulator: the secret store, credential
presets bound by the engine, the egress policy, and where a key must never be found:
any process's argv, any file under the state home or the engine's state dir, a box's
archive, the guest's environment (the placeholder only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import SIM_RECIPE
from support.cli import KEY, PASS, ArgvWatch, answers, as_root, files_holding, hbtui, run_ok

pytestmark = pytest.mark.sim

GH = "ghp_hbtuiTESTtoken0123456789"


@pytest.fixture
def key_env(sim_env):
    return {**sim_env, "HBTUI_RECIPE": str(SIM_RECIPE), "HBTUI_SECRETS_PASSPHRASE": PASS}


def machine_record(env: dict[str, str], name: str) -> dict:
    path = Path(env["HBTUI_SMOLVM_STATE_DIR"]) / "smolsim" / "machines" / name / "machine.json"
    return json.loads(path.read_text())


def guest_environs(env: dict[str, str], name: str) -> str:
    """Every process's environment inside the box, read as root through the engine."""
    return as_root(env, name, "cat /proc/[0-9]*/environ 2>/dev/null; true").replace("\0", "\n")


def test_secrets_set_ls_rm_in_an_encrypted_file(key_env):
    home = Path(key_env["HBTUI_HOME"])
    assert "No secrets yet" in run_ok("secrets", "ls", env=key_env)
    out = run_ok("secrets", "set", "anthropic", env=key_env, input=KEY + "\n")
    assert "stored in the file" in out and KEY not in out
    [listed] = json.loads(run_ok("secrets", "ls", "--json", env=key_env))
    assert listed["name"] == "anthropic" and listed["store"] == "file" and listed["boxes"] == []
    assert KEY not in json.dumps(listed)
    assert (home / "secrets.hbx").stat().st_mode & 0o077 == 0
    assert files_holding(KEY, home) == []  # encrypted, and the index holds names only

    wrong = hbtui(
        "secrets",
        "set",
        "github",
        env={**key_env, "HBTUI_SECRETS_PASSPHRASE": "nope"},
        input=GH + "\n",
    )
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr
    assert wrong.stderr.count("\n") == 1 and "passphrase" in wrong.stderr.lower()

    unknown = hbtui("secrets", "set", "nosuch", env=key_env, input="x\n")
    assert unknown.returncode != 0 and "no credential preset 'nosuch'" in unknown.stderr
    empty = hbtui("secrets", "set", "openai", env=key_env, input="\n")
    assert empty.returncode != 0 and "empty" in empty.stderr

    run_ok("secrets", "rm", "anthropic", env=key_env)
    assert json.loads(run_ok("secrets", "ls", "--json", env=key_env)) == []
    gone = hbtui("secrets", "rm", "anthropic", env=key_env)
    assert gone.returncode != 0 and "no secret 'anthropic'" in gone.stderr


def test_secrets_go_to_the_os_keyring_when_there_is_one(key_env, tmp_path):
    keyring_file = tmp_path / "os-keyring.json"
    env = {
        **key_env,
        "PYTHON_KEYRING_BACKEND": "support.fake_keyring.FileKeyring",
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "FAKE_KEYRING_FILE": str(keyring_file),
    }
    out = run_ok("secrets", "set", "github", env=env, input=GH + "\n")
    assert "stored in the keyring" in out
    assert json.loads(keyring_file.read_text()) == {"hbtui/github": GH}
    assert files_holding(GH, Path(env["HBTUI_HOME"])) == []
    assert not (Path(env["HBTUI_HOME"]) / "secrets.hbx").exists()
    [listed] = json.loads(run_ok("secrets", "ls", "--json", env=env))
    assert listed["store"] == "keyring"
    run_ok("secrets", "rm", "github", env=env)
    assert json.loads(keyring_file.read_text()) == {}


def test_a_box_with_a_credential_sees_only_the_placeholder(key_env, tmp_path):
    """The issue's "done when": the guest sees a placeholder; the key is in no argv, file,
    log or archive; egress is private-blocked."""
    env = {**key_env, "HBTUI_PASSPHRASE": "archive passphrase for tests"}
    home, state = Path(env["HBTUI_HOME"]), Path(env["HBTUI_SMOLVM_STATE_DIR"])
    run_ok("secrets", "set", "anthropic", env=env, input=KEY + "\n")
    with ArgvWatch(KEY) as made:
        run_ok("new", "k1", "--credential", "anthropic", "-q", env=env)
        seen = run_ok("exec", "k1", "--", "sh", "-c", "echo $ANTHROPIC_API_KEY", env=env).strip()
        environs = guest_environs(env, "k1")
    assert made.samples > 20 and made.hits == []
    assert seen.startswith("SMOL_PLACEHOLDER_ANTHROPIC_") and KEY not in seen
    assert seen in environs and KEY not in environs

    record = machine_record(env, "k1")
    [binding] = record["credential_policy"]["credentials"]
    assert binding["name"] == "anthropic" and binding["environment_variable"] == "ANTHROPIC_API_KEY"
    assert binding["allowed_hosts"] == ["api.anthropic.com"]
    assert binding["set_header"] == "x-api-key"
    assert record["block_private"] == []

    egress = json.loads(run_ok("egress", "k1", "--json", env=env))
    assert egress["egress"] == "private-blocked" and egress["denials"] == []
    assert "private-blocked" in run_ok("egress", "k1", env=env)
    [box] = json.loads(run_ok("ls", "--json", env=env))
    assert box["credentials"] == ["anthropic"] and box["egress"] == "private-blocked"

    archive = tmp_path / "k1.hbx"
    with ArgvWatch(KEY) as lived:
        run_ok("stop", "k1", env=env)
        run_ok("start", "k1", env=env)
        assert answers(box["port"])
        run_ok("save", "k1", "-o", str(archive), env=env)
    assert lived.hits == []
    run_ok("extract", str(archive), str(tmp_path / "files"), env=env)
    assert list((tmp_path / "files").rglob("*")) and files_holding(KEY, tmp_path / "files") == []
    assert files_holding(KEY, home, state, archive.parent) == []


def test_a_claude_subscription_token_stays_on_the_host(key_env):
    """The `claude-subscription` preset: the box's CLAUDE_CODE_OAUTH_TOKEN is a
    placeholder, which Claude Code sends as `Authorization: Bearer` to api.anthropic.com,
    where the engine replaces it in the headers; the token is in no argv, guest process or
    file."""
    home, state = Path(key_env["HBTUI_HOME"]), Path(key_env["HBTUI_SMOLVM_STATE_DIR"])
    token = "sk-ant-oat01-hbtuiTESTsubscription-0123456789abcdef"
    run_ok("secrets", "set", "claude-subscription", env=key_env, input=token + "\n")
    with ArgvWatch(token) as made:
        run_ok("new", "o1", "--credential", "claude-subscription", "-q", env=key_env)
        seen = run_ok(
            "exec", "o1", "--", "sh", "-c", "echo $CLAUDE_CODE_OAUTH_TOKEN", env=key_env
        ).strip()
        environs = guest_environs(key_env, "o1")
    assert made.samples > 20 and made.hits == []
    assert seen.startswith("SMOL_PLACEHOLDER_CLAUDE_SUBSCRIPTION_") and token not in seen
    assert seen in environs and token not in environs

    [binding] = machine_record(key_env, "o1")["credential_policy"]["credentials"]
    assert binding["name"] == "claude-subscription"
    assert binding["environment_variable"] == "CLAUDE_CODE_OAUTH_TOKEN"
    assert binding["allowed_hosts"] == ["api.anthropic.com"]
    assert binding.get("set_header") is None  # the placeholder is replaced where it is sent
    listed = json.loads(run_ok("credentials", "o1", "--json", env=key_env))
    assert listed["missing_secrets"] == [] and listed["plaintext"] == []
    assert files_holding(token, home, state) == []


def test_new_without_the_secret_makes_nothing(key_env):
    refused = hbtui("new", "k2", "--credential", "openai", env=key_env)
    assert refused.returncode != 0 and "no secret 'openai'" in refused.stderr
    assert "hbtui secrets set openai" in refused.stderr and "Traceback" not in refused.stderr
    assert json.loads(run_ok("ls", "--json", env=key_env)) == []
    bad = hbtui("new", "k2", "--credential", "nosuch", env=key_env)
    assert bad.returncode != 0 and "no credential preset 'nosuch'" in bad.stderr
    loose = hbtui("new", "k2", "--allow", "pypi.org", env=key_env)
    assert loose.returncode != 0 and "--allow needs --egress allow-list" in loose.stderr
    shape = hbtui("new", "k2", "--egress", "allow-list", "--allow", "https://x", env=key_env)
    assert shape.returncode != 0 and "--allow 'https://x'" in shape.stderr


def test_an_allow_list_includes_its_credentials_hosts(key_env):
    run_ok("secrets", "set", "openai", env=key_env, input="sk-proj-test\n")
    run_ok(
        "new",
        "k3",
        "--egress",
        "allow-list",
        "--allow",
        "pypi.org",
        "--credential",
        "openai",
        "-q",
        env=key_env,
    )
    egress = json.loads(run_ok("egress", "k3", "--json", env=key_env))
    assert egress["egress"] == "allow-list" and egress["allow"] == ["pypi.org", "api.openai.com"]
    record = machine_record(key_env, "k3")
    assert record["dns_filter_hosts"] == ["=pypi.org", "=api.openai.com"]
    assert "block_private" not in record or record["block_private"] is None


def test_a_custom_preset_from_the_config(key_env):
    config = Path(key_env["HBTUI_HOME"]) / "config.toml"
    config.write_text(
        '[credentials.mytool]\nenv_var = "MYTOOL_TOKEN"\nhosts = "api.mytool.dev"\n'
        'header = "authorization"\n'
    )
    run_ok("secrets", "set", "mytool", env=key_env, input="tok-123\n")
    run_ok("new", "k4", "--credential", "mytool", "-q", env=key_env)
    seen = run_ok("exec", "k4", "--", "sh", "-c", "echo $MYTOOL_TOKEN", env=key_env).strip()
    assert seen.startswith("SMOL_PLACEHOLDER_MYTOOL_")
    [binding] = machine_record(key_env, "k4")["credential_policy"]["credentials"]
    assert binding["set_header"] == "authorization"
    config.write_text('[credentials.Bad]\nenv_var = "1X"\nhosts = "x"\n')
    broken = hbtui("ls", env=key_env)
    assert broken.returncode != 0 and "credentials.Bad" in broken.stderr


def test_credentials_add_and_rm_keep_the_box_and_its_data(key_env):
    run_ok("secrets", "set", "github", env=key_env, input=GH + "\n")
    run_ok("new", "c1", "-q", env=key_env)
    run_ok("exec", "c1", "--", "sh", "-c", "echo mine > ~/workspace/note", env=key_env)
    with ArgvWatch(GH) as watch:
        out = run_ok("credentials", "c1", "add", "github", env=key_env)
    assert watch.hits == []
    assert "github: GH_TOKEN for api.github.com, github.com (managed)" in out
    assert (
        run_ok("exec", "c1", "--", "cat", "/data/home/agent/workspace/note", env=key_env)
        == "mine\n"
    )
    seen = run_ok("exec", "c1", "--", "sh", "-c", "echo $GH_TOKEN", env=key_env).strip()
    assert seen.startswith("SMOL_PLACEHOLDER_GITHUB_")
    [box] = json.loads(run_ok("ls", "--json", env=key_env))
    assert box["state"] == "running" and box["credentials"] == ["github"] and answers(box["port"])
    # Its services came back because hbtui resumed them, not because the quiesce taken
    # before the stop (on the disk it was made from) lapsed 45 s later.
    assert "lease ran out" not in as_root(key_env, "c1", "cat /data/logs/workload.log")

    missing = hbtui("credentials", "c1", "add", "anthropic", env=key_env)
    assert missing.returncode != 0 and "no secret 'anthropic'" in missing.stderr
    not_there = hbtui("credentials", "c1", "rm", "openai", env=key_env)
    assert not_there.returncode != 0 and "has no credential 'openai'" in not_there.stderr

    run_ok("credentials", "c1", "rm", "github", env=key_env)
    assert run_ok("exec", "c1", "--", "sh", "-c", "echo ${GH_TOKEN:-none}", env=key_env) == "none\n"
    assert (
        run_ok("exec", "c1", "--", "cat", "/data/home/agent/workspace/note", env=key_env)
        == "mine\n"
    )
    assert json.loads(run_ok("ls", "--json", env=key_env))[0]["credentials"] == []


def test_a_stopped_box_stays_stopped_through_credentials_add_and_rm(key_env):
    """`credentials add` on a stopped box left it `created`: a machine made from a pack and
    never started, which the engine cannot pack again (the next change failed)."""
    run_ok("secrets", "set", "github", env=key_env, input=GH + "\n")
    run_ok("new", "s1", "-q", env=key_env)
    run_ok("stop", "s1", env=key_env)
    for change in ("add", "rm"):
        run_ok("credentials", "s1", change, "github", env=key_env)
        [box] = json.loads(run_ok("ls", "--json", env=key_env))
        assert box["state"] == "stopped", box
        assert "stopped" in run_ok("ls", env=key_env).splitlines()[1]
        assert "not running (stopped)" in hbtui("stop", "s1", env=key_env).stdout
    run_ok("start", "s1", env=key_env)
    [box] = json.loads(run_ok("ls", "--json", env=key_env))
    assert box["state"] == "running" and answers(box["port"]), box


def test_a_plaintext_copy_of_a_managed_key_is_reported(key_env):
    run_ok("secrets", "set", "anthropic", env=key_env, input=KEY + "\n")
    run_ok("new", "p1", "--credential", "anthropic", "-q", env=key_env)
    clean = hbtui("credentials", "p1", env=key_env)
    assert clean.returncode == 0 and "warning" not in clean.stderr
    run_ok(
        "exec",
        "p1",
        "--",
        "sh",
        "-c",
        "echo 'export ANTHROPIC_API_KEY=sk-ant-pasted' >> ~/.bashrc; "
        "mkdir -p ~/.config/gh && echo 'oauth_token: x' > ~/.config/gh/hosts.yml",
        env=key_env,
    )
    report = hbtui("credentials", "p1", env=key_env)
    assert "/data/home/agent/.bashrc sets ANTHROPIC_API_KEY to a real value" in report.stderr
    assert "/data/home/agent/.config/gh/hosts.yml holds a login of its own" in report.stderr
    assert "sk-ant-pasted" not in report.stdout + report.stderr
    data = json.loads(run_ok("credentials", "p1", "--json", env=key_env))
    assert len(data["plaintext"]) == 2 and data["missing_secrets"] == []


def test_a_forgotten_secret_is_shown_and_stops_the_next_start(key_env):
    run_ok("secrets", "set", "anthropic", env=key_env, input=KEY + "\n")
    run_ok("new", "f1", "--credential", "anthropic", "-q", env=key_env)
    assert json.loads(run_ok("ls", "--json", env=key_env))[0]["keys_missing"] == []
    forgot = hbtui("secrets", "rm", "anthropic", env=key_env)
    assert forgot.returncode == 0 and "f1 uses it and will not start" in forgot.stderr
    assert json.loads(run_ok("ls", "--json", env=key_env))[0]["keys_missing"] == ["anthropic"]
    run_ok("stop", "f1", env=key_env)
    refused = hbtui("start", "f1", env=key_env)
    assert refused.returncode != 0 and "no secret 'anthropic'" in refused.stderr
    assert json.loads(run_ok("ls", "--json", env=key_env))[0]["state"] == "stopped"
    run_ok("secrets", "set", "anthropic", env=key_env, input=KEY + "\n")
    run_ok("start", "f1", env=key_env)
