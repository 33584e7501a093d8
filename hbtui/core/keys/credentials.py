"""Credentials a box may use without holding them, and what its network may reach.

A box's credential is an engine binding (`--credential`): the guest sees a
placeholder in the tool's variable, and the engine, on the host, swaps in the
real value only on HTTPS requests to the preset's hosts. The values live in
the secret store (`hbtui.core.keys.secrets`) and reach the engine only in the
environment of the `start` that needs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hbtui.config import Config, split_list
from hbtui.core.foundation.registry import BoxRecord
from hbtui.errors import UsageError

OPEN = "open"
PRIVATE_BLOCKED = "private-blocked"
ALLOW_LIST = "allow-list"
# An adopted machine that does not say what it was made with (made before hbtui labelled
# its machines with their policy): its engine keeps whatever that was.
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Preset:
    """How one tool's key is bound: its variable, the hosts it is good for, where it goes."""

    name: str
    env_var: str
    hosts: tuple[str, ...]
    header: str = ""  # set this header to the whole value; "": the placeholder is replaced
    body: bool = False
    about: str = ""

    def engine_spec(self) -> str:
        """`NAME=ENV_VAR@HOST,...[:body][:set-header=HEADER]`, as `machine create` takes it."""
        spec = f"{self.name}={self.env_var}@{','.join(self.hosts)}"
        if self.body:
            spec += ":body"
        if self.header:
            spec += f":set-header={self.header}"
        return spec


# Checked against each tool's documentation: Claude Code sends ANTHROPIC_API_KEY as the
# X-Api-Key header, and a subscription's CLAUDE_CODE_OAUTH_TOKEN (`claude setup-token`) as
# `Authorization: Bearer TOKEN` (seen on the wire: it takes the placeholder as it is);
# Codex sends OPENAI_API_KEY as `Authorization: Bearer KEY`; gh reads GH_TOKEN for
# github.com and its API and sends it in `Authorization`. Where the tool writes the
# variable into a header itself, the engine replaces the placeholder there.
BUILT_IN: dict[str, Preset] = {
    "anthropic": Preset(
        "anthropic",
        "ANTHROPIC_API_KEY",
        ("api.anthropic.com",),
        header="x-api-key",
        about="Claude Code and the Anthropic SDKs (x-api-key header)",
    ),
    "claude-subscription": Preset(
        "claude-subscription",
        "CLAUDE_CODE_OAUTH_TOKEN",
        ("api.anthropic.com",),
        about="Claude Code on a Claude subscription (Authorization: Bearer)",
    ),
    "openai": Preset(
        "openai",
        "OPENAI_API_KEY",
        ("api.openai.com",),
        about="Codex and the OpenAI SDKs (Authorization: Bearer)",
    ),
    "github": Preset(
        "github",
        "GH_TOKEN",
        ("api.github.com", "github.com"),
        about="gh and the GitHub API (Authorization)",
    ),
}


def presets(config: Config) -> dict[str, Preset]:
    """The built-in presets and the config's own `[credentials.NAME]` (which win)."""
    found = dict(BUILT_IN)
    for name, custom in config.credentials.items():
        found[name] = Preset(
            name,
            custom.env_var,
            tuple(split_list(custom.hosts)),
            header=custom.header,
            body=custom.body,
            about="from the config",
        )
    return found


def preset(config: Config, name: str) -> Preset:
    known = presets(config)
    if name not in known:
        raise UsageError(
            f"no credential preset {name!r}; known: {', '.join(sorted(known))} "
            "(add your own as [credentials.NAME] in the config)"
        )
    return known[name]


def chosen(config: Config, names: list[str] | None) -> list[Preset]:
    """The presets a new box gets: those named, else the config's default list; each
    once, and no two binding the same variable."""
    wanted = names if names is not None else split_list(config.defaults.credentials)
    picked: list[Preset] = []
    for name in dict.fromkeys(wanted):
        p = preset(config, name)
        clash = next((q for q in picked if q.env_var == p.env_var), None)
        if clash:
            raise UsageError(f"credentials {clash.name!r} and {p.name!r} both set {p.env_var}")
        picked.append(p)
    return picked


@dataclass(frozen=True)
class Egress:
    """A box's network policy, as hbtui asked the engine for it."""

    mode: str
    allow: tuple[str, ...] = ()  # allow-list: host patterns (credential hosts included)

    def describe(self) -> str:
        if self.mode == OPEN:
            return "open: every destination"
        if self.mode == PRIVATE_BLOCKED:
            return (
                "private-blocked: the internet, not the LAN, cloud metadata or the host's loopback"
            )
        if self.mode == UNKNOWN:
            return "unknown: adopted, and its machine does not say what it was made with"
        return "allow-list: only " + ", ".join(self.allow)


def egress_for(
    config: Config, mode: str | None, allow: list[str] | None, credentials: list[Preset]
) -> Egress:
    """The policy of a new box: the one asked for, else the config's; an allow list
    always includes the hosts its credentials are for."""
    from hbtui.config import EGRESS_MODES, host_pattern_problem

    mode = mode or config.defaults.egress
    if mode not in EGRESS_MODES:
        raise UsageError(f"--egress must be one of {', '.join(EGRESS_MODES)} (got {mode!r})")
    hosts = allow if allow is not None else split_list(config.defaults.allow)
    for host in hosts:
        problem = host_pattern_problem(host)
        if problem:
            raise UsageError(f"--allow {host!r}: {problem}")
    if mode != ALLOW_LIST:
        if allow:
            raise UsageError("--allow needs --egress allow-list")
        return Egress(mode)
    hosts = list(dict.fromkeys([*hosts, *(h for p in credentials for h in p.hosts)]))
    if not hosts:
        raise UsageError("--egress allow-list needs at least one --allow HOST or a credential")
    return Egress(mode, tuple(hosts))


# What a box's coding agents may do unasked (the recipe's HB_AGENT_PERMISSIONS): `ask`
# before running a command, or `skip` asking. Skipping is only for a box that cannot send
# what it reads anywhere but its allow list, and that holds no key of its own.
ASK = "ask"
SKIP = "skip"


def agent_permissions_for(wanted: str | None, egress: str, presets: list[Preset]) -> str:
    """The permission mode a new box gets; `skip` refused unless its egress is an allow
    list and its agents' keys are managed credentials."""
    mode = wanted or ASK
    if mode not in (ASK, SKIP):
        raise UsageError(f"--agent-permissions is {ASK} or {SKIP}, not {mode!r}")
    if mode == SKIP and (egress != ALLOW_LIST or not presets):
        raise UsageError(
            "--agent-permissions skip needs --egress allow-list and at least one --credential "
            "(an agent that asks nothing may only reach its allow list, with managed keys)"
        )
    return mode


def recipe_settings(record: BoxRecord) -> dict[str, str]:
    """The box's settings the recipe reads from its environment."""
    return {"HB_AGENT_PERMISSIONS": record.agent_permissions or ASK}


@dataclass(frozen=True)
class EgressReport:
    """`hbtui egress NAME`: the policy hbtui asked for, and what the engine refused."""

    name: str
    host: str
    policy: Egress
    denials: list[dict[str, object]]

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "host": self.host,
            "egress": self.policy.mode,
            "allow": list(self.policy.allow),
            "denials": self.denials,
        }


@dataclass(frozen=True)
class CredentialReport:
    """`hbtui credentials NAME`: its presets, whose secrets are missing, and where the box
    still holds a key in plaintext (checked only while it runs)."""

    name: str
    host: str
    presets: list[Preset]
    missing: list[str]  # presets with no secret stored
    plaintext: list[str] | None  # None: not checked (the box is not running)
    known: bool = True  # False: adopted, and its machine does not say which it has
    # preset -> the variable the box was bound with, where the preset now names another
    rebound: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "host": self.host,
            "credentials": [
                {
                    "preset": p.name,
                    "env_var": self.rebound.get(p.name, p.env_var),
                    "hosts": list(p.hosts),
                }
                for p in self.presets
            ],
            "missing_secrets": self.missing,
            "plaintext": self.plaintext,
            "known": self.known,
            "rebound": self.rebound,
        }
