"""Safe extraction: every refusal, all-or-nothing commits, HBX payloads through zstd."""

from __future__ import annotations

import io
import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from hbtui.archive import header as AH
from hbtui.archive import kdf as AK
from hbtui.archive import stream as AS
from hbtui.archive import tarpolicy
from hbtui.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveTruncated,
    UnsafeArchive,
    WrongPassphrase,
)
from hbtui.archive.hbxtar import extract_hbx, pack_dir, validate_hbx
from hbtui.archive.safetar import extract_tar
from hbtui.archive.tarpolicy import DIR_MODE_BITS, FILE_MODE_BITS, ROOT_MODE, validate_tar

from support.cli import hbtui

KDF = AK.ScryptParams(log_n=4, r=1, p=1)
PW = b"pw"
CS = 1024

needs_zstd = pytest.mark.skipif(shutil.which("zstd") is None, reason="zstd not installed")


def make_tar(entries) -> bytes:
    """entries: (name, type, data-or-linkname[, mode[, {TarInfo attribute: value}]])"""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            name, kind, payload = e[:3]
            ti = tarfile.TarInfo(name)
            ti.mode = e[3] if len(e) > 3 else (0o755 if kind == "dir" else 0o644)
            ti.mtime = 1_700_000_000
            for attr, value in (e[4] if len(e) > 4 else {}).items():
                setattr(ti, attr, value)
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
                "unknown": b"Z",
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
    "file named as the root": [(".", "file", b"x")],
    "symlink named as the root": [("./", "sym", "a")],
    "hardlink to itself": [("h", "file", b"x"), ("h", "hard", "h")],
    "hardlink to a directory": [("d", "dir", None), ("h", "hard", "d")],
    "hardlink to a later file": [("h", "hard", "f"), ("f", "file", b"x")],
    "symlink loop": [("a", "sym", "b"), ("b", "sym", "a")],
    "unknown entry type": [("z", "unknown", None)],
    "refusal after good entries": [*GOOD, ("/etc/evil", "file", b"x")],
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


def test_links_leading_outside_are_left_out_and_named_the_rest_extracted(tmp_path):
    """`hbtui extract` of a box with a venv (its python -> /usr/bin/python3) refused the
    whole archive; such links are now left out, each named, and all else extracted."""
    data = make_tar([
        ("venv", "dir", None),
        ("venv/python", "sym", "/usr/bin/python3"),
        ("venv/up", "sym", "../../x"),
        ("venv/here", "sym", "python"),  # leads through a left-out link: followed, left out
        ("venv/f.txt", "file", b"kept"),
        ("ok", "sym", "venv/f.txt"),
        ("x", "file", b"old"),
        ("x", "sym", "/etc"),  # replaces the file with nothing
    ])  # fmt: skip
    s = extract_tar(io.BytesIO(data), tmp_path / "out", leave_out_external=True)
    assert contents(tmp_path / "out") == {
        "venv": ("dir", "0o755"),
        "venv/f.txt": ("file", b"kept", "0o644"),
        "ok": ("link", "venv/f.txt"),
    }
    assert s.left_out == [
        ("venv/python", "/usr/bin/python3"),
        ("venv/up", "../../x"),
        ("venv/here", "python"),
        ("x", "/etc"),
    ]
    assert s.symlinks == 1
    # Nothing is ever written through one either.
    bad = make_tar([("l", "sym", "/tmp"), ("l/f", "file", b"x")])
    with pytest.raises(UnsafeArchive):
        extract_tar(io.BytesIO(bad), tmp_path / "out2", leave_out_external=True)


@needs_zstd
def test_hbtui_extract_of_a_box_with_a_venv_leaves_its_python_out_and_says_so(tmp_path, hbtui_home):
    """The user's view: the archive of a /data holding a venv extracts, exit 0, and one
    notice names the link left out (it said "refusing symlink ..." and made nothing)."""
    src = tmp_path / "data"
    (src / "home/agent/venv/bin").mkdir(parents=True)
    (src / "home/agent/notes.txt").write_text("mine\n")
    os.symlink("/usr/bin/python3", src / "home/agent/venv/bin/python3")
    arc = tmp_path / "box.hbx"
    pack_dir(src, arc, b"a passphrase")
    done = hbtui("extract", str(arc), str(tmp_path / "out"), env=dict(os.environ),
                 passphrase="a passphrase")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "out/home/agent/notes.txt").read_text() == "mine\n"
    assert not os.path.lexists(tmp_path / "out/home/agent/venv/bin/python3")
    said = " ".join((done.stdout + done.stderr).split())
    assert (
        "left out 1 symbolic link(s) leading outside the folder (they point into the box's "
        "own system): home/agent/venv/bin/python3 -> /usr/bin/python3"
    ) in said, said


def test_a_link_led_outside_by_a_later_one_is_taken_away(tmp_path):
    """A link inside when it came (t -> d/x/.., d/x not there yet) that a later link
    (d/x -> ..) leads outside: written, then taken away once the last entry is known."""
    data = make_tar([("d", "dir", None), ("t", "sym", "d/x/.."), ("d/x", "sym", "..")])
    s = extract_tar(io.BytesIO(data), tmp_path / "out", leave_out_external=True)
    assert contents(tmp_path / "out") == {"d": ("dir", "0o755"), "d/x": ("link", "..")}
    assert s.left_out == [("t", "d/x/..")]
    assert s.symlinks == 1


def test_a_link_no_disk_can_hold_is_refused_or_left_out_never_an_oserror(tmp_path):
    """An empty target, or one over PATH_MAX: os.symlink fails on both, and extract said
    'error: -> /…/.out.extract-…/c: No such file or directory' (its temporary folder)."""
    for target in ("", "a" * 5000):
        data = make_tar([("f", "file", b"x"), ("c", "sym", target)])
        with pytest.raises(UnsafeArchive, match="empty or over 4095 bytes"):
            extract_tar(io.BytesIO(data), tmp_path / "strict")
        out = tmp_path / f"left{len(target)}"
        s = extract_tar(io.BytesIO(data), out, leave_out_external=True)
        assert contents(out) == {"f": ("file", b"x", "0o644")}
        assert s.left_out == [("c", target)]


def test_following_links_is_bounded_for_the_whole_archive(tmp_path, monkeypatch):
    """Each check is bounded (40 hops), but a left-out loop costs every link that leads
    to it the 40 hops: 400 such links took 3.6 s, a million would take hours. The steps
    all checks take together are bounded; the archive is refused past them."""
    monkeypatch.setattr(tarpolicy, "_MAX_LINK_STEPS", 200_000)
    loop = "/".join(["x/.."] * 800 + ["l"])  # 1,601 steps a hop, back to itself
    data = make_tar([("l", "sym", loop)] + [(f"m{i}", "sym", "l") for i in range(3)])
    with pytest.raises(UnsafeArchive, match="too many times to follow"):
        extract_tar(io.BytesIO(data), tmp_path / "out", leave_out_external=True)
    assert not os.path.lexists(tmp_path / "out")
    # A real tree's links stay far below it.
    small = make_tar([("d", "dir", None)] + [(f"m{i}", "sym", "d/../d") for i in range(500)])
    assert extract_tar(io.BytesIO(small), tmp_path / "ok", leave_out_external=True).symlinks == 500


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
    AS.encrypt_stream(
        io.BytesIO(zstd(tar_bytes)), out, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True)
    )
    path.write_bytes(out.getvalue())
    return out.getvalue()


@needs_zstd
def test_hbx_round_trip_with_pack_dir(tmp_path):
    src = tmp_path / "src"
    extract_tar(io.BytesIO(make_tar(GOOD)), src)
    (src / "big.bin").write_bytes(os.urandom(300_000))
    arc = tmp_path / "box.hbx"
    pack_dir(src, arc, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True))
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
    n_chunks = -(-(len(a) - AH.HEADER_SIZE) // (CS + AH.TAG_SIZE))
    assert n_chunks >= 4
    pw = PW
    expected: type[ArchiveError] = ArchiveCorrupt
    if damage == "truncate_boundary":
        arc.write_bytes(a[: AH.HEADER_SIZE + (n_chunks - 1) * (CS + AH.TAG_SIZE)])
        expected = ArchiveTruncated
    elif damage == "truncate_mid":
        arc.write_bytes(a[:-5])
    elif damage == "flip_middle":
        b = bytearray(a)
        b[AH.HEADER_SIZE + 2 * (CS + AH.TAG_SIZE) + 7] ^= 1
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
    AS.encrypt_stream(
        io.BytesIO(b"plain text, not zstd" * 100),
        out,
        PW,
        sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True),
    )
    arc.write_bytes(out.getvalue())
    with pytest.raises(ArchiveCorrupt):
        extract_hbx(arc, tmp_path / "out", PW)
    assert [p.name for p in tmp_path.iterdir()] == ["a.hbx"]


# --- the destination itself (`./`) ------------------------------------------------

ROOT_NAMES = ["./", ".", "./.", ".//"]
LOOSE = {"mtime": 1, "uid": 4242, "gid": 4242}  # what a root entry must not apply


def root_archive(root_name: str, mode: int) -> bytes:
    """A tar naming the destination itself, first and again last, with a loose mode."""
    return make_tar(
        [
            (root_name, "dir", None, mode, LOOSE),
            ("a", "dir", None),
            ("a/f", "file", b"x"),
            (root_name, "dir", None, mode, LOOSE),
        ]
    )


def assert_root_untouched(dest: Path) -> None:
    st = os.lstat(dest)
    assert stat.S_IMODE(st.st_mode) == ROOT_MODE == 0o700
    assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
    assert st.st_mtime > 1_000_000_000  # now, not the archive's time 1


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o7777, 0o000], ids=oct)
@pytest.mark.parametrize("root_name", ROOT_NAMES)
def test_root_entry_never_loosens_the_destination(tmp_path, root_name, mode):
    data = root_archive(root_name, mode)
    dest = tmp_path / "out"
    s = extract_tar(io.BytesIO(data), dest)
    assert_root_untouched(dest)
    assert (dest / "a/f").read_bytes() == b"x"
    assert s.dirs == 1  # the root is not counted as an extracted directory
    assert validate_tar(io.BytesIO(data)) == s


def test_destination_mode_without_a_root_entry(tmp_path):
    extract_tar(io.BytesIO(make_tar([("f", "file", b"x")])), tmp_path / "out")
    assert_root_untouched(tmp_path / "out")


def test_destination_mode_whatever_the_umask(tmp_path):
    old = os.umask(0o777)
    try:
        extract_tar(io.BytesIO(root_archive("./", 0o777)), tmp_path / "out")
    finally:
        os.umask(old)
    assert_root_untouched(tmp_path / "out")


@needs_zstd
@pytest.mark.parametrize("mode", [0o777, 0o1777], ids=oct)
def test_root_entry_hbx_extract_and_load_validation(tmp_path, mode):
    arc = tmp_path / "a.hbx"
    hbx(root_archive("./", mode), arc)
    # `hbtui load` checks with validate_hbx (writing nothing) before it creates a box
    s = validate_hbx(arc, PW, allow_external_symlinks=True)
    assert (s.dirs, s.files) == (1, 1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.hbx"]
    # `hbtui extract`
    extract_hbx(arc, tmp_path / "out", PW)
    assert_root_untouched(tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.hbx", "out"]


@needs_zstd
def test_pack_dir_round_trip_keeps_destination_private(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    os.chmod(src, 0o1777)  # the archive's `./` says 1777
    pack_dir(src, tmp_path / "a.hbx", PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True))
    extract_hbx(tmp_path / "a.hbx", tmp_path / "out", PW)
    assert_root_untouched(tmp_path / "out")


# --- modes, owners, xattrs ----------------------------------------------------------


def test_modes_owners_and_xattrs(tmp_path):
    xattrs = {
        "SCHILY.xattr.user.hbtui": "x",
        "SCHILY.xattr.security.capability": "\x01\x00\x00\x02",
        "SCHILY.acl.access": "user::rwx,group::rwx,other::rwx",
    }
    owner = {"uid": 4242, "gid": 4242, "uname": "evil", "gname": "evil"}
    data = make_tar(
        [
            ("suid", "file", b"x", 0o4755, owner),
            ("sgid", "file", b"x", 0o2750, owner),
            ("sticky", "file", b"x", 0o1644),
            ("tagged", "file", b"x", 0o644, {"pax_headers": xattrs}),
            ("d-all", "dir", None, 0o7777, owner),
            ("d-sgid", "dir", None, 0o2755),
            ("d-sticky", "dir", None, 0o1777),
            ("d-none", "dir", None, 0o000),
        ]
    )
    dest = tmp_path / "out"
    extract_tar(io.BytesIO(data), dest)
    modes = {p.name: stat.S_IMODE(os.lstat(p).st_mode) for p in dest.iterdir()}
    assert modes == {
        "suid": 0o755,
        "sgid": 0o750,
        "sticky": 0o644,
        "tagged": 0o644,
        "d-all": 0o1777,  # setuid and setgid dropped; sticky kept
        "d-sgid": 0o755,
        "d-sticky": 0o1777,
        "d-none": 0o000,
    }
    assert FILE_MODE_BITS == 0o777 and DIR_MODE_BITS == 0o1777
    for p in dest.iterdir():
        st = os.lstat(p)
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())  # never chowned
    try:
        names = os.listxattr(dest / "tagged")
    except OSError:  # no xattr support here: nothing could have been applied
        names = []
    assert not [n for n in names if n in ("user.hbtui", "security.capability")]
    assert not [n for n in names if n.startswith("system.posix_acl")]
    os.chmod(dest / "d-none", 0o700)


# --- duplicates ------------------------------------------------------------------------


def test_duplicate_entries_last_one_wins_without_writing_through(tmp_path):
    outside = tmp_path / "outside"
    outside.write_bytes(b"untouched")
    data = make_tar(
        [
            ("f", "file", b"first"),
            ("h", "hard", "f"),
            ("f", "file", b"second"),  # replaces f; h keeps the first inode
            ("d", "dir", None, 0o755, {"mtime": 1_000_000_000}),
            ("d", "dir", None, 0o750, {"mtime": 1_100_000_000}),
            ("l", "sym", str(outside)),
            ("l", "file", b"not through the link"),  # replaces the link itself
            ("g", "file", b"a file first"),
            ("g", "sym", "f"),
        ]
    )
    dest = tmp_path / "out"
    s = extract_tar(io.BytesIO(data), dest, allow_external_symlinks=True)
    assert (dest / "f").read_bytes() == b"second"
    assert (dest / "h").read_bytes() == b"first"
    assert stat.S_IMODE(os.lstat(dest / "d").st_mode) == 0o750
    assert os.lstat(dest / "d").st_mtime == 1_100_000_000
    assert not (dest / "l").is_symlink() and (dest / "l").read_bytes() == b"not through the link"
    assert outside.read_bytes() == b"untouched"
    assert os.readlink(dest / "g") == "f"
    assert validate_tar(io.BytesIO(data), allow_external_symlinks=True) == s


# --- the end of the tar stream ------------------------------------------------------------


def _cut_marker(data: bytes) -> bytes:
    """The tar without its end-of-archive marker and padding (ends after the last entry)."""
    end = len(data)
    while end >= 512 and data[end - 512 : end] == bytes(512):
        end -= 512
    return data[:end]


def _flip_second_header(data: bytes) -> bytes:
    # PAX_FORMAT writes a PAX header only when needed: entries here are plain ustar.
    b = bytearray(data)
    second = 512 + 512  # header of "f" (512) and its one data block (512)
    assert b[second : second + 1] == b"g"
    b[second + 100] ^= 0x01  # inside the mode field: the checksum no longer matches
    return bytes(b)


TWO = make_tar([("f", "file", b"x" * 100), ("g", "file", b"y")])
SMUGGLED = make_tar([("smuggled", "file", b"hidden")])

TAR_ENDINGS = {
    "no end-of-archive marker": _cut_marker(TWO),
    "cut inside a header": _cut_marker(TWO) + b"\x00" * 100,
    "cut inside a header (non-zero)": _cut_marker(TWO) + SMUGGLED[:100],
    "damaged header after good entries": _flip_second_header(TWO),
    "a second tar after the end": TWO + SMUGGLED,
    "an entry after a lone zero block": _cut_marker(TWO) + bytes(512) + SMUGGLED,
    "one non-zero byte in the padding": TWO[:-1] + b"\x01",
}


@pytest.mark.parametrize("name", list(TAR_ENDINGS))
def test_tar_stream_must_end_cleanly(tmp_path, name):
    data = TAR_ENDINGS[name]
    with pytest.raises(ArchiveCorrupt):
        extract_tar(io.BytesIO(data), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ArchiveCorrupt):
        validate_tar(io.BytesIO(data))


@pytest.mark.parametrize("extra", [0, 1, 511, 512, 10240, 100_000])
def test_zeros_after_the_end_marker_are_fine(tmp_path, extra):
    data = TWO + bytes(extra)
    extract_tar(io.BytesIO(data), tmp_path / "out")
    assert (tmp_path / "out/g").read_bytes() == b"y"
    assert validate_tar(io.BytesIO(data)).files == 2


def test_empty_tar_is_an_empty_folder(tmp_path):
    data = make_tar([])
    assert data == bytes(len(data))  # just the marker and padding
    extract_tar(io.BytesIO(data), tmp_path / "out")
    assert list((tmp_path / "out").iterdir()) == []
    with pytest.raises(ArchiveCorrupt):
        extract_tar(io.BytesIO(b""), tmp_path / "out2")  # not even a marker


@pytest.mark.skipif(shutil.which("tar") is None, reason="GNU tar not installed")
def test_sparse_member_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    with open(src / "holes", "wb") as f:
        f.truncate(1 << 20)
        f.seek(1 << 19)
        f.write(b"data")
    data = subprocess.run(
        ["tar", "-C", str(src), "--sparse", "--format=gnu", "-cf", "-", "."],
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    if not any(m.issparse() for m in tarfile.open(fileobj=io.BytesIO(data))):
        pytest.skip("this file system or tar made no sparse member")
    with pytest.raises(UnsafeArchive):
        extract_tar(io.BytesIO(data), tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


ODD_TIMES = [  # (how the time is written, the time extract sets)
    ({"mtime": 2**70}, tarpolicy.LATEST),
    ({"mtime": -(2**70)}, tarpolicy.EARLIEST),
    ({"pax_headers": {"mtime": "nan"}}, 0),
    ({"pax_headers": {"mtime": "1e400"}}, tarpolicy.LATEST),
    ({"pax_headers": {"mtime": "-inf"}}, tarpolicy.EARLIEST),
]


@pytest.mark.parametrize(("odd", "becomes"), ODD_TIMES)
def test_a_time_out_of_range_or_not_a_number_is_clamped_and_counted(tmp_path, odd, becomes):
    """2**70 or a pax `nan`/`1e400` made os.utime raise: a traceback, nothing extracted."""
    tar = make_tar([("./", "dir", None), ("d", "dir", None, 0o755, odd),
                    ("d/f", "file", b"x", 0o644, odd), ("d/l", "sym", "f", 0o777, odd),
                    ("ok", "file", b"y")])  # fmt: skip
    summary = extract_tar(io.BytesIO(tar), tmp_path / "out")
    assert (summary.odd_times, summary.first_odd_time) == (3, "d")
    assert validate_tar(io.BytesIO(tar)).odd_times == 3
    # What the host's file system keeps of the time set (ext4: 1901 to 2446).
    probe = tmp_path / "probe"
    probe.touch()
    os.utime(probe, (becomes, becomes))
    kept = probe.stat().st_mtime
    out = tmp_path / "out"
    assert os.stat(out / "d").st_mtime == os.stat(out / "d/f").st_mtime == kept
    assert os.lstat(out / "d/l").st_mtime == kept
    assert os.stat(out / "ok").st_mtime == 1_700_000_000


@needs_zstd
def test_hbtui_extract_says_once_which_times_it_clamped(tmp_path, hbtui_home):
    tar = make_tar([("./", "dir", None), ("a", "file", b"x", 0o644, {"mtime": 2**70}),
                    ("b", "file", b"y", 0o644, {"pax_headers": {"mtime": "nan"}})])  # fmt: skip
    arc = tmp_path / "odd.hbx"
    with open(arc, "wb") as out:
        AS.encrypt_stream(io.BytesIO(zstd(tar)), out, b"a passphrase")
    done = hbtui("extract", str(arc), str(tmp_path / "out"), env=dict(os.environ),
                 passphrase="a passphrase")  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join((done.stdout + done.stderr).split())
    assert "Traceback" not in said
    assert said.count("2 entries, like a, had a time out of range or not a number") == 1, said
    assert (tmp_path / "out/b").read_bytes() == b"y"


# --- the payload of an HBX archive -------------------------------------------------------


@needs_zstd
@pytest.mark.parametrize("name", ["a second tar after the end", "no end-of-archive marker"])
def test_hbx_tar_stream_must_end_cleanly(tmp_path, name):
    arc = tmp_path / "a.hbx"
    hbx(TAR_ENDINGS[name], arc)
    with pytest.raises(ArchiveCorrupt):
        validate_hbx(arc, PW, allow_external_symlinks=True)
    with pytest.raises(ArchiveCorrupt):
        extract_hbx(arc, tmp_path / "out", PW)
    assert [p.name for p in tmp_path.iterdir()] == ["a.hbx"]


def _encrypt(payload: bytes, path: Path) -> None:
    out = io.BytesIO()
    AS.encrypt_stream(
        io.BytesIO(payload), out, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True)
    )
    path.write_bytes(out.getvalue())


SKIPPABLE = b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + b"skip"


@needs_zstd
def test_hbx_payload_may_be_several_zstd_frames(tmp_path):
    half = len(TWO) // 2
    arc = tmp_path / "a.hbx"
    _encrypt(zstd(TWO[:half]) + SKIPPABLE + zstd(TWO[half:]), arc)
    extract_hbx(arc, tmp_path / "out", PW)
    assert (tmp_path / "out/f").read_bytes() == b"x" * 100


@needs_zstd
@pytest.mark.parametrize("tail", [b"junk", bytes(4)])
def test_hbx_payload_nothing_after_the_zstd_frames(tmp_path, tail):
    arc = tmp_path / "a.hbx"
    _encrypt(zstd(TWO) + tail, arc)
    with pytest.raises(ArchiveCorrupt):
        extract_hbx(arc, tmp_path / "out", PW)
    with pytest.raises(ArchiveCorrupt):
        validate_hbx(arc, PW)
    assert [p.name for p in tmp_path.iterdir()] == ["a.hbx"]


@needs_zstd
def test_pack_dir_payload_shape(tmp_path):
    """What hbtui writes (as the guest's `tar -C /data -cf - . | zstd -T0` does): one
    zstd frame of a tar whose names are relative with `./`, first the root itself,
    then the end-of-archive marker and zero padding to a 10 KiB record."""
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a/f").write_bytes(b"x" * 3000)
    arc = tmp_path / "a.hbx"
    pack_dir(src, arc, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True))
    compressed = io.BytesIO()
    with open(arc, "rb") as f:
        AS.decrypt_stream(f, compressed, PW)
    frame = compressed.getvalue()
    assert frame[:4] == b"\x28\xb5\x2f\xfd"  # a zstd frame
    tar = subprocess.run(
        ["zstd", "-d", "-q", "-c"], input=frame, stdout=subprocess.PIPE, check=True
    ).stdout
    assert len(tar) % 10240 == 0
    raw_names = [tar[off : off + 100].rstrip(b"\0") for off in (0, 512, 1024)]
    assert raw_names == [b"./", b"./a/", b"./a/f"]
    assert tar[1536 + 3072 :] == bytes(len(tar) - 1536 - 3072)  # marker and padding
