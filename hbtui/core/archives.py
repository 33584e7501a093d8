"""save / load / extract / verify: moving a box's /data as an encrypted archive.

save: quiesce the box; in the guest `tar | zstd -T0 | split --filter` writes
one part at a time and waits until the host has taken it, so neither side
ever holds more than one part; each part is copied out with `machine cp`,
fed to the encryptor and deleted on both sides; services are resumed always.

load: the archive is decrypted and its tar checked entry by entry (paths,
links, devices) before anything is created; then a new box is provisioned,
and the parts go back in one at a time to a guest `zstd -d | tar -x` that
unpacks beside /data and swaps it in only when everything arrived.

The passphrase stays in this process: it never reaches argv, a log, or a
child's environment.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import shutil
import tempfile
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from hbtui.core import guest
from hbtui.core import scratch as scratches
from hbtui.core.boxes import BoxOperations
from hbtui.core.hosts import Host
from hbtui.core.registry import FAILED, READY, utc_now
from hbtui.core.scratch import scratch, staged_beside
from hbtui.core.specs import NewSpec
from hbtui.core.views import BOX, ORPHAN, BoxView
from hbtui.errors import Cancelled, HbtuiError, UsageError
from hbtui.events import MachineState, Notice, Phase, Report, Stage, Transfer, ignore
from hbtui.names import LOCAL, check_name
from hbtui.paths import Paths, naming

if TYPE_CHECKING:
    from typing_extensions import Buffer

    from hbtui.archive.format import Encryptor

SAVE_DIR = "/root/.hbtui-save"
LOAD_DIR = "/root/.hbtui-load"
PART_TAG = "::hbtui-part::"
READ_TAG = "::hbtui-read::"
TAKEN_TAG = "::hbtui-taken::"
CHECKPOINT_RECORDS = 1024  # tar records of 10 KiB between progress lines
RECORD_BYTES = 10240  # tar's record: 20 blocks of 512 (its %u counts records, not checkpoints)
PART_TIMEOUT = 600.0
ARCHIVE_SUFFIX = ".hbx"
QUIESCE_MARKER = "home/agent/.config/hermes-box/quiesced"  # relative to /data


HBX = "hbx"  # our format
LEGACY = "legacy"  # the old tool's *.tar.gz.gpg


class SaveFailed(HbtuiError):
    pass


class LoadFailed(HbtuiError):
    pass


def _save_script(part_bytes: int) -> str:
    # split runs the filter once per part, sequentially: the filter publishes
    # the part under its final name, announces it, then blocks until the host
    # deletes it. That stalls the pipe, so tar waits too.
    announce = (
        f'f=$FILE; cat > "$f.tmp" && mv "$f.tmp" "$f" && '
        f'echo "{PART_TAG} $f $(stat -c %s "$f")" && '
        'while [ -e "$f" ]; do sleep 0.05; done'
    )
    return "\n".join(
        [
            "set -euo pipefail",
            f"rm -rf {SAVE_DIR} && mkdir -m 700 {SAVE_DIR}",
            f'echo "{READ_TAG} total $(du -sb /data | cut -f1)"',
            "exec 3>&1",
            # The quiesce marker save itself set is not part of the box's state.
            (
                f"tar -C /data --numeric-owner --exclude=./{QUIESCE_MARKER} "
                f"--checkpoint={CHECKPOINT_RECORDS} "
                f"--checkpoint-action=echo='{READ_TAG} %u' -cf - . 2>&3 "
                f"| zstd -T0 -q -c | split -b {part_bytes} -a 6 -d "
                f"--filter={shlex.quote(announce)} - {SAVE_DIR}/part-"
            ),
            f"rm -rf {SAVE_DIR}",
        ]
    )


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


def _can_write_beside(target: Path) -> None:
    """Make and drop a temporary file where the archive's will be: a read-only disk, a
    name too long for its temporary form, a /proc path fail here, in a line."""
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(tmp)


def default_archive_path(boxes: BoxOperations, name: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return boxes.config.backups_dir(boxes.paths) / f"{name}-{stamp}{ARCHIVE_SUFFIX}"


async def _guest_rm(host: Host, name: str, path: str) -> None:
    with contextlib.suppress(HbtuiError):
        await host.engine.exec(name, ["rm", "-rf", "--", path], timeout=60)


async def save(  # noqa: C901 (named in pyproject.toml)
    boxes: BoxOperations,
    name: str,
    host_name: str = LOCAL,
    *,
    output: Path | None = None,
    passphrase: bytes,
    verify_after: bool = True,
    report: Report = ignore,
) -> Path:
    view = await boxes.get(name, host_name)
    host = await boxes.hosts.get(host_name)
    if view.kind not in (BOX, ORPHAN):
        raise UsageError(f"box {name!r} has no machine to save ({view.kind})")
    boxes.refuse_unprovisioned(view)
    target = (output or default_archive_path(boxes, name)).expanduser().absolute()
    if os.path.lexists(target):  # a dangling link too: nothing is written through it
        raise UsageError(f"{target} already exists; choose another path with -o")
    if os.path.lexists(target.parent) and not target.parent.is_dir():
        raise UsageError(f"{target.parent} is not a folder")
    if not target.parent.is_dir():
        if output is not None:
            raise UsageError(f"folder {target.parent} does not exist")
        try:
            target.parent.mkdir(parents=True, mode=0o700)
        except (FileExistsError, NotADirectoryError):
            raise UsageError(
                f"the backups folder {target.parent} is (under) a file; "
                "set [archive] backups_dir to a folder"
            ) from None
    _can_write_beside(target)  # before the box is paused, not after it was packed
    part_bytes = boxes.config.archive.part_size_mib * 2**20
    was_running = view.state == MachineState.RUNNING
    if not was_running:
        report(Phase(f"starting {name} to read its /data"))
        await boxes.boot(host, name)
    try:
        async with guest.quiesced(host, name, report) as lease:
            await _save_parts(
                host, name, target, passphrase, part_bytes, lease, boxes.paths, report
            )
    except FileExistsError as exc:
        if str(target) not in (exc.filename, exc.filename2):  # not the archive's own name
            raise
        raise SaveFailed(
            f"{target} appeared while this save ran (another save to the same path?); "
            "it was left as it was and this archive was not kept"
        ) from None
    except OSError as exc:
        if exc.filename is not None:
            raise
        raise SaveFailed(f"writing {target}: {exc.strerror or exc}") from None
    finally:
        await _guest_rm(host, name, SAVE_DIR)
        if was_running:
            await guest.resume(host, name, report)
        else:
            report(Phase(f"stopping {name} again"))
            await host.engine.stop(name)
            guest.note_quiesced(0)
    if verify_after:
        try:
            await verify(target, passphrase=passphrase, report=report)
        except asyncio.CancelledError:
            raise Cancelled(
                f"cancelled while verifying: {target} is complete but not verified; "
                f"check it with: hbtui verify {target}"
            ) from None
    await boxes.registry.update(name, host_name, last_save=utc_now())
    report(Phase(f"saved {name} to {target}"))
    return target


async def _save_parts(
    host: Host,
    name: str,
    target: Path,
    passphrase: bytes,
    part_bytes: int,
    lease: guest.Lease,
    paths: Paths,
    report: Report,
) -> None:
    report(Phase("packing /data (tar | zstd) and encrypting it part by part"))
    total_box: list[int | None] = [None]
    read = [0]

    def progress(done: int) -> None:
        report(Transfer(max(done, read[0]), total_box[0], "saving"))

    stream = host.engine.exec_stream(name, ["bash", "-c", _save_script(part_bytes)], timeout=None)
    with scratch(paths, "save") as tmp:
        local_part = tmp / "part"
        from hbtui.archive.format import create_archive

        with create_archive(target, passphrase) as enc:
            async for line in stream:
                if READ_TAG in line:  # tar prefixes its checkpoint echo with "tar: "
                    word = line.split(READ_TAG, 1)[1].split()
                    if word[:1] == ["total"]:
                        total_box[0] = int(word[1])
                    elif word and word[0].isdigit():
                        read[0] = int(word[0]) * RECORD_BYTES
                        progress(enc.plaintext_bytes)
                elif line.startswith(PART_TAG):
                    _, guest_part, _size = line.split()
                    async with asyncio.timeout(PART_TIMEOUT):
                        await host.engine.cp_out(name, guest_part, local_part)
                    await asyncio.to_thread(_feed_file, enc, local_part)
                    local_part.unlink()
                    await host.engine.exec(name, ["rm", "-f", "--", guest_part], timeout=60)
                    progress(enc.plaintext_bytes)
                elif line.strip():
                    report(Notice(f"guest: {line.strip()}"))
            if stream.returncode:
                raise SaveFailed(
                    f"packing /data in {name} failed (exit status {stream.returncode})"
                )
            # All of /data is read: tar's last checkpoint (or the compressed stream, for a
            # /data too small to reach one) counted less, and the bar stopped there.
            read[0] = total_box[0] or max(read[0], enc.plaintext_bytes)
            progress(read[0])
            lease.check()  # services that came back mid-save make an inconsistent archive
            await asyncio.to_thread(enc.finish)


def _feed_file(enc: Encryptor, path: Path) -> None:
    with open(path, "rb", buffering=0) as fh:
        enc.feed_from(fh)


async def verify(archive: Path, *, passphrase: bytes, report: Report = ignore) -> int:
    """Authenticate every chunk of an .hbx archive without writing plaintext."""
    from hbtui.archive.format import verify_file

    archive = Path(archive).expanduser().absolute()
    if archive_kind(archive) != HBX:
        raise UsageError(
            f"{archive}: verify checks .hbx archives; extract an old backup to check it"
        )
    size = archive.stat().st_size
    progress = _from_thread(report, size, "verifying")

    # The work starts first: rendering the first event may take a while (a front
    # end loading its progress display), and the KDF in the thread overlaps that.
    work = asyncio.ensure_future(asyncio.to_thread(verify_file, archive, passphrase, progress))
    report(Phase(f"verifying {archive.name}"))
    return await work


# -- load ------------------------------------------------------------------------------


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
        import threading

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


def _from_thread(report: Report, total: int, label: str) -> Callable[[int], None]:
    """A byte-progress callback for a worker thread: it reports on the event loop's
    thread, and only every 1/PROGRESS_STEPS of `total` (and at the end)."""
    loop = asyncio.get_running_loop()
    step = max(total // PROGRESS_STEPS, 1)
    last = [-step]

    def progress(done: int) -> None:
        if done - last[0] >= step or done >= total:
            last[0] = done
            loop.call_soon_threadsafe(report, Transfer(done, total, label))

    return progress


def archive_kind(archive: Path) -> str:
    """HBX or LEGACY; anything else (or no file) is a one-line error."""
    from hbtui.archive.format import is_hbx
    from hbtui.archive.legacy import is_legacy

    if not os.path.lexists(archive):
        raise UsageError(f"no such archive: {archive}")
    if not archive.is_file():
        raise UsageError(f"{archive} is not a file (a folder or a device?), so not an archive")
    if is_hbx(archive):
        return HBX
    if is_legacy(archive):
        return LEGACY
    raise UsageError(f"{archive} is neither an hbtui archive (.hbx) nor an old *.tar.gz.gpg backup")


def _check_contents(
    archive: Path, kind: str, passphrase: bytes, progress: Callable[[int], None]
) -> None:
    from hbtui.archive.legacy import validate_legacy
    from hbtui.archive.safetar import validate_hbx

    # Links to absolute paths (a venv's python -> /usr/bin/python3) are normal in a
    # box and resolve inside the guest; nothing is ever written through a link.
    if kind == HBX:
        validate_hbx(archive, passphrase, progress=progress, allow_external_symlinks=True)
    else:
        validate_legacy(archive, passphrase, allow_external_symlinks=True)


def _write_plaintext(archive: Path, kind: str, passphrase: bytes, sink: _PartSink) -> None:
    """Decrypt into the sink (compressed tar: zstd for .hbx, gzip for legacy)."""
    from hbtui.archive.format import Decryptor
    from hbtui.archive.legacy import decrypt_legacy
    from hbtui.archive.safetar import DecryptedReader

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
    report: Report = ignore,
) -> BoxView:
    check_name(name)
    archive = Path(archive).expanduser().absolute()
    kind = archive_kind(archive)
    if boxes.registry.read().get(name, host_name) is not None:
        raise UsageError(f"a box named {name!r} already exists (see: hbtui ls)")
    size = archive.stat().st_size
    progress = _from_thread(report, size, "checking")

    report(Phase(f"decrypting and checking {archive.name} before creating anything", Stage.CHECK))
    await asyncio.to_thread(_check_contents, archive, kind, passphrase, progress)

    view = await boxes.new(
        NewSpec(name, host=host_name, recipe=recipe), report=report, keep_provisioning=True
    )
    host = await boxes.hosts.get(host_name)
    try:
        async with guest.quiesced(host, name, report):
            await _restore_parts(boxes, host, name, archive, kind, passphrase, size, report)
        await guest.resume(host, name, report)
        if view.port:
            await guest.wait_ready(host, name, view.port, report)
        await boxes.registry.update(name, host_name, status=READY, owner_pid=0)
    except BaseException as exc:
        report(Notice(f"load failed; removing the new box {name}"))
        await asyncio.shield(_remove_quietly(boxes, name, host_name))
        if isinstance(exc, asyncio.CancelledError):
            raise Cancelled(f"cancelled: box {name!r} was removed") from None
        if isinstance(exc, OSError) and exc.filename is None:
            where = scratches.root(boxes.paths)
            raise LoadFailed(
                f"decrypting parts into {where}: {exc.strerror or exc}; box {name!r} was removed"
            ) from None
        raise
    report(Phase(f"loaded {archive.name} into {name}", Stage.DONE))
    return await boxes.get(name, host_name)


async def _remove_quietly(boxes: BoxOperations, name: str, host_name: str) -> None:
    try:
        await boxes.remove(name, host_name)
    except (HbtuiError, OSError):
        await boxes.registry.update(
            name,
            host_name,
            status=FAILED,
            owner_pid=0,
            error="load failed and the box could not be removed",
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
    part_bytes = boxes.config.archive.part_size_mib * 2**20
    decompress = "zstd -d -q -c" if kind == HBX else "gzip -d -c"
    # The payload size is in an .hbx header; an old gpg backup does not say.
    total = _payload_size(archive) if kind == HBX else None
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

    with scratch(boxes.paths, "load") as tmp:
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


# -- extract ---------------------------------------------------------------------------


async def extract(  # noqa: C901 (named in pyproject.toml)
    paths: Paths,
    archive: Path,
    dest: Path | None = None,
    *,
    passphrase: bytes,
    report: Report = ignore,
) -> Path:
    """Files only, no VM: unpack into DEST, which appears only if all verified."""
    from hbtui.archive.legacy import extract_legacy
    from hbtui.archive.safetar import extract_hbx

    archive = Path(archive).expanduser().absolute()
    kind = archive_kind(archive)
    if dest is None:
        base = archive.name
        for suffix in (ARCHIVE_SUFFIX, ".gpg", ".gz", ".tar"):
            base = base.removesuffix(suffix)
        dest = archive.with_name(f"{base}-extracted")
    dest = Path(dest).expanduser().absolute()
    if os.path.lexists(dest):
        raise UsageError(f"{dest} already exists; extract needs a new folder")
    if os.path.lexists(dest.parent) and not dest.parent.is_dir():
        raise UsageError(f"{dest.parent} is not a folder")
    if not dest.parent.is_dir():
        raise UsageError(f"folder {dest.parent} does not exist")
    size = archive.stat().st_size
    stop = threading.Event()
    forward = _from_thread(report, size, "extracting")

    def progress(done: int) -> None:
        if stop.is_set():
            raise Cancelled("extract cancelled")  # unwinds the extractor, which cleans up
        forward(done)

    def work() -> None:
        if kind == HBX:
            extract_hbx(archive, dest, passphrase, progress=progress)
        else:
            extract_legacy(archive, dest, passphrase)

    report(Phase(f"extracting {archive.name} into {dest}"))
    with staged_beside(paths, dest):  # a SIGKILL leaves staged plaintext: the next run sweeps it
        running = asyncio.ensure_future(asyncio.to_thread(work))
        try:
            await asyncio.shield(running)
        except asyncio.CancelledError:
            # The thread cannot be killed: stop it at its next chunk, wait for it, and
            # remove the folder if it got as far as renaming it into place.
            stop.set()
            with contextlib.suppress(Exception):
                await running
            if os.path.lexists(dest):
                shutil.rmtree(dest, ignore_errors=True)
            raise
        except OSError as exc:
            if exc.filename is not None:
                raise
            raise HbtuiError(f"extracting into {dest}: {exc.strerror or exc}") from None
    return dest


# -- info ------------------------------------------------------------------------------


def _payload_size(archive: Path) -> int | None:
    from hbtui.archive.format import read_header

    return read_header(archive).plaintext_size


def archive_info(archive: Path) -> dict[str, object]:
    """An .hbx archive's header, readable without the passphrase."""
    from hbtui.archive.format import read_header

    archive = Path(archive).expanduser().absolute()
    if archive_kind(archive) != HBX:
        raise UsageError(f"{archive} is an old gpg backup; it has no hbtui header")
    info = read_header(archive)
    return {
        "format_version": info.version,
        "aead": info.aead,
        "kdf": info.kdf_name,
        "kdf_params": info.kdf.describe(),
        "chunk_size": info.chunk_size,
        "archive_size": info.archive_size,
        "payload_size": info.plaintext_size,
        "kdf_warning": info.kdf_warning,
    }
