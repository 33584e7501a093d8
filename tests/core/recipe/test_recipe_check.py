"""`hbtui recipe check`: pins beside the newest releases, asked of a fake registry on
127.0.0.1 (npm's `/<pkg>` with dist-tags.latest, PyPI's `/pypi/<pkg>/json` with
info.version); never the internet. Bad input and bad answers each get one clear line."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from hbtui.core import recipe_check as rc
from hbtui.core.foundation.basebook import Base, BaseBook
from hbtui.core.foundation.recipe import recipe_version
from hbtui.errors import UsageError

from support import HBTUI_BIN, ROOT

PINS = """\
# a comment, then the pins
NODE_MAJOR=22
CLAUDE_CODE_VERSION=2.1.300
CODEX_VERSION=0.171.0

EXECUTOR_VERSION=1.5.10
HERMES_AGENT_VERSION=0.19.0
UV_VERSION=0.9.2
MY_TOOL=1.0
"""

LATEST = {
    "/@anthropic-ai%2Fclaude-code": {"dist-tags": {"latest": "2.1.332"}},
    "/@openai%2Fcodex": {"dist-tags": {"latest": "0.171.0"}},
    "/executor": {"dist-tags": {"latest": "1.5.9"}},
    "/pypi/hermes-agent/json": {"info": {"version": "0.19.0"}},
    "/pypi/uv/json": {"info": {"version": "0.13.9"}},
}

Answer = Callable[[BaseHTTPRequestHandler], None]


class FakeRegistry:
    """npm and PyPI in one HTTP server; `answers` maps a path to how it is answered."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {p: json_answer(d) for p, d in LATEST.items()}
        self.asked: list[str] = []
        self.release = threading.Event()  # lets a hanging answer go at teardown
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.asked.append(self.path)
                answer = fake.answers.get(self.path)
                if answer is None:
                    self.send_error(404)
                else:
                    answer(self)

            def log_message(self, *args: object) -> None:
                pass

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that stopped reading a 10 MB answer, as it should

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # Its shutdown waits for the loop to look (every 0.5 s by default: half a second
        # a test).
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def registries(self) -> rc.Registries:
        return rc.Registries(npm=self.url, pypi=self.url)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def json_answer(document: object) -> Answer:
    return body_answer(json.dumps(document).encode())


def body_answer(body: bytes, *, length: bool = True) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if length:
            h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return answer


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    fake = FakeRegistry()
    yield fake
    fake.close()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy from the environment must not stand between the test and its registry."""
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


def make_recipe(tmp_path: Path, pins: str = PINS, name: str = "recipe") -> Path:
    recipe = tmp_path / name
    (recipe / "provision").mkdir(parents=True)
    (recipe / "guest").mkdir()
    (recipe / "provision" / "provision.sh").write_text("#!/bin/bash\n")
    (recipe / "provision" / "versions.env").write_text(pins)
    return recipe


def check(recipe: Path, registries: rc.Registries, **kw: float) -> rc.RecipeCheck:
    return asyncio.run(rc.check(recipe, registries, **kw))


def by_key(report: rc.RecipeCheck) -> dict[str, rc.PinCheck]:
    return {p.key: p for p in report.pins}


# ---- the core --------------------------------------------------------------------------


def test_each_pin_beside_the_newest_release(tmp_path, registry):
    report = check(make_recipe(tmp_path), registry.registries)
    pins = by_key(report)
    assert [p.key for p in report.pins] == [
        "NODE_MAJOR",
        "CLAUDE_CODE_VERSION",
        "CODEX_VERSION",
        "EXECUTOR_VERSION",
        "HERMES_AGENT_VERSION",
        "UV_VERSION",
        "MY_TOOL",
    ]
    claude = pins["CLAUDE_CODE_VERSION"]
    assert (claude.registry, claude.package, claude.pinned, claude.latest) == (
        "npm",
        "@anthropic-ai/claude-code",
        "2.1.300",
        "2.1.332",
    )
    assert claude.status == "outdated"
    assert pins["CODEX_VERSION"].status == "current"
    assert pins["EXECUTOR_VERSION"].status == "differs"  # pinned newer than the registry's
    assert pins["HERMES_AGENT_VERSION"].status == "current"
    assert (pins["UV_VERSION"].latest, pins["UV_VERSION"].status) == ("0.13.9", "outdated")
    assert pins["NODE_MAJOR"].status == "not-checked"
    assert "NodeSource" in pins["NODE_MAJOR"].note
    assert pins["MY_TOOL"].status == "not-checked" and "no registry" in pins["MY_TOOL"].note
    assert report.checked == 5
    assert [p.key for p in report.outdated] == ["CLAUDE_CODE_VERSION", "UV_VERSION"]
    assert "hbtui base build" in report.how_to_bump()
    assert sorted(registry.asked) == sorted(LATEST)


def test_versions_compare_as_numbers():
    assert rc.PinCheck("K", "1.5.9", "npm", "p", "1.5.10").status == "outdated"
    assert rc.PinCheck("K", "1.10.0", "npm", "p", "1.9.0").status == "differs"
    assert rc.PinCheck("K", "2.0.0-beta.1", "npm", "p", "1.9.0").status == "differs"


def test_a_pre_release_is_older_than_its_release():
    assert rc.PinCheck("K", "2.0.0-rc.1", "npm", "p", "2.0.0").status == "outdated"
    assert rc.PinCheck("K", "0.9.0", "pypi", "p", "1.0.0rc1").status == "outdated"
    assert rc.PinCheck("K", "latest", "npm", "p", "1.0.0").status == "differs"  # no release


def test_the_lookups_run_at_once(tmp_path, registry):
    """Every answer waits until all five lookups have arrived: asked one after another,
    the first would wait in vain and fail."""
    arrived = threading.Barrier(len(LATEST), timeout=20)
    for path, document in LATEST.items():
        plain_answer = json_answer(document)

        def together(h: BaseHTTPRequestHandler, plain_answer: Answer = plain_answer) -> None:
            try:
                arrived.wait()
            except threading.BrokenBarrierError:
                h.send_error(503)
                return
            plain_answer(h)

        registry.answers[path] = together
    report = check(make_recipe(tmp_path), registry.registries, timeout=30)
    assert report.checked == 5, [p.note for p in report.pins]


def test_a_registry_that_cannot_be_reached_is_one_line_in_its_rows(tmp_path, registry):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    report = check(make_recipe(tmp_path), rc.Registries(npm=closed, pypi=registry.url))
    pins = by_key(report)
    for key in ("CLAUDE_CODE_VERSION", "CODEX_VERSION", "EXECUTOR_VERSION"):
        assert pins[key].status == "failed"
        assert pins[key].note == f"{closed} cannot be reached: Connection refused"
    assert pins["UV_VERSION"].latest == "0.13.9"
    assert report.checked == 2


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        (body_answer(b"<html>Service Unavailable</html>"), "something that is not JSON"),
        (json_answer({"name": "uv"}), "without info.version"),
        (json_answer({"info": {"version": 3}}), "without info.version"),
        (json_answer({"info": {"version": "1.0\x1b]0;owned\x07"}}), "not a version"),
        (json_answer({"info": {"version": "1" * 65}}), "not a version"),
        (json_answer([1, 2]), "without info.version"),
        (body_answer(b" " * 10_000_000), "more than 8 MiB"),
        (body_answer(b" " * 10_000_000, length=False), "more than 8 MiB"),
        (lambda h: h.send_error(500), "answered HTTP 500"),
        (lambda h: h.send_error(404), "has no such package (HTTP 404)"),
        (lambda h: h.wfile.write(b"garbage, not HTTP\r\n\r\n"), "not HTTP"),
    ],
    ids=[
        "not-json",
        "no-field",
        "not-a-string",
        "escapes",
        "too-long",
        "a-list",
        "10MB",
        "10MB-streamed",
        "500",
        "404",
        "not-http",
    ],
)
def test_a_bad_answer_is_one_line(tmp_path, registry, answer, why):
    registry.answers["/pypi/uv/json"] = answer
    pins = by_key(check(make_recipe(tmp_path), registry.registries))
    uv = pins["UV_VERSION"]
    assert (uv.status, uv.latest) == ("failed", "")
    assert uv.note.startswith(f"{registry.url} ") and why in uv.note, uv.note
    assert uv.note.isprintable() and len(uv.note) <= 200
    assert pins["HERMES_AGENT_VERSION"].latest == "0.19.0"  # the others still answer


def test_a_registry_that_never_answers_is_given_up_on(tmp_path, registry):
    registry.answers["/pypi/uv/json"] = lambda h: registry.release.wait(60)
    started = time.monotonic()
    pins = by_key(check(make_recipe(tmp_path), registry.registries, timeout=0.5))
    assert time.monotonic() - started < 30
    assert pins["UV_VERSION"].note == f"{registry.url} did not answer within 0.5 s"
    assert pins["HERMES_AGENT_VERSION"].latest == "0.19.0"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "CODEX_VERSION = 0.171.0\n",
            "line 1 is not KEY=VALUE (a version): CODEX_VERSION = 0.171.0",
        ),
        ("# ok\nexport UV_VERSION=0.9.2\n", "line 2 is not KEY=VALUE"),
        ("UV_VERSION=$(curl evil)\n", "line 1 is not KEY=VALUE"),
        ("UV_VERSION=\n", "line 1 is not KEY=VALUE"),
        ("just words\x1b[2J\n", "line 1 is not KEY=VALUE (a version): just words\\x1b[2J"),
        (
            "UV_VERSION=1\nNODE_MAJOR=22\nUV_VERSION=2\n",
            "line 3 sets UV_VERSION again (first on line 1)",
        ),
        ("# nothing\n\n", "pins nothing"),
    ],
)
def test_a_versions_file_that_is_not_pins_is_one_line(tmp_path, text, why):
    recipe = make_recipe(tmp_path, text)
    with pytest.raises(UsageError) as caught:
        rc.read_pins(recipe)
    assert why in caught.value.message and "\n" not in caught.value.message


def test_a_versions_file_that_is_not_text_is_one_line(tmp_path):
    recipe = make_recipe(tmp_path)
    (recipe / "provision" / "versions.env").write_bytes(b"UV_VERSION=\xff\xfe\n")
    with pytest.raises(UsageError, match="is not UTF-8 text"):
        rc.read_pins(recipe)
    (recipe / "provision" / "versions.env").write_bytes(b"#" * (2**20 + 1))
    with pytest.raises(UsageError, match="not a list of pins"):
        rc.read_pins(recipe)
    (recipe / "provision" / "versions.env").unlink()
    with pytest.raises(UsageError, match=r"has no provision/versions\.env"):
        rc.read_pins(recipe)


def test_the_registries_come_from_the_environment():
    assert rc.Registries.from_env({}) == rc.Registries(
        "https://registry.npmjs.org", "https://pypi.org"
    )
    mine = rc.Registries.from_env(
        {"HBTUI_NPM_REGISTRY": "http://npm.local:4873/", "HBTUI_PYPI_URL": "https://py.local"}
    )
    assert mine == rc.Registries("http://npm.local:4873", "https://py.local")
    assert mine.url(rc.SOURCES["CLAUDE_CODE_VERSION"]) == (
        "http://npm.local:4873/@anthropic-ai%2Fclaude-code"
    )
    assert mine.url(rc.SOURCES["UV_VERSION"]) == "https://py.local/pypi/uv/json"
    assert rc.Registries.from_env({"npm_config_registry": "https://n.example"}).npm == (
        "https://n.example"
    )
    with pytest.raises(UsageError, match=r"^HBTUI_PYPI_URL must be an http"):
        rc.Registries.from_env({"HBTUI_PYPI_URL": "file:///etc"})
    with pytest.raises(UsageError, match=r"^HBTUI_NPM_REGISTRY must be an http"):
        rc.Registries.from_env({"HBTUI_NPM_REGISTRY": "registry.npmjs.org"})
    with pytest.raises(UsageError, match=r"^npm_config_registry must not carry a user") as caught:
        rc.Registries.from_env({"npm_config_registry": "https://me:s3cret@npm.example"})
    assert "s3cret" not in caught.value.message


def test_every_pin_of_the_shipped_recipe_is_known():
    """Each pin the recipe installs from a registry is checked; the rest say why not."""
    keys = [p.key for p in rc.read_pins(ROOT)]
    assert set(keys) <= set(rc.SOURCES) | set(rc.UNCHECKED)
    assert set(rc.SOURCES) <= set(keys)


# ---- a changed pin makes a base stale --------------------------------------------------


def test_changing_a_pin_makes_the_base_stale(tmp_path):
    recipe = make_recipe(tmp_path)
    before = recipe_version(recipe)
    book = BaseBook(tmp_path / "bases")
    base = Base(
        id=f"ubuntu-24.04-{before}",
        host="local",
        image="ubuntu:24.04",
        recipe=before,
        recipe_dir=str(recipe),
        versions=(recipe / "provision" / "versions.env").read_text(),
        engine="1.0",
        pack=str(tmp_path / "pack.smolmachine"),
        size=1,
        sha256="0" * 64,
        created="2026-12-01T00:00:00Z",
    )
    book.put(base)
    assert book.plan("local", "ubuntu:24.04", recipe, before).base == base

    pins = recipe / "provision" / "versions.env"
    pins.write_text(pins.read_text().replace("UV_VERSION=0.9.2", "UV_VERSION=0.13.9"))
    after = recipe_version(recipe)
    assert after != before
    plan = book.plan("local", "ubuntu:24.04", recipe, after)
    assert plan.stale and plan.base is None
    assert "older version of the recipe" in plan.why and "hbtui base build" in plan.hint


# ---- the verb --------------------------------------------------------------------------


def hbtui(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HBTUI_BIN, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def cli_env(hbtui_home: Path, registry: FakeRegistry) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.pop("HBTUI_RECIPE", None)
    env.update(HBTUI_NPM_REGISTRY=registry.url, HBTUI_PYPI_URL=registry.url)
    return env


def test_the_verb_prints_each_pin_and_how_to_bump(tmp_path, cli_env):
    recipe = make_recipe(tmp_path)
    done = hbtui("recipe", "check", "--recipe", str(recipe), env=cli_env)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    rows = {line.split()[1]: line for line in done.stdout.splitlines() if line[:1] in "✓↑≠·✗"}
    assert "2.1.300" in rows["CLAUDE_CODE_VERSION"] and "2.1.332" in rows["CLAUDE_CODE_VERSION"]
    assert rows["CLAUDE_CODE_VERSION"].startswith("↑")
    assert rows["CODEX_VERSION"].startswith("✓")
    assert "not checked" in rows["NODE_MAJOR"]
    assert "2 pins behind the newest release: CLAUDE_CODE_VERSION, UV_VERSION" in done.stdout
    assert f"to bump: edit {recipe}/provision/versions.env, then run `hbtui base build`" in (
        done.stdout
    )
    assert (recipe / "provision" / "versions.env").read_text() == PINS  # changes nothing


def test_the_verb_uses_the_configured_recipe_and_prints_json(tmp_path, cli_env):
    recipe = make_recipe(tmp_path)
    done = hbtui("recipe", "check", "--json", env={**cli_env, "HBTUI_RECIPE": str(recipe)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["recipe"] == str(recipe)
    assert report["checked"] == 5 and report["outdated"] == ["CLAUDE_CODE_VERSION", "UV_VERSION"]
    uv = next(p for p in report["pins"] if p["key"] == "UV_VERSION")
    assert uv == {
        "key": "UV_VERSION",
        "pinned": "0.9.2",
        "registry": "pypi",
        "package": "uv",
        "latest": "0.13.9",
        "status": "outdated",
        "note": None,
    }


def test_the_verb_defaults_to_the_shipped_recipe(cli_env):
    done = hbtui("recipe", "check", "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["recipe"] == str(ROOT)
    assert {p["key"] for p in report["pins"]} >= set(rc.SOURCES)


def test_the_verb_fails_only_when_nothing_could_be_checked(tmp_path, cli_env, registry):
    recipe = make_recipe(tmp_path)
    registry.answers.clear()  # every package: 404
    done = hbtui("recipe", "check", "--recipe", str(recipe), env=cli_env)
    assert done.returncode == 1
    assert done.stderr.startswith("error: no pin could be checked") and done.stderr.count("\n") == 1
    assert "has no such package (HTTP 404)" in done.stdout

    registry.answers["/pypi/uv/json"] = json_answer({"info": {"version": "0.13.9"}})
    done = hbtui("recipe", "check", "--recipe", str(recipe), env=cli_env)
    assert done.returncode == 0 and done.stderr == ""


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda r: shutil.rmtree(r), "error: not a recipe: {r} has no provision/provision.sh"),
        (
            lambda r: (r / "provision" / "versions.env").write_text("UV_VERSION 0.9.2\n"),
            "error: {r}/provision/versions.env line 1 is not KEY=VALUE (a version): UV_VERSION 0.9.2",
        ),
        (
            lambda r: (r / "provision" / "versions.env").unlink(),
            "error: the recipe {r} has no provision/versions.env",
        ),
    ],
    ids=["unknown-folder", "not-key-value", "no-versions-file"],
)
def test_bad_input_to_the_verb_is_one_line(tmp_path, cli_env, registry, setup, message):
    recipe = make_recipe(tmp_path)
    setup(recipe)
    done = hbtui("recipe", "check", "--recipe", str(recipe), env=cli_env)
    assert done.returncode == 2
    assert done.stderr == message.format(r=recipe) + "\n"
    assert done.stdout == "" and registry.asked == []


def test_sigterm_ends_the_verb_while_a_registry_hangs(tmp_path, cli_env, registry):
    """The lookups run in daemon threads: hbtui exits at once, not after their timeout."""
    registry.answers["/pypi/uv/json"] = lambda h: registry.release.wait(60)
    recipe = make_recipe(tmp_path)
    proc = subprocess.Popen(
        [HBTUI_BIN, "recipe", "check", "--recipe", str(recipe)],
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while "/pypi/uv/json" not in registry.asked:
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=rc.TIMEOUT - 2)  # well before the lookup gives up
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM
    assert err == "error: SIGTERM: cancelled\n"


def test_a_bad_registry_url_is_one_line(tmp_path, cli_env):
    recipe = make_recipe(tmp_path)
    done = hbtui(
        "recipe", "check", "--recipe", str(recipe), env={**cli_env, "HBTUI_NPM_REGISTRY": "x"}
    )
    assert done.returncode == 2
    assert done.stderr == "error: HBTUI_NPM_REGISTRY must be an http(s) URL, got 'x'\n"
