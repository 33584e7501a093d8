"""Adversarial checks of bases, branches and keys against the simulator:
interruptions at each phase, damaged state and bad input must leave no half-made box,
lose no box and print one line, never a traceback."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hbtui.core.foundation.specs import NewSpec
from hbtui.core.keys import passphrase
from hbtui.errors import HbtuiError
from hbtui.events import Phase

from support import HBTUI_BIN, SIM_RECIPE
from support.cli import in_box, machines

pytestmark = pytest.mark.sim


@pytest.fixture
def keys_service(sim_env, monkeypatch, tmp_path):
    """The Service over the simulator with a secrets passphrase and a copy of the recipe."""
    recipe = tmp_path / "recipe"
    shutil.copytree(SIM_RECIPE, recipe, symlinks=False)
    monkeypatch.setenv("HBTUI_RECIPE", str(recipe))
    monkeypatch.setenv("HBTUI_SECRETS_PASSPHRASE", "adversarial")
    passphrase._forget()
    from hbtui.wiring import build_service

    yield build_service()
    passphrase._forget()


async def _cancel_at(coro, phase: str, delay: float, events: list[object]) -> None:
    """Run `coro`, cancel it `delay` seconds after it reports a phase starting with `phase`."""
    task = asyncio.ensure_future(coro)
    while not any(isinstance(e, Phase) and e.message.startswith(phase) for e in events):
        if task.done():
            break
        await asyncio.sleep(0.005)
    await asyncio.sleep(delay)
    task.cancel()
    if phase.startswith("making"):
        # Once the box is being made again the change runs to its end (a made change is
        # not "interrupted"); whichever side of that line the cancel lands on, the
        # checks below hold.
        with contextlib.suppress(asyncio.CancelledError, HbtuiError):
            await task
        return
    with pytest.raises((asyncio.CancelledError, HbtuiError)):
        await task


@pytest.mark.parametrize(
    ("phase", "delay"),
    [
        ("stopping c1", 0.0),
        ("packing c1", 0.05),
        ("making c1 again", 0.0),
        ("making c1 again", 0.04),
        ("making c1 again", 0.12),
        ("making c1 again", 0.3),
    ],
)
async def test_a_cancelled_credentials_change_never_loses_the_box(
    keys_service, sim_env, phase, delay
):
    service = keys_service
    service.secrets.set("github", "ghp_adversarialTOKEN")
    await service.new(NewSpec("c1"))
    in_box("c1", "sh", "-c", "echo kept > /data/home/agent/workspace/note", env=sim_env)
    events: list[object] = []
    await _cancel_at(
        service.bases.change_credentials("c1", add=["github"], report=events.append),
        phase,
        delay,
        events,
    )
    view = await service.boxes.get("c1")
    assert machines(sim_env) == ["c1"], events
    # The registry says what the machine was made with, and it runs again as it did.
    bound = json.loads(
        (
            Path(sim_env["HBTUI_SMOLVM_STATE_DIR"]) / "smolsim" / "machines" / "c1" / "machine.json"
        ).read_text()
    )
    has_github = "github" in json.dumps(bound.get("credential_policy", {}))
    assert view.credentials == (("github",) if has_github else ())
    assert view.state == "running"
    assert in_box("c1", "cat", "/data/home/agent/workspace/note", env=sim_env) == "kept"


async def test_base_rm_never_deletes_a_folder_a_damaged_manifest_names(keys_service, tmp_path):
    service = keys_service
    base = await service.bases.build()
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "work").write_text("mine")
    manifest = Path(service.bases.listing()[0].pack).parents[1] / f"{base.id}.json"
    raw = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**raw, "pack": str(precious / "base.smolmachine")}))
    with pytest.raises(HbtuiError, match="outside") as caught:
        await service.bases.remove(base.id)
    assert (precious / "work").read_text() == "mine"
    assert str(manifest) in (caught.value.hint or "")
    # A rebuild replaces that manifest without deleting the folder it named either.
    await service.bases.build()
    assert (precious / "work").read_text() == "mine"
    assert Path(service.bases.listing()[0].pack).is_file()


def secrets_cli(*args: str, env: dict[str, str], stdin: bytes = b"") -> tuple[int, str, str]:
    done = subprocess.run(
        [HBTUI_BIN, "secrets", *args], env=env, input=stdin, capture_output=True, timeout=60
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def one_line_error(code: int, err: str, *words: str) -> None:
    assert code != 0 and "Traceback" not in err, err
    assert err.startswith("error: ") and all(w in err for w in words), err


@pytest.mark.parametrize("locale", ["C.UTF-8", "en_US.UTF-8"])
def test_a_secret_value_that_is_not_utf8_is_one_line_and_not_stored(sim_env, locale):
    env = {**sim_env, "HBTUI_SECRETS_PASSPHRASE": "x", "LC_ALL": locale}
    one_line_error(*secrets_cli("set", "openai", env=env, stdin=b"sk-\xff\xfe\n")[::2], "UTF-8")
    assert "No secrets yet" in secrets_cli("ls", env=env)[1]
    # A value with spaces inside is kept as typed (only the ends are trimmed).
    assert secrets_cli("set", "openai", env=env, stdin=b" sk a b \n")[0] == 0
    one_line_error(*secrets_cli("set", "openai", env=env, stdin=b"one\ntwo\n")[::2], "one line")


def test_damaged_secret_files_are_one_line_naming_the_file(sim_env):
    env = {**sim_env, "HBTUI_SECRETS_PASSPHRASE": "right"}
    assert secrets_cli("set", "github", env=env, stdin=b"ghp_damagedTEST\n")[0] == 0
    home = Path(sim_env["HBTUI_HOME"])
    store, index = home / "secrets.hbx", home / "secrets.json"
    code, _, err = secrets_cli(
        "set", "openai", env={**env, "HBTUI_SECRETS_PASSPHRASE": "wrong"}, stdin=b"sk-x\n"
    )
    one_line_error(code, err, str(store), "HBTUI_SECRETS_PASSPHRASE")
    good = store.read_bytes()
    for damaged in (good[:100], b""):
        store.write_bytes(damaged)
        code, _, err = secrets_cli("set", "openai", env=env, stdin=b"sk-x\n")
        one_line_error(code, err, str(store))
        assert store.read_bytes() == damaged  # never overwritten
    store.write_bytes(good)
    for broken in ("[1, 2]", "{", "7"):
        index.write_text(broken)
        one_line_error(*secrets_cli("ls", env=env)[::2], str(index))


@pytest.mark.parametrize("delay", [0.0, 0.1])
async def test_a_branch_cancelled_while_its_source_starts_again_leaves_it_running(
    keys_service, sim_env, delay
):
    service = keys_service
    await service.new(NewSpec("src"))
    events: list[object] = []
    task = asyncio.ensure_future(service.branch("src", "kid", report=events.append))
    while not any(isinstance(e, Phase) and e.message == "starting src again" for e in events):
        assert not task.done()
        await asyncio.sleep(0.005)
    await asyncio.sleep(delay)
    task.cancel()
    # The branch was made before: the cancel only waits for the source to run again, and
    # the branch is reported made, not "interrupted".
    assert (await task).name == "kid"
    assert (await service.boxes.get("src")).state == "running"
    assert sorted(b.name for b in (await service.boxes.listing()).boxes) == machines(sim_env)


@pytest.mark.parametrize("delay", [0.0, 0.05])
async def test_a_base_build_cancelled_while_its_builder_is_removed_leaves_no_builder(
    keys_service, sim_env, delay
):
    service = keys_service
    first = await service.bases.build()
    (Path(first.pack).parent / "marker").write_text("older")  # the next build is a new folder
    events: list[object] = []
    await _cancel_at(
        service.bases.build(report=events.append), "deleting machine base-", delay, events
    )
    assert machines(sim_env) == [] and (await service.boxes.listing()).boxes == []
    # The new base replaced the older one: its folder alone is left, not both.
    [base] = service.bases.listing()
    folders = [p for p in Path(base.pack).parents[1].iterdir() if p.is_dir()]
    assert folders == [Path(base.pack).parent], folders


def test_two_base_builds_at_once_do_not_share_a_folder(sim_env, tmp_path):
    """One interrupted while packing must not take the other's pack with it."""
    import signal
    import time

    recipe = tmp_path / "recipe"
    shutil.copytree(SIM_RECIPE, recipe, symlinks=False)
    env = {**sim_env, "HBTUI_RECIPE": str(recipe)}
    builds = [
        subprocess.Popen(
            [HBTUI_BIN, "base", "build"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        for _ in range(2)
    ]
    first, second = builds
    assert first.stdout is not None
    for line in first.stdout:
        if b"packing the builder" in line:
            time.sleep(0.05)
            first.send_signal(signal.SIGINT)
            break
    first.communicate(timeout=120)
    second.communicate(timeout=120)
    assert second.returncode == 0
    verified = subprocess.run(
        [HBTUI_BIN, "base", "verify"], env=env, capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert machines(sim_env) == []


async def test_a_branch_refused_for_its_name_or_port_never_stops_its_source(keys_service):
    service = keys_service
    await service.new(NewSpec("src"))
    other = await service.new(NewSpec("other"))
    for name, port, words in (
        ("other", None, "already exists"),
        ("kid", other.port, "already used"),
        ("kid", 80, "outside the range"),
    ):
        events: list[object] = []
        with pytest.raises(HbtuiError, match=words):
            await service.branch("src", name, port=port, report=events.append)
        assert not any(isinstance(e, Phase) and "stopping" in e.message for e in events)
    assert (await service.boxes.get("src")).state == "running"
