"""The one rule for box names (and for remote host names), and LOCAL.

A name becomes a smolvm machine name, a file name (logs, default archive
names) and a word on a command line, so it must be safe as all three: a
lower-case letter first, then lower-case letters, digits and single hyphens,
no trailing hyphen, at most 40 characters. This is stricter than smolvm
(which rejects '.', '--' and a trailing '-') and than a file system.
"""

from __future__ import annotations

import re

from hbtui.errors import UsageError

LOCAL = "local"  # the host name of this machine
MAX_LEN = 40
_NAME_RE = re.compile(r"^[a-z](?:[a-z0-9]|-(?=[a-z0-9]))*$")


def host_flag(host_name: str) -> str:
    """The ` --host H` a hint needs to name the same box again (nothing for this machine)."""
    return "" if host_name == LOCAL else f" --host {host_name}"


def name_problem(name: str) -> str | None:
    """Why `name` is not a valid box name, or None when it is."""
    if not name:
        return "a box name cannot be empty"
    if len(name) > MAX_LEN:
        return f"a box name has at most {MAX_LEN} characters (this one has {len(name)})"
    if not name[0].isascii() or not name[0].isalpha() or not name[0].islower():
        return "a box name starts with a lower-case letter (a-z)"
    if "--" in name:
        return "a box name cannot contain two hyphens in a row"
    if name.endswith("-"):
        return "a box name cannot end with a hyphen"
    if not _NAME_RE.fullmatch(name):
        bad = next(
            c for c in name if not (c.isascii() and (c.islower() or c.isdigit() or c == "-"))
        )
        return f"a box name uses only a-z, 0-9 and '-' (found {bad!r})"
    return None


def check_name(name: str) -> str:
    problem = name_problem(name)
    if problem:
        raise UsageError(f"invalid box name {name!r}: {problem}")
    return name


def host_name_problem(name: str) -> str | None:
    """Why `name` cannot name a remote host (the box-name rule, and not 'local'), or None."""
    if name == LOCAL:
        return "'local' means this machine; pick another host name"
    problem = name_problem(name)
    return problem.replace("box name", "host name") if problem else None


def check_host_name(name: str) -> str:
    problem = host_name_problem(name)
    if problem:
        raise UsageError(f"invalid host name {name!r}: {problem}")
    return name
