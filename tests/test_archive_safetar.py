"""Safe extraction: every refusal, all-or-nothing commits, HBX payloads through zstd."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from hbtui.archive import format as F
from hbtui.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveTruncated,
    UnsafeArchive,
    WrongPassphrase,
)
from hbtui.archive.safetar import extract_hbx, extract_tar, pack_dir, validate_hbx, validate_tar

KDF = F.ScryptParams(log_n=4, r=1, p=1)
PW = b"pw"
CS = 1024

needs_zstd = pytest.mark.skipif(shutil.which("zstd") is None, reason="zstd not installed")


def make_tar(entries) -> bytes:
    """entries: (name, type, data-or-linkname[, mode])"""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            name, kind, payload = e[:3]
            ti = tarfile.TarInfo(name)
            ti.mode = e[3] if len(e) > 3 else (0o755 if kind == "dir" else 0o644)
            ti.mtime = 1_700_000_000
            if kind == "file":
                ti.size = len(payload)
                tf.addfile(ti, io.BytesIO(payload))
                continue
            ti.type = {
                "dir": tarfile.DIRTYPE,
                "sym": tarfile.SYMTYPE,
                "hard": tarfile.LNKTYPE,
                "chr": tarfile.CHRTYPE,
                "blk": tarfile.BLKTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            if kind in ("sym", "hard"):
                ti.linkname = payload
            tf.addfile(ti)
    return buf.getvalue()


GOOD = [
    ("./", "dir", None),
    ("a", "dir", None),
    ("a/f.txt", "file", b"hello\n"),
    ("a/exec", "file", b"#!/bin/sh\n", 0o4755),
    ("a/b", "dir", None, 0o555),
    ("a/b/up", "sym", "../f.txt"),
    ("a/self", "sym", "."),
    ("top", "sym", "a/b/up"),
    ("a/hard", "hard", "a/f.txt"),
    ("dangling", "sym", "nowhere/x"),
]

BAD = {
    "absolute path": [("/etc/evil", "file", b"x")],
    "dotdot": [("a/../../evil", "file", b"x")],
    "dotdot dir": [("..", "dir", None)],
    "absolute symlink": [("l", "sym", "/etc/passwd")],
    "escaping symlink": [("a", "dir", None), ("a/l", "sym", "../../x")],
    "escape through another symlink": [("s", "sym", "."), ("t", "sym", "s/..")],
    "later symlink redirects an earlier one": [
        ("d", "dir", None),
        ("t", "sym", "d/x/.."),
        ("d/x", "sym", ".."),
    ],
    "write through symlink": [("d", "dir", None), ("l", "sym", "d"), ("l/f", "file", b"x")],
    "write through symlink to outside": [("l", "sym", "/tmp"), ("l/f", "file", b"x")],
    "hardlink outside": [("h", "hard", "../etc/passwd")],
    "hardlink absolute": [("h", "hard", "/etc/passwd")],
    "hardlink to nothing": [("h", "hard", "missing")],
    "hardlink to symlink": [("s", "sym", "x"), ("h", "hard", "s")],
    "char device": [("dev", "chr", None)],
    "block device": [("dev", "blk", None)],
    "fifo": [("p", "fifo", None)],
    "file under a file": [("f", "file", b"x"), ("f/g", "file", b"y")],
    "file replaces dir": [("d", "dir", None), ("d", "file", b"x")],
    "dir replaces symlink": [("d", "sym", "x"), ("d", "dir", None)],
}


def contents(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            elif p.is_dir():
                out[rel] = ("dir", oct(p.stat().st_mode & 0o7777))
            else:
                out[rel] = ("file", p.read_bytes(), oct(p.stat().st_mode & 0o7777))
    return out


def test_good_tar_extracts(tmp_path):
    dest = tmp_path / "out"
    s = extract_tar(io.BytesIO(make_tar(GOOD)), dest)
    c = contents(dest)
    assert c["a/f.txt"] == ("file", b"hello\n", "0o644")
    assert c["a/exec"][2] == "0o755"  # setuid dropped
    assert c["a/b"] == ("dir", "0o555")
    assert c["a/b/up"] == ("link", "../f.txt") and c["top"] == ("link", "a/b/up")
    assert (dest / "top").read_bytes() == b"hello\n"
    assert os.stat(dest / "a/hard").st_ino == os.stat(dest / "a/f.txt").st_ino
    assert (s.files, s.hardlinks, s.symlinks) == (2, 1, 4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert validate_tar(io.BytesIO(make_tar(GOOD))) == s


@pytest.mark.parametrize("name", list(BAD))
def test_refusals(tmp_path, name):
    data = make_tar(BAD[name])
    dest = tmp_path / "out"
    with pytest.raises(UnsafeArchive) as ei:
        extract_tar(io.BytesIO(data), dest)
    assert "\n" not in str(ei.value)
    assert list(tmp_path.iterdir()) == []  # no destination, no temporary folder
    with pytest.raises(UnsafeArchive):
        validate_tar(io.BytesIO(data))


def test_external_symlinks_allowed_on_request(tmp_path):
    data = make_tar([("venv", "dir", None), ("venv/python", "sym", "/usr/bin/python3")])
    extract_tar(io.BytesIO(data), tmp_path / "out", allow_external_symlinks=True)
    assert os.readlink(tmp_path / "out/venv/python") == "/usr/bin/python3"
    # still never written through
    bad = make_tar([("l", "sym", "/tmp"), ("l/f", "file", b"x")])
    with pytest.raises(UnsafeArchive):
        extract_tar(io.BytesIO(bad), tmp_path / "out2", allow_external_symlinks=True)


def test_existing_destination_refused(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(ArchiveError):
        extract_tar(io.BytesIO(make_tar(GOOD)), tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []


def test_truncated_tar_leaves_nothing(tmp_path):
    data = make_tar([("f", "file", os.urandom(5000))])
    with pytest.raises(ArchiveCorrupt):
        extract_tar(io.BytesIO(data[:3000]), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


# --- HBX archives (zstd payload) ---------------------------------------------------


def zstd(data: bytes) -> bytes:
    return subprocess.run(
        ["zstd", "-q", "-c"], input=data, stdout=subprocess.PIPE, check=True
    ).stdout


def hbx(tar_bytes: bytes, path: Path) -> bytes:
    out = io.BytesIO()
    F.encrypt_stream(io.BytesIO(zstd(tar_bytes)), out, PW, chunk_size=CS, kdf=KDF)
    path.write_bytes(out.getvalue())
    return out.getvalue()


@needs_zstd
def test_hbx_round_trip_with_pack_dir(tmp_path):
    src = tmp_path / "src"
    extract_tar(io.BytesIO(make_tar(GOOD)), src)
    (src / "big.bin").write_bytes(os.urandom(300_000))
    arc = tmp_path / "box.hbx"
    pack_dir(src, arc, PW, chunk_size=CS, kdf=KDF)
    assert (arc.stat().st_mode & 0o777) == 0o600
    s = validate_hbx(arc, PW)
    assert s.files == 3
    extract_hbx(arc, tmp_path / "out", PW)
    assert contents(tmp_path / "out") == contents(src)


@needs_zstd
def test_hbx_unsafe_payload_refused(tmp_path):
    arc = tmp_path / "a.hbx"
    hbx(make_tar(BAD["escaping symlink"]), arc)
    with pytest.raises(UnsafeArchive):
        extract_hbx(arc, tmp_path / "out", PW)
    with pytest.raises(UnsafeArchive):
        validate_hbx(arc, PW)
    assert [p.name for p in tmp_path.iterdir()] == ["a.hbx"]


@needs_zstd
@pytest.mark.parametrize(
    "damage",
    ["truncate_boundary", "truncate_mid", "flip_middle", "flip_last", "trailing", "wrong_pw"],
)
def test_hbx_damage_leaves_no_destination(tmp_path, damage):
    tar_bytes = make_tar([("f", "file", os.urandom(20_000)), ("g", "file", b"tail")])
    arc = tmp_path / "a.hbx"
    a = hbx(tar_bytes, arc)
    n_chunks = -(-(len(a) - F.HEADER_SIZE) // (CS + F.TAG_SIZE))
    assert n_chunks >= 4
    pw = PW
    expected: type[ArchiveError] = ArchiveCorrupt
    if damage == "truncate_boundary":
        arc.write_bytes(a[: F.HEADER_SIZE + (n_chunks - 1) * (CS + F.TAG_SIZE)])
        expected = ArchiveTruncated
    elif damage == "truncate_mid":
        arc.write_bytes(a[:-5])
    elif damage == "flip_middle":
        b = bytearray(a)
        b[F.HEADER_SIZE + 2 * (CS + F.TAG_SIZE) + 7] ^= 1
        arc.write_bytes(bytes(b))
    elif damage == "flip_last":
        b = bytearray(a)
        b[-1] ^= 1
        arc.write_bytes(bytes(b))
    elif damage == "trailing":
        arc.write_bytes(a + b"\x00" * 40)
    elif damage == "wrong_pw":
        pw = b"nope"
        expected = WrongPassphrase
    with pytest.raises(expected):
        extract_hbx(arc, tmp_path / "out", pw)
    with pytest.raises(expected):
        validate_hbx(arc, pw)
    assert [p.name for p in tmp_path.iterdir()] == ["a.hbx"]


@needs_zstd
def test_hbx_payload_not_zstd(tmp_path):
    arc = tmp_path / "a.hbx"
    out = io.BytesIO()
    F.encrypt_stream(io.BytesIO(b"plain text, not zstd" * 100), out, PW, chunk_size=CS, kdf=KDF)
    arc.write_bytes(out.getvalue())
    with pytest.raises(ArchiveCorrupt):
        extract_hbx(arc, tmp_path / "out", PW)
    assert [p.name for p in tmp_path.iterdir()] == ["a.hbx"]
