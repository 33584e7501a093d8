"""Archives as the front ends reach them (`service.archives`): a box's /data saved into an
.hbx and loaded back (each holding its box), extract and verify, and the backups folder
as a list to pick from.
"""

from __future__ import annotations

from pathlib import Path

from hbtui.core.archives import backups, carried
from hbtui.core.archives.backups import ArchiveEntry
from hbtui.core.archives.carried import Carrier
from hbtui.core.boxes.guard import Guard
from hbtui.core.boxes.operations import BoxOperations
from hbtui.core.foundation.specs import LoadSpec, SaveSpec
from hbtui.core.foundation.views import BoxView
from hbtui.errors import UsageError
from hbtui.events import Report, ignore

# hbtui.core.archives (files, save, load) load on first use: a verb like `ls` should not
# pay for tar, tempfile or the archive format at start-up.


class Archives:
    """Save, load, extract, verify, and the backups folder."""

    def __init__(self, ops: BoxOperations, carrier: Carrier | None = None) -> None:
        """`carrier`: the feature whose records travel with a box's archive (its work)."""
        self._ops = ops
        self._carrier = carrier
        self._paths = ops.core.paths
        self._config = ops.core.config
        self._guard = Guard(ops.core)

    def folder(self) -> Path:
        """The backups folder: where a save writes and a relative archive is looked for."""
        return self._config.backups_dir(self._paths)

    def kind(self, archive: Path, *, hbx_only: bool = False) -> str:
        """Whether a file is an .hbx archive ("hbx") or an old *.tar.gz.gpg ("legacy");
        a one-line error for anything else, and with `hbx_only` for an old backup too."""
        from hbtui.core.archives import files as archives

        path = Path(archive).expanduser().absolute()
        kind = archives.archive_kind(path)
        if hbx_only and kind != archives.HBX:
            raise UsageError(
                f"{path} is an old gpg backup; verify checks .hbx archives (extract it to check it)"
            )
        return kind

    def info(self, archive: Path) -> dict[str, object]:
        """What an archive's header says, read without its passphrase."""
        from hbtui.core.archives import files as archives

        return archives.archive_info(archive)

    def listing(self) -> list[ArchiveEntry]:
        """The backups folder's archives to pick from, newest first."""
        return backups.list_archives(self._paths, self.folder())

    def resolve(self, text: str) -> Path:
        """A typed archive path; a relative one is looked for in the backups folder first."""
        return backups.resolve_archive(text, self.folder())

    def last(self) -> Path | None:
        """The archive picked last in a Load or Extract (in any run), if it is still there:
        what "last archive" means everywhere (a box's newest save is `newest_archive`)."""
        return backups.last_choice(self._paths)

    def remember(self, archive: Path) -> None:
        """Note the archive picked, for the next Load or Extract to offer first."""
        backups.remember_choice(self._paths, archive)

    def output_problem(self, output: Path) -> str | None:
        """What stops a save writing its archive at `output` (None: nothing)."""
        from hbtui.core.archives import save as archive_save

        return archive_save.output_problem(Path(output).expanduser().absolute())

    async def save(self, spec: SaveSpec, *, passphrase: bytes, report: Report = ignore) -> Path:
        """The box's /data into an encrypted archive, the box held meanwhile."""
        from hbtui.core.archives import save as archive_save

        async with self._guard.holding(spec.name, spec.host, "save"):
            note = {} if self._carrier is None else self._carrier.note(spec.host, spec.name, report)
            saved = await archive_save.save(
                self._ops.core,
                spec.name,
                spec.host,
                output=spec.output,
                passphrase=passphrase,
                note=carried.encode(note),
                verify_after=spec.verify,
                report=report,
            )
        if spec.verify:
            backups.mark_verified(self._paths, saved)
        return saved

    async def load(self, spec: LoadSpec, *, passphrase: bytes, report: Report = ignore) -> BoxView:
        """A new box made from an archive, its /data put back."""
        from hbtui.core.archives import load as archive_load

        async with self._guard.holding(spec.name, spec.host, "load"):
            return await archive_load.load(
                self._ops,
                spec.archive,
                spec.name,
                spec.host,
                passphrase=passphrase,
                recipe=spec.recipe,
                carrier=self._carrier,
                repo=spec.repo,
                report=report,
            )

    async def extract(
        self, archive: Path, dest: Path | None = None, *, passphrase: bytes, report: Report = ignore
    ) -> Path:
        """An archive's files unpacked into a folder on this machine (no box)."""
        from hbtui.core.archives import files as archives

        return await archives.extract(
            self._paths, archive, dest, passphrase=passphrase, report=report
        )

    async def verify(self, archive: Path, *, passphrase: bytes, report: Report = ignore) -> int:
        """Every chunk of an .hbx archive authenticated; returns its payload's size."""
        from hbtui.core.archives import files as archives

        checked = await archives.verify(archive, passphrase=passphrase, report=report)
        backups.mark_verified(self._paths, archive)
        return checked
