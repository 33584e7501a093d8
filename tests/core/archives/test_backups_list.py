"""The backups folder as a list (hbtui.core.archives.backups through the Service): newest first,
verified marks that a changed file loses, the last choice kept across runs, relative
paths found in the backups folder first."""

from __future__ import annotations

import os

import pytest

from hbtui.archive.header import MAGIC
from hbtui.core.archives.backups import box_of
from hbtui.core.foundation.specs import NewSpec, SaveSpec
from hbtui.wiring import build_service

from support import SIM_RECIPE


@pytest.fixture
def service(hbtui_home):
    return build_service()


def fake_archive(folder, name: str, mtime: int, size: int = 64):
    """A file that starts like an .hbx (the listing reads only the magic)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(MAGIC + b"\0" * (size - len(MAGIC)))
    os.utime(path, (mtime, mtime))
    return path


def test_the_listing_is_newest_first_with_box_size_and_format(service):
    folder = service.archives.folder()
    older = fake_archive(folder, "web-20261101T100000Z.hbx", 1_780_000_000, size=100)
    newer = fake_archive(folder, "api-20261128T180000Z.hbx", 1_790_000_000, size=200)
    (folder / "notes.txt").write_text("not an archive")
    (folder / "broken.hbx").write_text("no magic here")
    entries = service.archives.listing()
    assert [e.path for e in entries] == [newer, older]
    first = entries[0]
    assert (first.box, first.size, first.kind, first.verified) == ("api", 200, "hbx", False)
    assert first.modified == "2026-09-21T14:13:20Z"


def test_no_backups_folder_is_an_empty_list(service):
    assert not service.archives.folder().exists()
    assert service.archives.listing() == []


def test_a_verified_mark_holds_until_the_file_changes(service):
    from hbtui.core.archives import backups

    path = fake_archive(service.archives.folder(), "web-20261101T100000Z.hbx", 1_780_000_000)
    backups.mark_verified(service.paths, path)
    assert [e.verified for e in service.archives.listing()] == [True]
    with path.open("ab") as fh:
        fh.write(b"more")
    assert [e.verified for e in service.archives.listing()] == [False]


def test_the_last_choice_is_remembered_across_services(hbtui_home, service):
    path = fake_archive(service.archives.folder(), "web-20261101T100000Z.hbx", 1_780_000_000)
    assert service.archives.last() is None
    service.archives.remember(path)
    assert build_service().archives.last() == path
    path.unlink()
    assert build_service().archives.last() is None  # a vanished choice is not offered


def test_a_damaged_memory_file_is_forgotten_not_fatal(hbtui_home, service):
    (hbtui_home / "archives.toml").write_text("last = [")
    assert service.archives.last() is None
    path = fake_archive(service.archives.folder(), "web-20261101T100000Z.hbx", 1_780_000_000)
    service.archives.remember(path)
    assert service.archives.last() == path


def test_relative_paths_are_found_in_the_backups_folder_first(service, tmp_path, monkeypatch):
    path = fake_archive(service.archives.folder(), "web.hbx", 1_780_000_000)
    monkeypatch.chdir(tmp_path)
    assert service.archives.resolve("web.hbx") == path
    assert service.archives.resolve("elsewhere.hbx") == tmp_path / "elsewhere.hbx"
    assert service.archives.resolve(str(tmp_path / "x.hbx")) == tmp_path / "x.hbx"


@pytest.mark.parametrize(
    "name, box",
    [
        ("web-20261101T100000Z.hbx", "web"),
        ("my-box-2-20261101T100000Z.hbx", "my-box-2"),
        ("web.hbx", ""),
        ("Backup-20261101T100000Z.hbx", ""),
    ],
)
def test_the_box_comes_from_the_default_file_name(name, box):
    assert box_of(name) == box


@pytest.mark.sim
def test_save_and_verify_mark_the_archive_verified(sim_service):
    """The real flow: save with verify marks the archive; the listing says so."""
    import asyncio

    async def flow():
        await sim_service.new(NewSpec("keep", recipe=SIM_RECIPE))
        saved = await sim_service.archives.save(SaveSpec("keep"), passphrase=b"correct horse")
        unverified = await sim_service.archives.save(
            SaveSpec("keep", verify=False), passphrase=b"correct horse"
        )
        listed = {e.path: e.verified for e in sim_service.archives.listing()}
        assert listed == {saved: True, unverified: False}
        await sim_service.archives.verify(unverified, passphrase=b"correct horse")
        assert all(e.verified for e in sim_service.archives.listing())
        await sim_service.remove("keep")

    asyncio.run(flow())
