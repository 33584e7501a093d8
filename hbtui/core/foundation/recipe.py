"""Recipes: the folder of scripts a new box runs once (`provision/` + `guest/`).

The default recipe ships inside the wheel (`hbtui/_recipe/`) and sits at the
top of a source checkout; `--recipe DIR` selects another. hbtui packs the
folder into a tar (following links), copies it into the box with
`machine cp`, and streams `provision/provision.sh` whose step markers become
progress events.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from hbtui.errors import UsageError
from hbtui.events import Step
from hbtui.paths import naming

GUEST_TAR = "/root/.hbtui-recipe.tar"
GUEST_DIR = "/root/.hbtui-recipe"
PROVISIONED_MARKER = "/opt/hermes-box/provisioned"
GUEST_BIN = "/opt/hermes-box/bin"

# Numbers of at most 6 ASCII digits: a box printing 5,000 of them made int() raise.
_MARKER_RE = re.compile(r"^::hbtui::\s+step\s+([0-9]{1,6})/([0-9]{1,6})\s+(\S.*)$")


def default_recipe_dir() -> Path:
    package = Path(__file__).resolve().parents[2]
    shipped = package / "_recipe"
    if (shipped / "provision" / "provision.sh").is_file():
        return shipped
    return package.parent  # a source checkout: provision/ and guest/ at the top


def _resolved(path: Path, recipe: Path | None = None) -> Path:
    """Where a link leads; a symlink loop is one line naming the link."""
    try:
        return path.resolve()
    except (RuntimeError, OSError) as exc:  # 3.11 reports a loop as a RuntimeError
        where = f"in the recipe {recipe}: " if recipe is not None else ""
        why = "a symlink loop" if isinstance(exc, RuntimeError) else exc.strerror or str(exc)
        raise UsageError(f"{where}{path} cannot be followed ({why})") from None


def check_recipe(folder: Path) -> Path:
    folder = _resolved(folder.expanduser())
    if not (folder / "provision" / "provision.sh").is_file():
        raise UsageError(f"not a recipe: {folder} has no provision/provision.sh")
    if not (folder / "guest").is_dir():
        raise UsageError(f"not a recipe: {folder} has no guest/ folder")
    return folder


def _recipe_files(folder: Path) -> list[tuple[str, Path]]:
    files = []
    for top in ("provision", "guest"):
        root = folder / top
        for path in sorted(root.rglob("*")):
            resolved = _resolved(path, folder)
            if resolved.is_file() and "__pycache__" not in path.parts:
                files.append((str(path.relative_to(folder)), resolved))
    return files


def recipe_version(folder: Path) -> str:
    """A short content hash, recorded per box so `repair` can tell what changed."""
    import hashlib  # these two load with the verbs that make or repair a box

    digest = hashlib.sha256()
    for rel, path in _recipe_files(folder):
        digest.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def pack_recipe(folder: Path, dest: Path) -> None:
    """Write the recipe as a tar with links resolved and sane ownership."""
    import tarfile

    with naming(dest), tarfile.open(dest, "w") as tar:
        for rel, path in _recipe_files(folder):
            info = tar.gettarinfo(str(path), arcname=rel)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            with open(path, "rb") as fh:
                tar.addfile(info, io.BufferedReader(fh))


def parse_marker(line: str) -> Step | None:
    """A step marker line as its Step (its name, box text, is made plain by Step)."""
    m = _MARKER_RE.match(line.strip())
    if not m:
        return None
    return Step(int(m[1]), int(m[2]), m[3])


# The recipe's scripts: the whole recipe, the per-box step of a box made from a base or
# branched, and what turns a provisioned box into a base.
PROVISION = "provision.sh"
FIRST_BOOT = "first-boot.sh"
GENERALIZE = "generalize.sh"


def provision_command(script: str = PROVISION) -> list[str]:
    """Unpack the recipe copied in and run one of its scripts."""
    command = (
        f"rm -rf {GUEST_DIR} && mkdir -p {GUEST_DIR} && tar -xf {GUEST_TAR} -C {GUEST_DIR} "
        f"&& rm -f {GUEST_TAR} && exec bash {GUEST_DIR}/provision/{script}"
    )
    return ["sh", "-c", command]


def base_problem(folder: Path) -> str | None:
    """Why boxes of this recipe cannot be made from a base, or None."""
    missing = [s for s in (FIRST_BOOT, GENERALIZE) if not (folder / "provision" / s).is_file()]
    if missing:
        return f"the recipe {folder} has no provision/{' or provision/'.join(missing)}"
    return None


def versions(folder: Path) -> str:
    """provision/versions.env (what the recipe installs), or "" if it has none."""
    path = folder / "provision" / "versions.env"
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""


def workload_command(port: int) -> list[str]:
    """The box's workload: waits until provisioned, then supervises its services. It looks
    for the marker five times a second: a box is ready that much sooner after its recipe
    ends (a 1 s poll cost half a second per new box), and a `sleep` a fifth of a second
    costs nothing beside a recipe's work."""
    script = (
        f"while [ ! -e {PROVISIONED_MARKER} ]; do sleep 0.2; done; "
        f"exec {GUEST_BIN}/hb-workload {port}"
    )
    return ["/bin/sh", "-c", script]
