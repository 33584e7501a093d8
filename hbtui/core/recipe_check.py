"""`hbtui recipe check`: each pin of a recipe's provision/versions.env beside the newest
release its registry offers (npm for the node tools, PyPI for the Python ones).

It reads the file and asks the registries; it changes nothing. A registry's answer is
untrusted: capped in size and time, parsed as JSON, and only a version-shaped string is
taken from it. Bumping is editing versions.env; the recipe's content hash then changes,
so a base built from the old pins is reported stale until `hbtui base build` runs again.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import re
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from packaging.version import InvalidVersion, Version

from hbtui import __version__
from hbtui.errors import UsageError
from hbtui.schema import plain

T = TypeVar("T")

NPM_DEFAULT = "https://registry.npmjs.org"
PYPI_DEFAULT = "https://pypi.org"
TIMEOUT = 10.0  # seconds for one registry lookup, from connect to the last byte
# uv's PyPI JSON (every release's files) is ~5 MB and grows; a bigger answer is refused.
MAX_BODY = 8 * 2**20
MAX_FILE = 2**20  # versions.env is a few hundred bytes

VERSIONS_FILE = "provision/versions.env"
_PIN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=([A-Za-z0-9][A-Za-z0-9._+~-]*)")
_VERSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}")


class Source(NamedTuple):
    registry: str  # "npm" or "pypi"
    package: str


# What each pin of the shipped recipe installs, and from where.
SOURCES: dict[str, Source] = {
    "CLAUDE_CODE_VERSION": Source("npm", "@anthropic-ai/claude-code"),
    "CODEX_VERSION": Source("npm", "@openai/codex"),
    "EXECUTOR_VERSION": Source("npm", "executor"),
    "HERMES_AGENT_VERSION": Source("pypi", "hermes-agent"),
    "UV_VERSION": Source("pypi", "uv"),
}
# Pins with no registry to compare against, and why.
UNCHECKED: dict[str, str] = {
    # The npm `node` package follows the newest Current release, not a maintained LTS line
    # like NodeSource's node_N.x, so comparing with it would not say what to pin.
    "NODE_MAJOR": "not checked: a NodeSource apt line (node_N.x), not a registry package",
    "HERMES_PYTHON_VERSION": "not checked: the Python line uv fetches, not a package release",
}
UNKNOWN_PIN = "not checked: hbtui knows no registry for this pin"

CURRENT, OUTDATED, DIFFERS, NOT_CHECKED, FAILED = (
    "current",
    "outdated",
    "differs",
    "not-checked",
    "failed",
)


@dataclass(frozen=True)
class Pin:
    key: str
    value: str
    line: int


@dataclass(frozen=True)
class Registries:
    """Where the lookups go: the public registries unless the environment names others."""

    npm: str = NPM_DEFAULT
    pypi: str = PYPI_DEFAULT

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Registries:
        """HBTUI_NPM_REGISTRY (else npm's own npm_config_registry) and HBTUI_PYPI_URL.

        PIP_INDEX_URL is not used: it names a simple index, and where a mirror keeps
        the JSON API (`/pypi/NAME/json`) cannot be told from it.
        """
        npm_var = next(
            (
                v
                for v in ("HBTUI_NPM_REGISTRY", "npm_config_registry", "NPM_CONFIG_REGISTRY")
                if env.get(v)
            ),
            "",
        )
        pypi_var = "HBTUI_PYPI_URL" if env.get("HBTUI_PYPI_URL") else ""
        npm = env[npm_var] if npm_var else NPM_DEFAULT
        pypi = env[pypi_var] if pypi_var else PYPI_DEFAULT
        for var, url in ((npm_var, npm), (pypi_var, pypi)):
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise UsageError(f"{var} must be an http(s) URL, got {plain(url[:80])!r}")
            if parts.username is not None:  # it would be printed: never show a password
                raise UsageError(f"{var} must not carry a user or password: hbtui asks anonymously")
        return cls(npm.rstrip("/"), pypi.rstrip("/"))

    def url(self, source: Source) -> str:
        if source.registry == "npm":
            return f"{self.npm}/{urllib.parse.quote(source.package, safe='@')}"
        return f"{self.pypi}/pypi/{urllib.parse.quote(source.package, safe='')}/json"


@dataclass(frozen=True)
class PinCheck:
    """One pin beside the newest release of its package (`latest`, "" when unknown)."""

    key: str
    pinned: str
    registry: str = ""  # "npm", "pypi", or "" for a pin that is not checked
    package: str = ""
    latest: str = ""
    note: str = ""  # why it is not checked, or what went wrong asking

    @property
    def status(self) -> str:
        if not self.registry:
            return NOT_CHECKED
        if not self.latest:
            return FAILED
        if self.latest == self.pinned:
            return CURRENT
        try:
            older = Version(self.pinned) < Version(self.latest)
        except InvalidVersion:  # a tag or a name, not a release: only different
            older = False
        return OUTDATED if older else DIFFERS

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "pinned": self.pinned,
            "registry": self.registry or None,
            "package": self.package or None,
            "latest": self.latest or None,
            "status": self.status,
            "note": self.note or None,
        }


@dataclass(frozen=True)
class RecipeCheck:
    recipe: Path
    registries: Registries
    pins: tuple[PinCheck, ...]

    @property
    def versions_file(self) -> Path:
        return self.recipe / VERSIONS_FILE

    @property
    def checked(self) -> int:
        """How many pins a registry answered for."""
        return sum(1 for p in self.pins if p.latest)

    @property
    def outdated(self) -> list[PinCheck]:
        return [p for p in self.pins if p.status == OUTDATED]

    def how_to_bump(self) -> str:
        return (
            f"to bump: edit {self.versions_file}, then run `hbtui base build` (a base built "
            "from other pins is stale until then); `hbtui repair NAME` runs the recipe "
            "again in a box made before"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "recipe": str(self.recipe),
            "versions_file": str(self.versions_file),
            "registries": {"npm": self.registries.npm, "pypi": self.registries.pypi},
            "pins": [p.to_json() for p in self.pins],
            "checked": self.checked,
            "outdated": [p.key for p in self.outdated],
            "how_to_bump": self.how_to_bump(),
        }


def read_pins(recipe: Path) -> list[Pin]:
    """The pins of `recipe`: every line of versions.env a comment, blank, or KEY=VALUE."""
    path = recipe / VERSIONS_FILE
    if not path.is_file():
        raise UsageError(f"the recipe {recipe} has no {VERSIONS_FILE}")
    data = path.read_bytes()
    if len(data) > MAX_FILE:
        raise UsageError(f"{path} is {len(data)} bytes: not a list of pins")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None
    pins: dict[str, Pin] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _PIN.fullmatch(line)
        if m is None:
            shown = plain(line if len(line) <= 60 else line[:60] + "...")
            raise UsageError(f"{path} line {number} is not KEY=VALUE (a version): {shown}")
        key, value = m.group(1), m.group(2)
        if key in pins:
            raise UsageError(
                f"{path} line {number} sets {key} again (first on line {pins[key].line})"
            )
        pins[key] = Pin(key, value, number)
    if not pins:
        raise UsageError(f"{path} pins nothing (no KEY=VALUE line)")
    return list(pins.values())


class Unusable(Exception):
    """A registry's answer that says nothing usable, in one line."""


def _fetch(url: str, timeout: float, limit: int) -> object:
    """GET `url` as JSON, refusing a body over `limit` bytes (runs in a thread)."""
    request = urllib.request.Request(
        url,
        headers={
            # npm's abbreviated document still carries dist-tags and is far smaller.
            "Accept": "application/vnd.npm.install-v1+json; q=1.0, application/json; q=0.8",
            "User-Agent": f"hbtui/{__version__}",
        },
    )
    too_big = f"answered with more than {limit // 2**20} MiB"
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > limit:
                raise Unusable(too_big)
            body = bytearray()
            while chunk := response.read1(65536):
                body += chunk
                if len(body) > limit:
                    raise Unusable(too_big)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise Unusable("has no such package (HTTP 404)") from None
        raise Unusable(f"answered HTTP {exc.code}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        why = reason.strerror if isinstance(reason, OSError) and reason.strerror else reason
        raise Unusable(f"cannot be reached: {why}") from None
    except TimeoutError:
        raise Unusable(f"did not answer within {timeout:g} s") from None
    except http.client.HTTPException as exc:
        raise Unusable(f"answered with something that is not HTTP ({type(exc).__name__})") from None
    except OSError as exc:
        raise Unusable(f"cannot be reached: {exc.strerror or exc}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise Unusable("answered with something that is not JSON") from None


def _latest(source: Source, document: object) -> str:
    """The newest release a registry's JSON document names."""
    if source.registry == "npm":
        field = "dist-tags.latest"
        holder = document.get("dist-tags") if isinstance(document, dict) else None
        found = holder.get("latest") if isinstance(holder, dict) else None
    else:
        field = "info.version"
        holder = document.get("info") if isinstance(document, dict) else None
        found = holder.get("version") if isinstance(holder, dict) else None
    if not isinstance(found, str):
        raise Unusable(f"answered without {field}")
    if not _VERSION.fullmatch(found):
        raise Unusable(f"answered with a {field} that is not a version")
    return found


async def _in_thread(work: Callable[[], T]) -> T:
    """`work()` in a daemon thread: a lookup abandoned at its timeout or by Ctrl-C must not
    hold up hbtui's exit the way asyncio's default executor would."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        try:
            result, error = work(), None
        except BaseException as exc:  # handed to the awaiting task
            result, error = None, exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody is waiting
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name="hbtui-registry", daemon=True).start()
    return await future


async def _check_pin(pin: Pin, registries: Registries, timeout: float, limit: int) -> PinCheck:
    source = SOURCES.get(pin.key)
    if source is None:
        return PinCheck(pin.key, pin.value, note=UNCHECKED.get(pin.key, UNKNOWN_PIN))
    url = registries.url(source)
    where = registries.npm if source.registry == "npm" else registries.pypi
    try:
        async with asyncio.timeout(timeout):
            document = await _in_thread(lambda: _fetch(url, timeout, limit))
        latest = _latest(source, document)
    except TimeoutError:
        note = f"{where} did not answer within {timeout:g} s"
    except Unusable as exc:
        note = plain(f"{where} {exc}")[:200]
    else:
        return PinCheck(pin.key, pin.value, source.registry, source.package, latest)
    return PinCheck(pin.key, pin.value, source.registry, source.package, note=note)


async def check(
    recipe: Path,
    registries: Registries,
    *,
    timeout: float = TIMEOUT,
    limit: int = MAX_BODY,
) -> RecipeCheck:
    """Every pin of `recipe` beside its newest release; the lookups run at once."""
    pins = read_pins(recipe)
    results = await asyncio.gather(*(_check_pin(p, registries, timeout, limit) for p in pins))
    return RecipeCheck(recipe, registries, tuple(results))
