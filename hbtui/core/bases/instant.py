"""Instant boxes: building a base, and branching a box.

`build_base` provisions a builder box with the whole recipe, generalizes it
(the recipe's `generalize.sh` removes what is per box), stops it and packs it;
`BoxMaking.new` then makes boxes from that pack and runs only the per-box
step. `branch` makes a box with another box's `/data` and installed state:
through the engine's `machine branch` when the source runs branchable (memory
included), otherwise by packing the stopped source and creating from the pack.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from hbtui.config import image_problem, port_problem, split_list
from hbtui.core.boxes import guest, remakes
from hbtui.core.boxes.core import shown_value
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation import recipe as recipes
from hbtui.core.foundation.basebook import Base, BaseCheck, base_id, check, new_base
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.ports import allocate
from hbtui.core.foundation.registry import WORK_MISSING, BoxRecord
from hbtui.core.foundation.scratch import scratch
from hbtui.core.foundation.shield import done_despite_cancel, to_the_end
from hbtui.core.foundation.specs import NewSpec
from hbtui.core.foundation.views import BoxView
from hbtui.core.keys import credentials as creds
from hbtui.engine.locate import format_version
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import Notice, Phase, Report, ignore
from hbtui.names import LOCAL, check_name, host_flag
from hbtui.present import human_bytes


def _per_box_recipe(boxes: BoxOperations, recipe: Path | None, doing: str) -> Path:
    recipe_dir = boxes.core.recipe_dir(recipe)
    problem = recipes.base_problem(recipe_dir)
    if problem:
        raise UsageError(f"{problem}; {doing} needs the recipe's per-box step")
    return recipe_dir


async def build_base(
    boxes: BoxOperations,
    *,
    host_name: str = LOCAL,
    image: str | None = None,
    recipe: Path | None = None,
    report: Report = ignore,
) -> Base:
    """Provision a builder box, generalize, stop and pack it, keep the pack as the base
    of this recipe and image (replacing an older one), and remove the builder."""
    if image is not None and image_problem(image):
        raise UsageError(f"--image {shown_value(image)}: {image_problem(image)}")
    image = image or boxes.core.config.defaults.image
    recipe_dir = _per_box_recipe(boxes, recipe, "a base")
    recipe_hash = recipes.recipe_version(recipe_dir)
    ident = base_id(image, recipe_hash)
    host = await boxes.core.hosts.get(host_name)
    builder = f"base-{recipe_hash[:8]}-{os.getpid()}"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    folder = f"{host.files.bases_dir()}/{ident}-{stamp}-{os.getpid()}"  # two builds at once
    report(Phase(f"building the base {ident} in a builder box {builder}"))
    async with boxes.core.locks.hold(host_name, builder, "base build"):
        started = time.monotonic()
        view = await boxes.making.new(
            NewSpec(
                builder,
                host=host_name,
                image=image,
                recipe=recipe_dir,
                use_base=False,
                branchable=False,
                credentials=(),  # a base holds no keys, not even bindings
            ),
            keep_provisioning=True,
            report=report,
        )
        built_in = time.monotonic() - started
        superseded = ""  # an older base's folder, once the new base replaced it
        try:
            await _generalize(boxes, host, view, recipe_dir, report)
            await host.files.make_dir(folder)
            report(Phase("packing the builder box (the engine copies its disk)"))
            pack = await host.engine.pack(builder, Path(folder) / "base")
            report(Phase("hashing the pack"))
            digest = await host.files.digest(str(pack))
            if digest is None:
                raise HbtuiError(f"the engine wrote no pack at {pack}")
            base = new_base(
                host=host_name,
                image=image,
                recipe=recipe_hash,
                recipe_dir=recipe_dir,
                versions=recipes.versions(recipe_dir),
                engine=format_version(await host.engine.version()),
                pack=str(pack),
                digest=digest,
                built_in=built_in,
            )
            older = boxes.core.bases.put(base)
            if older is not None:
                report(Notice(f"replaced the base {ident} of {older.image} ({older.created})"))
            if older and older.folder != base.folder and older.made_in(host.files.bases_dir()):
                superseded = older.folder
        except BaseException as exc:
            await to_the_end(host.files.remove_tree(folder))
            if isinstance(exc, asyncio.CancelledError):  # the builder goes just below
                raise Cancelled(f"cancelled: the base build in {builder} was rolled back") from None
            raise
        finally:
            await to_the_end(_clean_up_build(boxes, host, builder, superseded, report))
    report(Phase(f"base {ident} is ready ({human_bytes(base.size)})"))
    return base


async def _generalize(
    boxes: BoxOperations, host: Host, view: BoxView, recipe_dir: Path, report: Report
) -> None:
    """Quiesce the builder, remove what is per box, stop it."""
    await guest.quiesce(host, view.name, report)
    log_path = boxes.core.new_provision_log_path(view.name, host.name)
    await guest.provision(
        host,
        view.name,
        view.port or 0,
        recipe_dir,
        log_path,
        report,
        paths=boxes.core.paths,
        script=recipes.GENERALIZE,
    )
    report(Phase(f"stopping {view.name}"))
    await host.engine.stop(view.name)


async def _clean_up_build(
    boxes: BoxOperations, host: Host, builder: str, superseded: str, report: Report
) -> None:
    await _remove_builder(boxes, builder, host.name, report)
    if superseded:
        await host.files.remove_tree(superseded)


async def _remove_builder(boxes: BoxOperations, name: str, host_name: str, report: Report) -> None:
    try:
        await boxes.remove(name, host_name, report=report)
    except (HbtuiError, OSError) as exc:
        report(
            Notice(
                f"could not remove the builder box {name}: {exc}; "
                f"remove it with: hbtui rm --force {name}{host_flag(host_name)}"
            )
        )


async def remove_base(boxes: BoxOperations, ident: str, host_name: str = LOCAL) -> Base:
    base = boxes.core.bases.require(host_name, ident)
    host = await boxes.core.hosts.get(host_name)
    if not base.made_in(host.files.bases_dir()):
        raise HbtuiError(
            f"the manifest of {ident} names a pack outside {host.files.bases_dir()} "
            f"({base.pack}): not deleting that folder",
            hint="if the base is not wanted, delete its manifest: "
            f"{boxes.core.bases.manifest_path(base)}",
        )
    await host.files.remove_tree(base.folder)
    boxes.core.bases.forget(base)
    return base


async def verify_bases(
    boxes: BoxOperations, ident: str | None = None, host_name: str = LOCAL
) -> list[BaseCheck]:
    chosen = (
        [boxes.core.bases.require(host_name, ident)]
        if ident
        else boxes.core.bases.manifests(host_name)
    )
    host = await boxes.core.hosts.get(host_name)
    return [await check(host, base) for base in chosen]


async def branch(
    boxes: BoxOperations,
    source: str,
    name: str,
    *,
    host_name: str = LOCAL,
    port: int | None = None,
    branchable: bool | None = None,
    keep_provisioning: bool = False,
    report: Report = ignore,
) -> BoxView:
    """A new box with `source`'s /data and installed state, its own name and port."""
    async with branching(
        boxes, source, [name], host_name=host_name, port=port, branchable=branchable,
        keep_provisioning=keep_provisioning, report=report,
    ) as make:  # fmt: skip
        return await make(name, report)


MakeBranch = Callable[[str, Report], Awaitable[BoxView]]


@contextlib.asynccontextmanager
async def branching(
    boxes: BoxOperations,
    source: str,
    names: Sequence[str],
    *,
    host_name: str = LOCAL,
    port: int | None = None,
    branchable: bool | None = None,
    keep_provisioning: bool = False,
    report: Report = ignore,
) -> AsyncIterator[MakeBranch]:
    """Yields what makes one branch of `source` named one of `names` (checked first).
    The source running branchable is branched by the engine, memory included; otherwise
    it is stopped and packed once on entry, every branch is made from that pack, and it
    starts again on exit, come what may. `keep_provisioning`: see `BoxMaking.new`."""
    for name in names:
        check_name(name)
    if port is not None and port_problem(port):
        raise UsageError(f"--port {port}: {port_problem(port)}")
    host, view, src = await boxes.core.require_remakeable(source, host_name, "branch it")
    recipe_dir = _per_box_recipe(boxes, None, "branching")

    def wanted(name: str) -> BoxRecord:
        return BoxRecord(
            name=name,
            host=host_name,
            port=port or 0,
            image=src.image,
            cpus=src.cpus,
            memory_mib=src.memory_mib,
            recipe=src.recipe,
            base=src.base,
            parent=source,
            branchable=boxes.core.config.defaults.branchable if branchable is None else branchable,
            credentials=src.credentials,  # an engine branch keeps them; a pack carries none
            egress=src.egress,
            allow=src.allow,
            # Kept provisioning, a branch waits for its clone: killed before, it says so.
            error=WORK_MISSING if keep_provisioning else "",
        )

    boxes.core.secret_env(wanted(source))  # a missing secret stops it before anything changes
    machine = await host.engine.find(source)
    if machine is not None and machine.state == "running" and machine.branchable:

        async def by_engine(name: str, said: Report) -> BoxView:
            return await boxes.making.make(
                wanted(name), recipe_dir, pack=None, branch_of=src,
                keep_provisioning=keep_provisioning, report=said,
            )  # fmt: skip

        yield by_engine
        return
    for name in names:  # before the source is stopped for nothing
        await _refuse_taken(boxes, host, wanted(name))
    report(
        Notice(
            f"{source} is not running branchable: it stops, its disk is copied, and it starts "
            "again; its running processes (its agents too) end"
        )
    )
    was_running = view.state == "running"
    try:
        async with _packed(boxes, host, source, stop=was_running, report=report) as pack:

            async def from_pack(name: str, said: Report) -> BoxView:
                return await boxes.making.make(
                    wanted(name), recipe_dir, pack=pack, keep_provisioning=keep_provisioning,
                    report=said,
                )  # fmt: skip

            yield from_pack
    except BaseException:
        if was_running:
            await to_the_end(_start_again(boxes, host, src, report))
        raise
    if was_running:
        await done_despite_cancel(_start_again(boxes, host, src, report))


async def _refuse_taken(boxes: BoxOperations, host: Host, wanted: BoxRecord) -> None:
    """The name and port checks `make` makes again under its lock, made early."""
    registry = boxes.core.registry.read()
    if registry.get(wanted.name, host.name) is not None:
        raise UsageError(f"a box named {wanted.name!r} already exists (see: hbtui ls)")
    if await host.engine.find(wanted.name) is not None:
        raise UsageError(
            f"a smolvm machine named {wanted.name!r} already exists; pick another name"
        )
    if wanted.port:
        await allocate(registry, host.name, host.port_range, host.busy_ports, wanted=wanted.port)


@contextlib.asynccontextmanager
async def _packed(
    boxes: BoxOperations, host: Host, name: str, *, stop: bool, report: Report
) -> AsyncIterator[Path]:
    """The box's disk as a pack in a private folder, removed when the block ends; the box
    is quiesced and stopped first when `stop` (a running box cannot be packed)."""
    if stop:
        await _quiesce_and_stop(host, name, report)
    async with _pack_folder(boxes, host) as folder:
        report(Phase(f"packing {name}"))
        yield await host.engine.pack(name, Path(folder) / name)


async def _quiesce_and_stop(host: Host, name: str, report: Report) -> None:
    """A running box cannot be packed: its services are quiesced, then it stops."""
    await guest.quiesce(host, name, report)
    report(Phase(f"stopping {name}"))
    await host.engine.stop(name)


@contextlib.asynccontextmanager
async def _pack_folder(boxes: BoxOperations, host: Host) -> AsyncIterator[str]:
    """A folder on the host for a pack of a box's disk (its /data in plaintext): here,
    the private scratch folder; on a remote host, one beside its bases."""
    if host.name == LOCAL:
        with scratch(boxes.core.paths, "branch") as tmp:
            yield str(tmp)
        return
    folder = f"{host.files.bases_dir()}/.branch-{os.getpid()}-{time.time_ns()}"
    await host.files.make_dir(folder)
    try:
        yield folder
    finally:
        await to_the_end(host.files.remove_tree(folder))


async def _start_again(boxes: BoxOperations, host: Host, src: BoxRecord, report: Report) -> None:
    """The source was running before the branch: it runs again after, come what may."""
    try:
        report(Phase(f"starting {src.name} again"))
        await boxes.core.boot(host, src.name)
        await guest.resume(host, src.name, report)
        await guest.wait_ready(host, src.name, src.port, report, timeout=90)
    except HbtuiError as exc:
        report(
            Notice(
                f"{src.name} did not come back by itself: {exc}; start it: hbtui start "
                f"{src.name}{host_flag(host.name)}"
            )
        )


async def change_credentials(
    boxes: BoxOperations,
    name: str,
    host_name: str = LOCAL,
    *,
    add: Sequence[str] = (),
    remove: Sequence[str] = (),
    report: Report = ignore,
) -> BoxView:
    """Bind or unbind credential presets. The engine binds credentials when it creates
    a machine (`update` cannot), so the box is packed and made again from its own disk,
    with everything else as it was; it runs again afterwards if it was running."""
    host, view, record = await boxes.core.require_remakeable(
        name, host_name, "change its credentials"
    )
    if record.egress == creds.UNKNOWN:
        # Adopted from a machine that did not say: a remake would silently open it.
        raise UsageError(
            f"the egress policy of {name!r} is unknown (adopted from a machine that did not "
            "record it), so it cannot be made again with the same policy; keep its "
            "credentials, or make a new box with the ones wanted"
        )
    current = split_list(record.credentials)
    for gone in remove:
        if gone not in current:
            raise UsageError(
                f"box {name!r} has no credential {gone!r} (it has: {', '.join(current) or 'none'})"
            )
    added = [a for a in dict.fromkeys(add) if a not in current]  # a preset named twice: once
    wanted = [c for c in current if c not in remove] + added
    presets = creds.chosen(boxes.core.config, wanted)
    if wanted == current:
        report(Notice(f"{name} already has {', '.join(current) or 'no credentials'}"))
        return view
    allow = split_list(record.allow)
    if record.egress == creds.ALLOW_LIST:  # a credential's hosts must be reachable...
        needed = [h for p in presets for h in p.hosts]
        known = creds.presets(boxes.core.config)
        # ...and those only an unbound credential needed are not any more.
        unneeded = {h for n in remove if n in known for h in known[n].hosts} - set(needed)
        allow = list(dict.fromkeys([*(h for h in allow if h not in unneeded), *needed]))
        if unneeded & set(split_list(record.allow)):
            report(Notice(f"{name} no longer reaches {', '.join(sorted(unneeded))}"))
    changed = record.with_(credentials=",".join(wanted), allow=",".join(allow))
    boxes.core.secret_env(changed)  # a missing secret stops it before anything changes
    report(
        Notice(
            f"credentials are bound when a machine is made: {name} is packed and made again "
            "from its own disk (its /data and installed state are kept; its running "
            "processes, its agents too, end)"
        )
    )
    was_running = view.state == "running"
    try:
        remake = await _pack_for_remake(boxes, host, record, changed, was_running, report)
        # The machine is deleted next: from here only the pack holds the box, and the
        # journal says where. The remake runs to its end even when cancelled; once it is
        # made the change is done, and a cancellation meanwhile cannot make it "interrupted".
        await done_despite_cancel(boxes.finish_remake(host, remake, report))
    except BaseException:
        if was_running:
            await to_the_end(_start_if_there(boxes, host, record, report))
        raise
    if was_running:
        # As `start` does: the quiesce taken before the stop is on the disk it was made
        # from, and keeps the services down until it lapses unless they are resumed. A
        # cancelled change starts the box again too, so this start is not cut off either.
        return await done_despite_cancel(boxes.start(name, host_name, report=report))
    return await boxes.core.get(name, host_name)


async def _pack_for_remake(
    boxes: BoxOperations,
    host: Host,
    old: BoxRecord,
    new: BoxRecord,
    was_running: bool,
    report: Report,
) -> remakes.Remake:
    """Stop the box, pack its disk into a durable folder on its host, and journal it:
    until the entry is written the machine is untouched, and a folder left by a kill
    is swept; after it, the box can always be made again from the pack."""
    if was_running:
        await _quiesce_and_stop(host, old.name, report)
    folder = remakes.pack_folder(host, old.name)
    await host.files.make_dir(folder)
    try:
        report(Phase(f"packing {old.name}"))
        pack = await host.engine.pack(old.name, Path(folder) / old.name)
        await host.files.sync(str(pack))
        remake = remakes.Remake(os.getpid(), folder, str(pack), was_running, old, new)
        boxes.core.remakes.write(remake)
    except BaseException:
        await to_the_end(host.files.remove_tree(folder))
        raise
    return remake


async def _start_if_there(boxes: BoxOperations, host: Host, src: BoxRecord, report: Report) -> None:
    """After a failed or cancelled change, a box that ran runs again, if its machine is
    there (its disk may have been kept aside instead)."""
    try:
        if await host.engine.find(src.name) is None:
            return
    except HbtuiError:
        return
    await _start_again(boxes, host, src, report)
