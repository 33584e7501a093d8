"""load: an archive into a new box.

The archive is decrypted and its tar checked entry by entry (paths, links, devices)
before anything is created; then a new box is provisioned, and the parts go back in one
at a time to a guest `zstd -d | tar -x` that unpacks beside /data and swaps it in only
when everything arrived. The passphrase stays in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from hbtui.core.archives import carried
from hbtui.core.archives.carried import Carrier
from hbtui.core.archives.files import (
    HBX,
    archive_kind,
    check_contents,
    payload_size,
    progress_from_thread,
)
from hbtui.core.boxes import guest
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation import git as gitops
from hbtui.core.foundation import scratch as scratches
from hbtui.core.foundation.hosts import Host
from hbtui.core.foundation.registry import FAILED, READY
from hbtui.core.foundation.scratch import scratch
from hbtui.core.foundation.specs import NewSpec
from hbtui.core.foundation.views import BoxView
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import Notice, Phase, Report, Stage, Transfer, ignore
from hbtui.names import LOCAL, check_name
from hbtui.paths import naming

if TYPE_CHECKING:
    from typing_extensions import Buffer


LOAD_DIR = "/root/.hbtui-load"
TAKEN_TAG = "::hbtui-taken::"


class LoadFailed(HbtuiError):
    pass


def _load_script(decompress: str) -> str:
    # Parts arrive as part-000000, part-000001, ...; `end` says no more will.
    # Each is consumed and deleted before the host sends the next one.
    feed = "\n".join(
        [
            "i=0",
            "while :; do",
            f'  f=$(printf "{LOAD_DIR}/part-%06d" "$i")',
            f'  while [ ! -e "$f" ] && [ ! -e {LOAD_DIR}/end ]; do sleep 0.05; done',
            '  [ -e "$f" ] || break',
            '  cat "$f"; rm -f "$f"',
            f'  echo "{TAKEN_TAG} $i" >&3',
            "  i=$((i+1))",
            "done",
        ]
    )
    return "\n".join(
        [
            "set -euo pipefail",
            "exec 3>&1",
            f"mkdir -p {LOAD_DIR}/data",
            f"{{\n{feed}\n}} | {decompress} | tar -C {LOAD_DIR}/data --numeric-owner -xpf -",
            # Swap the unpacked tree in: same file system, so these are renames.
            "find /data -mindepth 1 -maxdepth 1 -exec rm -rf -- {} +",
            f"find {LOAD_DIR}/data -mindepth 1 -maxdepth 1 -exec mv -t /data -- {{}} +",
            f"rm -rf {LOAD_DIR}",
            # An archive may predate parts of the /data layout every box has (an old
            # backup without logs/); and the agent's home is the agent's, whatever
            # uid made the archive.
            "if id agent >/dev/null 2>&1; then",
            "  install -d -m 0755 /data/home",
            "  install -d -m 0755 -o agent -g agent /data/logs",
            "  install -d -m 0750 -o agent -g agent /data/home/agent",
            "  install -d -o agent -g agent /data/home/agent/workspace",
            "  chown -R agent:agent /data/home/agent",
            "fi",
            "echo ::hbtui-unpacked::",
        ]
    )


class _Aborted(Exception):
    """The async side gave up; the decrypting thread stops writing."""


class _PartSink:
    """A file-like sink, written by a worker thread, that cuts the plaintext into
    parts and hands each one to the event loop, waiting until it was consumed."""

    def __init__(
        self,
        folder: Path,
        part_bytes: int,
        loop: asyncio.AbstractEventLoop,
        parts: asyncio.Queue[Path | None],
    ) -> None:

        self._folder = folder
        self._part_bytes = part_bytes
        self._loop = loop
        self._parts = parts
        self._index = 0
        self._fh: BinaryIO | None = None
        self._fill = 0
        self._consumed = threading.Semaphore(0)
        self.aborted = False

    def _open(self) -> BinaryIO:
        if self._fh is None:
            self._fh = open(self._folder / f"part-{self._index:06d}", "wb")
            self._fill = 0
        return self._fh

    def _handoff(self, path: Path | None) -> None:
        asyncio.run_coroutine_threadsafe(self._parts.put(path), self._loop).result()
        if path is not None:
            self._consumed.acquire()
            if self.aborted:
                raise _Aborted()

    def _cut(self) -> None:
        assert self._fh is not None
        self._fh.close()
        path = Path(self._fh.name)
        self._fh = None
        self._index += 1
        self._handoff(path)

    def write(self, data: Buffer) -> int:
        if self.aborted:
            raise _Aborted()
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            fh = self._open()
            n = min(len(view), self._part_bytes - self._fill)
            with naming(fh.name):
                fh.write(view[:n])
            self._fill += n
            view = view[n:]
            if self._fill == self._part_bytes:
                self._cut()
        return total

    def finish(self) -> None:
        if self._fh is not None:
            self._cut()
        self._handoff(None)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def consumed(self) -> None:
        self._consumed.release()

    def abort(self) -> None:
        self.aborted = True
        self._consumed.release()


PROGRESS_STEPS = 500  # Transfer events per pass at most: smooth to a reader, cheap to render


def _write_plaintext(archive: Path, kind: str, passphrase: bytes, sink: _PartSink) -> None:
    """Decrypt into the sink (compressed tar: zstd for .hbx, gzip for legacy)."""
    from hbtui.archive.hbxtar import DecryptedReader
    from hbtui.archive.legacy import decrypt_legacy
    from hbtui.archive.stream import Decryptor

    try:
        if kind == HBX:
            with open(archive, "rb", buffering=0) as fh:
                DecryptedReader(Decryptor(fh, passphrase)).pump_to(sink)  # type: ignore[arg-type]
        else:
            decrypt_legacy(archive, sink, passphrase)  # type: ignore[arg-type]
        sink.finish()
    finally:
        sink.close()  # an open part would keep its disk space after the folder is removed


async def load(
    boxes: BoxOperations,
    archive: Path,
    name: str,
    host_name: str = LOCAL,
    *,
    passphrase: bytes,
    recipe: Path | None = None,
    carrier: Carrier | None = None,
    repo: Path | None = None,
    report: Report = ignore,
) -> BoxView:
    """`carrier` checks what the archive's note carries before the box is made and keeps
    it once the box is ready; `repo` is `load --repo PATH`, handed to it."""
    check_name(name)
    archive = Path(archive).expanduser().absolute()
    kind = archive_kind(archive)
    if boxes.core.registry.read().get(name, host_name) is not None:
        raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
    if repo is not None:  # a --repo that is no repository fails before the long check
        repo = await gitops.repo_top(Path(repo).expanduser().absolute())
    size = archive.stat().st_size
    progress = progress_from_thread(report, size, "checking")

    report(Phase(f"decrypting and checking {archive.name} before creating anything", Stage.CHECK))
    note = carried.decode(
        await asyncio.to_thread(check_contents, archive, kind, passphrase, progress)
    )
    landing = None if carrier is None else await carrier.arriving(note, repo, report)

    view = await boxes.making.new(
        NewSpec(name, host=host_name, recipe=recipe), report=report, keep_provisioning=True
    )
    host = await boxes.core.hosts.get(host_name)
    try:
        async with guest.quiesced(host, name, report):
            await _restore_parts(boxes, host, name, archive, kind, passphrase, size, report)
        await guest.resume(host, name, report)
        if view.port:
            await guest.wait_ready(host, name, view.port, report)
        await boxes.core.registry.settle(name, host_name, READY)
        if landing is not None:
            landing(host_name, name, report)
    except BaseException as exc:
        report(Notice(f"load failed; removing the new box {name}"))
        await asyncio.shield(_remove_quietly(boxes, name, host_name))
        if isinstance(exc, asyncio.CancelledError):
            raise Cancelled(f"cancelled: box {name!r} was removed") from None
        if isinstance(exc, OSError) and exc.filename is None:
            where = scratches.root(boxes.core.paths)
            raise LoadFailed(
                f"decrypting parts into {where}: {exc.strerror or exc}; box {name!r} was removed"
            ) from None
        raise
    report(Phase(f"loaded {archive.name} into {name}", Stage.DONE))
    return await boxes.core.get(name, host_name)


async def _remove_quietly(boxes: BoxOperations, name: str, host_name: str) -> None:
    try:
        await boxes.remove(name, host_name)
    except (HbtuiError, OSError):
        await boxes.core.registry.settle(
            name, host_name, FAILED, "load failed and the box could not be removed"
        )


async def _restore_parts(  # noqa: C901 (named in pyproject.toml)
    boxes: BoxOperations,
    host: Host,
    name: str,
    archive: Path,
    kind: str,
    passphrase: bytes,
    size: int,
    report: Report,
) -> None:
    report(Phase("copying /data into the box part by part", Stage.RESTORE))
    loop = asyncio.get_running_loop()
    parts: asyncio.Queue[Path | None] = asyncio.Queue(maxsize=1)
    taken: asyncio.Queue[int] = asyncio.Queue()
    part_bytes = boxes.core.config.archive.part_size_mib * 2**20
    decompress = "zstd -d -q -c" if kind == HBX else "gzip -d -c"
    # The payload size is in an .hbx header; an old gpg backup does not say.
    total = payload_size(archive) if kind == HBX else None
    script = _load_script(decompress)
    await host.engine.exec(name, ["rm", "-rf", "--", LOAD_DIR], timeout=60)
    stream = host.engine.exec_stream(name, ["bash", "-c", script], timeout=None)
    unpacked = asyncio.Event()

    async def watch() -> None:
        async for line in stream:
            if line.startswith(TAKEN_TAG):
                await taken.put(int(line.split()[1]))
            elif line.startswith("::hbtui-unpacked::"):
                unpacked.set()
            elif line.strip():
                report(Notice(f"guest: {line.strip()}"))
        if stream.returncode:
            raise LoadFailed(f"unpacking /data in {name} failed (exit status {stream.returncode})")

    with scratch(boxes.core.paths, "load") as tmp:
        sink = _PartSink(tmp, part_bytes, loop, parts)
        producer = asyncio.ensure_future(
            asyncio.to_thread(_write_plaintext, archive, kind, passphrase, sink)
        )
        watcher = asyncio.ensure_future(watch())
        sent = 0
        try:
            index = 0
            while True:
                getter = asyncio.ensure_future(parts.get())
                others = {t for t in (watcher, producer) if not t.done()}
                done, _ = await asyncio.wait({getter, *others}, return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    for task in done:
                        task.result()  # raises the failure
                    if watcher.done():
                        raise LoadFailed("the guest stopped unpacking before every part arrived")
                    continue
                path = getter.result()
                if path is None:
                    break
                guest = f"{LOAD_DIR}/part-{index:06d}"
                sent += path.stat().st_size
                await host.engine.cp_in(name, path, guest + ".tmp")
                await host.engine.exec(name, ["mv", guest + ".tmp", guest], timeout=60)
                path.unlink()
                while (await _next_taken(taken, watcher)) != index:
                    pass
                report(Transfer(sent, total, "restoring"))
                sink.consumed()
                index += 1
            await producer
            await host.engine.exec(name, ["touch", f"{LOAD_DIR}/end"], timeout=60)
            await watcher
            if not unpacked.is_set():
                raise LoadFailed(f"unpacking /data in {name} did not finish")
        except BaseException:
            sink.abort()
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await producer
            raise


async def _next_taken(taken: asyncio.Queue[int], watcher: asyncio.Future[None]) -> int:
    getter = asyncio.ensure_future(taken.get())
    waiting: set[asyncio.Future[Any]] = {getter, watcher}
    done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    if getter in done:
        return getter.result()
    getter.cancel()
    watcher.result()
    raise LoadFailed("the guest stopped unpacking before taking every part")
