"""Bases: a provisioned box, generalized and packed by the engine, that new boxes of the
same recipe and image are made from in seconds instead of minutes.

A base's pack lives on the host whose engine made it (`Host.files.bases_dir()`);
its manifest lives here, under the data folder, one JSON file per base and host.
A base is keyed by its image and its recipe's content hash: a box made from it
is the box the recipe would make, minus the per-box step (`first-boot.sh`).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.registry import utc_now
from hbtui.errors import HbtuiError, UsageError
from hbtui.names import LOCAL, host_flag
from hbtui.paths import make_folder, naming, read_state
from hbtui.statefile import locked, write_atomic

_SLUG = re.compile(r"[^a-z0-9.]+")
_ID = re.compile(r"^[a-z0-9.-]{1,120}-[0-9a-f]{12}$")


class StaleBase(HbtuiError):
    """A base of this recipe and image exists, but from an older version of the recipe."""


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {"str": str, "int": int, "float": (int, float)}

SLUG_MAX = 64  # of the image's part of an id: an id is a file name and a word in commands


def base_id(image: str, recipe: str) -> str:
    """`ubuntu-24.04-5d1e0c2a-3f2a9c1b0d4e`: the image as a file name (cut to fit), a hash
    of the image as typed (`ubuntu:24.04`, `UBUNTU:24.04` and `ubuntu/24.04` read alike
    as file names, but are bases of their own), then the recipe hash."""
    import hashlib  # the verbs that read bases only need their ids as written

    slug = _SLUG.sub("-", image.lower())[:SLUG_MAX].strip("-.") or "image"
    exact = hashlib.sha256(image.encode()).hexdigest()[:8]
    return f"{slug}-{exact}-{recipe}"


@dataclass(frozen=True)
class Base:
    id: str
    host: str
    image: str
    recipe: str  # the recipe's content hash
    recipe_dir: str  # where that recipe was on this machine when the base was built
    versions: str  # its provision/versions.env: what is installed
    engine: str  # the engine version that packed it
    pack: str  # the .smolmachine file, on the host
    size: int
    sha256: str
    created: str
    built_in: float = 0.0  # seconds the whole recipe took in the builder box

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @property
    def folder(self) -> str:
        """The folder on the host holding the pack and the engine's stub."""
        return os.path.dirname(self.pack)

    def made_in(self, bases_dir: str) -> bool:
        """Whether its folder is one `base build` made in `bases_dir`: the only kind hbtui
        deletes (a damaged or edited manifest must not name a folder of the user's)."""
        folder = posixpath.normpath(self.folder)
        return posixpath.dirname(folder) == posixpath.normpath(bases_dir) and (
            posixpath.basename(folder).startswith(f"{self.id}-")
        )


@dataclass(frozen=True)
class BaseCheck:
    """`hbtui base verify`: whether a base's pack is there and is the one packed."""

    base: Base
    problem: str  # "" when the pack matches its manifest

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.base.id,
            "host": self.base.host,
            "ok": not self.problem,
            "problem": self.problem or None,
        }


@dataclass(frozen=True)
class NewPlan:
    """How `new` would make a box: from which base, or why with the whole recipe."""

    base: Base | None
    why: str  # one line for the user
    hint: str = ""  # what to do about it
    stale: bool = False  # a base exists but from an older recipe: `new` refuses it

    @property
    def fast(self) -> bool:
        return self.base is not None


class BaseBook:
    """The manifests of the bases on every host, one JSON file each."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _file(self, host: str, ident: str) -> Path:
        return self.root / host / f"{ident}.json"

    def manifests(self, host: str | None = None) -> list[Base]:
        hosts = [host] if host else sorted(p.name for p in self._hosts())
        found = []
        for name in hosts:
            folder = self.root / name
            if not folder.is_dir():
                continue
            for path in sorted(folder.glob("*.json")):
                base = self._read(path)
                if base is not None:
                    found.append(base)
        return sorted(found, key=lambda b: (b.host != LOCAL, b.host, b.created), reverse=False)

    def _hosts(self) -> list[Path]:
        return [p for p in self.root.iterdir() if p.is_dir()] if self.root.is_dir() else []

    def _read(self, path: Path) -> Base | None:
        """A manifest, or None for a file that is not one (never fatal to a listing); a
        FIFO or device in its place is an UnreadableFile naming it, never a hang. A field
        of the wrong type makes it not one too: the listing formats every field."""
        data = read_state(path)
        try:
            raw = json.loads(data or b"")
            known = {f.name for f in fields(Base)}
            base = Base(**{k: v for k, v in raw.items() if k in known})
        except (ValueError, TypeError, AttributeError):
            return None
        typed = all(
            isinstance(getattr(base, f.name), _FIELD_TYPES[str(f.type)])
            and not isinstance(getattr(base, f.name), bool)
            for f in fields(Base)
        )
        return base if typed else None

    def damaged(self, host: str | None = None) -> list[Path]:
        """The manifest files (of `host`, or all) that are no manifest (cut short, edited):
        their bases' packs are kept (see leftovers), never taken for a killed build's."""
        hosts = [host] if host else sorted(p.name for p in self._hosts())
        found = [self.root / name for name in hosts if (self.root / name).is_dir()]
        files = [p for folder in found for p in sorted(folder.glob("*.json"))]
        return [p for p in files if self._read(p) is None]

    def get(self, host: str, ident: str) -> Base | None:
        if not _ID.fullmatch(ident):
            raise UsageError(f"{ident!r} is not a base id (see: hbtui base ls)")
        return self._read(self._file(host, ident))

    def require(self, host: str, ident: str) -> Base:
        base = self.get(host, ident)
        if base is None:
            where = "" if host == LOCAL else f" on {host}"
            raise UsageError(f"no base {ident!r}{where} (see: hbtui base ls)")
        return base

    def put(self, base: Base) -> Base | None:
        """Keep `base`'s manifest; returns the one it replaced, read under the same lock,
        so of two builds of one base each learns which older pack is its to remove."""
        make_folder(self.root / base.host, 0o700)
        with locked(self.root / ".lock"):
            older = self.get(base.host, base.id)
            data = json.dumps(base.to_json(), indent=2) + "\n"
            with naming(self._file(base.host, base.id)):
                write_atomic(self._file(base.host, base.id), data.encode())
        return older

    def forget(self, base: Base) -> None:
        self._file(base.host, base.id).unlink(missing_ok=True)

    def manifest_path(self, base: Base) -> Path:
        return self._file(base.host, base.id)

    def plan(
        self,
        host: str,
        image: str,
        recipe_dir: Path,
        recipe: str,
        *,
        use_base: bool = True,
        recipe_flag: str = "",
    ) -> NewPlan:
        """From which base a new box of this recipe and image would be made, and why not.
        `recipe_flag` is what a hint's `base build` needs to build from this recipe."""
        where = recipe_flag + host_flag(host)
        if not use_base:
            return NewPlan(None, "full provisioning: bases are not used for this box")
        ours = [b for b in self.manifests(host) if b.image == image]
        for base in reversed(ours):  # the newest (one of an older id scheme may remain)
            if base.recipe == recipe:
                return NewPlan(base, f"from the base {base.id} (fast: only the per-box step)")
        stale = [b for b in ours if b.recipe_dir == str(recipe_dir)]
        if stale:
            return NewPlan(
                None,
                f"the base {stale[-1].id} of {image} was built from an older version of the "
                f"recipe {recipe_dir} (now {recipe})",
                hint=f"rebuild it: hbtui base build --image {image}{where}; or make the box "
                "with the whole recipe: --no-base",
                stale=True,
            )
        return NewPlan(
            None,
            f"full provisioning: no base of {image} for this recipe",
            hint=f"make one for next time: hbtui base build --image {image}{where}",
        )


async def check(host: Host, base: Base) -> BaseCheck:
    """Is the pack on its host, with the size and hash recorded when it was packed?"""
    found = await host.files.digest(base.pack)
    if found is None:
        return BaseCheck(base, f"its pack {base.pack} is missing")
    size, sha256 = found
    if size != base.size:
        return BaseCheck(base, f"its pack is {size} bytes, {base.size} were packed")
    if sha256 != base.sha256:
        return BaseCheck(base, "its pack's SHA-256 differs from the one packed")
    return BaseCheck(base, "")


def new_base(
    *,
    host: str,
    image: str,
    recipe: str,
    recipe_dir: Path,
    versions: str,
    engine: str,
    pack: str,
    digest: tuple[int, str],
    built_in: float,
) -> Base:
    return Base(
        id=base_id(image, recipe),
        host=host,
        image=image,
        recipe=recipe,
        recipe_dir=str(recipe_dir),
        versions=versions,
        engine=engine,
        pack=pack,
        size=digest[0],
        sha256=digest[1],
        created=utc_now(),
        built_in=round(built_in, 1),
    )
