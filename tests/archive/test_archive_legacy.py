"""Old `box` backups (.tar.gz.gpg): made with gpg here, read back safely."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from hbtui.archive import legacy
from hbtui.archive.errors import ArchiveCorrupt, ArchiveError, UnsafeArchive, WrongPassphrase

pytestmark = pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg not installed")

PW = b"old box passphrase"


@pytest.fixture(autouse=True)
def gnupg_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.mktemp("gnupg")
    os.chmod(home, 0o700)
    monkeypatch.setenv("GNUPGHOME", str(home))
    yield home
    subprocess.run(
        ["gpgconf", "--kill", "gpg-agent"],
        env={**os.environ, "GNUPGHOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def make_backup(src: Path, out: Path, pw: bytes = PW) -> None:
    """Exactly the old tool's pipeline: tar czf | gpg --symmetric, passphrase on fd 3."""
    r, w = os.pipe()
    os.write(w, pw + b"\n")
    os.close(w)
    tar = subprocess.Popen(["tar", "-C", str(src), "-czf", "-", "."], stdout=subprocess.PIPE)
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
            "--passphrase-fd",
            str(r),
            "--symmetric",
            "--cipher-algo",
            "AES256",
            "-o",
            str(out),
        ],
        stdin=tar.stdout,
        pass_fds=(r,),
        check=True,
        stderr=subprocess.DEVNULL,
    )
    os.close(r)
    assert tar.wait() == 0


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "src"
    (src / "proj/sub").mkdir(parents=True)
    (src / "proj/a.txt").write_text("alpha\n")
    (src / "proj/sub/bin").write_bytes(os.urandom(200_000))
    os.symlink("../a.txt", src / "proj/sub/link")
    return src


def test_round_trip(tmp_path, tree):
    backup = tmp_path / "box.tar.gz.gpg"
    make_backup(tree, backup)
    assert legacy.is_legacy(backup)
    assert legacy.validate_legacy(backup, PW).files == 2
    legacy.extract_legacy(backup, tmp_path / "out", PW)
    assert (tmp_path / "out/proj/a.txt").read_text() == "alpha\n"
    assert (tmp_path / "out/proj/sub/bin").read_bytes() == (tree / "proj/sub/bin").read_bytes()
    assert os.readlink(tmp_path / "out/proj/sub/link") == "../a.txt"


def test_wrong_passphrase_leaves_nothing(tmp_path, tree):
    backup = tmp_path / "box.tar.gz.gpg"
    make_backup(tree, backup)
    with pytest.raises(WrongPassphrase) as ei:
        legacy.extract_legacy(backup, tmp_path / "out", b"not it")
    assert "wrong passphrase" in str(ei.value)
    with pytest.raises(WrongPassphrase):
        legacy.validate_legacy(backup, b"not it")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box.tar.gz.gpg", "src"]


def test_tampered_backup_leaves_nothing(tmp_path, tree):
    backup = tmp_path / "box.tar.gz.gpg"
    make_backup(tree, backup)
    data = bytearray(backup.read_bytes())
    data[len(data) // 2] ^= 0x01
    backup.write_bytes(bytes(data))
    with pytest.raises(ArchiveError):
        legacy.extract_legacy(backup, tmp_path / "out", PW)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box.tar.gz.gpg", "src"]


def test_truncated_backup_leaves_nothing(tmp_path, tree):
    backup = tmp_path / "box.tar.gz.gpg"
    make_backup(tree, backup)
    backup.write_bytes(backup.read_bytes()[:-30])
    with pytest.raises(ArchiveCorrupt):
        legacy.extract_legacy(backup, tmp_path / "out", PW)
    assert not (tmp_path / "out").exists()


def test_unsafe_legacy_payload_refused(tmp_path):
    src = tmp_path / "evil"
    src.mkdir()
    os.symlink("/etc/passwd", src / "pw")
    backup = tmp_path / "evil.tar.gz.gpg"
    make_backup(src, backup)
    with pytest.raises(UnsafeArchive):
        legacy.extract_legacy(backup, tmp_path / "out", PW)
    assert not (tmp_path / "out").exists()


def test_passphrase_never_in_argv_or_env(tmp_path, tree, monkeypatch):
    backup = tmp_path / "box.tar.gz.gpg"
    make_backup(tree, backup)
    seen = []
    real = subprocess.Popen

    def spy(args, *a, **kw):
        seen.append((list(args), dict(kw.get("env") or {})))
        return real(args, *a, **kw)

    monkeypatch.setattr(legacy.subprocess, "Popen", spy)
    monkeypatch.setenv("HBTUI_PASSPHRASE", PW.decode())
    legacy.extract_legacy(backup, tmp_path / "out", PW)
    assert seen
    for argv, env in seen:
        assert not any(PW.decode() in x for x in argv)
        assert "HBTUI_PASSPHRASE" not in env and PW.decode() not in env.values()


def test_not_a_gpg_file(tmp_path):
    f = tmp_path / "x.tar.gz.gpg"
    f.write_bytes(b"hello world" * 10)
    assert not legacy.is_legacy(f)
    with pytest.raises(ArchiveError):
        legacy.extract_legacy(f, tmp_path / "out", PW)
    assert not (tmp_path / "out").exists()


def encrypt_bytes(data: bytes, out: Path, pw: bytes = PW) -> None:
    """The old tool's gpg step over given bytes (a hand-made .tar.gz)."""
    r, w = os.pipe()
    os.write(w, pw + b"\n")
    os.close(w)
    subprocess.run(
        [
            "gpg",
            "--batch",
            "--yes",
            "--pinentry-mode",
            "loopback",
            "--passphrase-fd",
            str(r),
            "--symmetric",
            "--cipher-algo",
            "AES256",
            "-o",
            str(out),
        ],
        input=data,
        pass_fds=(r,),
        check=True,
        stderr=subprocess.DEVNULL,
    )
    os.close(r)


def test_root_entry_never_loosens_the_destination(tmp_path, tree):
    os.chmod(tree, 0o1777)  # the backup's `./` entry says 1777
    backup = tmp_path / "box.tar.gz.gpg"
    make_backup(tree, backup)
    assert legacy.validate_legacy(backup, PW, allow_external_symlinks=True).files == 2
    legacy.extract_legacy(backup, tmp_path / "out", PW)
    st = os.lstat(tmp_path / "out")
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())


def _tar(name: str, data: bytes) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        tf.addfile(ti, io.BytesIO(data))
    return buf.getvalue()


def test_data_after_the_tar_end_refused(tmp_path):
    backup = tmp_path / "box.tar.gz.gpg"
    encrypt_bytes(gzip.compress(_tar("f", b"x") + _tar("smuggled", b"hidden")), backup)
    with pytest.raises(ArchiveCorrupt):
        legacy.validate_legacy(backup, PW)
    with pytest.raises(ArchiveCorrupt):
        legacy.extract_legacy(backup, tmp_path / "out", PW)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box.tar.gz.gpg"]
    ok = tmp_path / "ok.tar.gz.gpg"
    encrypt_bytes(gzip.compress(_tar("f", b"x") + bytes(4096)), ok)  # zeros are fine
    legacy.extract_legacy(ok, tmp_path / "out", PW)
    assert (tmp_path / "out/f").read_bytes() == b"x"
