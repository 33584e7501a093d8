"""The HBX1 format: round trips, every truncation, tampering, caps, defaults."""

from __future__ import annotations

import inspect
import io
import os
import random
import stat
import struct
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hbtui.archive import files as AF
from hbtui.archive import header as AH
from hbtui.archive import kdf as AK
from hbtui.archive import stream as AS
from hbtui.archive.errors import (
    ArchiveCorrupt,
    ArchiveError,
    ArchiveTruncated,
    KdfLimitExceeded,
    NotAnArchive,
    UnsupportedArchive,
    WrongPassphrase,
)
from hbtui.errors import HbtuiError

CS = 1024
KDF = AK.ScryptParams(log_n=4, r=1, p=1)
PW = b"correct horse battery staple"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "archive-format.md"


def enc(data: bytes, cs: int = CS, kdf=KDF, pw: bytes = PW, rnd=None) -> bytes:
    """An archive with the tests' tiny KDF (below the writer's minimum: allowed here)."""
    out = io.BytesIO()
    AS.encrypt_stream(
        io.BytesIO(data), out, pw, sealing=AS.Sealing(cs, kdf, allow_weak_kdf=True), _randomness=rnd
    )
    return out.getvalue()


def dec(archive: bytes, pw: bytes = PW) -> bytes:
    out = io.BytesIO()
    AS.decrypt_stream(io.BytesIO(archive), out, pw)
    return out.getvalue()


def chunks_of(archive: bytes, cs: int = CS) -> list[bytes]:
    body = archive[AH.HEADER_SIZE :]
    step = cs + AH.TAG_SIZE
    return [body[i : i + step] for i in range(0, len(body), step)]


def rejects(archive: bytes, pw: bytes = PW) -> ArchiveError:
    with pytest.raises(ArchiveError) as ei:
        AS.verify_stream(io.BytesIO(archive), pw)
    assert isinstance(ei.value, HbtuiError)
    assert "\n" not in str(ei.value) and str(ei.value)
    return ei.value


SIZES = [0, 1, CS - 1, CS, CS + 1, 2 * CS, 7 * CS + 13]


# --- defaults -----------------------------------------------------------------


def test_defaults_are_the_documented_ones():
    assert AH.DEFAULT_CHUNK_SIZE == 1 << 20
    assert AK.Argon2idParams(iterations=3, memory_kib=65536, lanes=4) == AK.DEFAULT_KDF
    assert AS.SEALED.kdf is AK.DEFAULT_KDF and not AS.SEALED.allow_weak_kdf
    assert AS.SEALED.chunk_size == AH.DEFAULT_CHUNK_SIZE
    for fn in (AS.encrypt_stream, AS.Encryptor.__init__, AF.create_archive, AF.encrypt_file):
        assert inspect.signature(fn).parameters["sealing"].default is AS.SEALED
    doc = DOCS.read_text()
    assert "t = 3, m = 65536 KiB (64 MiB), p = 4" in doc
    assert "2^20 = 1 MiB" in doc
    for label in (AH.KEK_SALT_LABEL, AH.HEADER_MAC_INFO, AH.PAYLOAD_KEY_INFO):
        assert label.decode() in doc


def test_default_params_round_trip(tmp_path):
    a = enc(b"x" * 10, cs=AH.DEFAULT_CHUNK_SIZE, kdf=AK.DEFAULT_KDF)
    info = AS.read_header(io.BytesIO(a))
    assert info.kdf == AK.DEFAULT_KDF and info.chunk_size == AH.DEFAULT_CHUNK_SIZE
    assert dec(a) == b"x" * 10


# --- round trips ----------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_round_trip_sizes(size):
    data = os.urandom(size)
    a = enc(data)
    assert dec(a) == data
    n_chunks = max(1, -(-size // CS))
    assert len(a) == AH.HEADER_SIZE + size + n_chunks * AH.TAG_SIZE
    info = AS.read_header(io.BytesIO(a))
    assert info.plaintext_size == size and info.archive_size == len(a)
    # the last chunk is never empty unless the payload is
    assert len(chunks_of(a)[-1]) > AH.TAG_SIZE or size == 0


@settings(max_examples=60, deadline=None)
@given(
    data=st.binary(max_size=6 * CS + 3),
    cuts=st.lists(st.integers(min_value=0, max_value=6 * CS + 3), max_size=8),
)
def test_feed_in_any_pieces_equals_stream(data, cuts):
    rnd = AH.Randomness.fresh()
    ref = enc(data, rnd=rnd)
    out = io.BytesIO()
    e = AS.Encryptor(out, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True), _randomness=rnd)
    pos = 0
    for c in sorted(set(cuts)):
        e.feed(data[pos:c])
        pos = max(pos, c)
    e.feed(data[pos:])
    e.finish()
    assert out.getvalue() == ref
    assert dec(ref) == data


class Trickle(io.RawIOBase):
    """A pipe-like source: short reads of odd sizes."""

    def __init__(self, data: bytes, step: int = 333) -> None:
        self.data, self.pos, self.step = data, 0, step

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), self.step, len(self.data) - self.pos)
        b[:n] = self.data[self.pos : self.pos + n]
        self.pos += n
        return n


@pytest.mark.parametrize("size", SIZES)
def test_short_reads_fill_whole_chunks(size):
    data = os.urandom(size)
    rnd = AH.Randomness.fresh()
    out = io.BytesIO()
    AS.encrypt_stream(
        Trickle(data), out, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True), _randomness=rnd
    )
    assert out.getvalue() == enc(data, rnd=rnd)
    got = io.BytesIO()
    AS.decrypt_stream(Trickle(out.getvalue(), 77), got, PW)
    assert got.getvalue() == data


def test_feed_then_feed_from_mixed():
    data = os.urandom(5 * CS + 9)
    rnd = AH.Randomness.fresh()
    out = io.BytesIO()
    e = AS.Encryptor(out, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True), _randomness=rnd)
    e.feed(data[:100])
    e.feed_from(io.BytesIO(data[100 : 3 * CS]))
    e.feed(data[3 * CS : 3 * CS + 1])
    e.feed_from(Trickle(data[3 * CS + 1 :]))
    e.finish()
    assert out.getvalue() == enc(data, rnd=rnd)
    with pytest.raises(ArchiveError):
        e.feed(b"more")


def test_fresh_randomness_per_archive():
    a, b = enc(b"same"), enc(b"same")
    assert a[20:112] != b[20:112]  # salts, nonce, wrapped key all differ
    assert a[AH.HEADER_SIZE :] != b[AH.HEADER_SIZE :]


def test_decryptor_yields_verified_chunks():
    data = os.urandom(3 * CS + 5)
    d = AS.Decryptor(io.BytesIO(enc(data)), PW)
    pieces = [bytes(c) for c in d.chunks()]
    assert [len(p) for p in pieces] == [CS, CS, CS, 5]
    assert b"".join(pieces) == data and d.complete


def test_progress_reports():
    data = os.urandom(3 * CS + 5)
    seen: list[int] = []
    a = io.BytesIO()
    AS.encrypt_stream(
        io.BytesIO(data),
        a,
        PW,
        sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True),
        progress=seen.append,
    )
    assert seen == sorted(seen) and seen[-1] == len(data)
    seen2: list[int] = []
    AS.verify_stream(io.BytesIO(a.getvalue()), PW, progress=seen2.append)
    assert seen2 == sorted(seen2) and seen2[-1] == len(a.getvalue())


def test_memory_is_bounded_by_chunk_size():
    cs = 64 * 1024

    class Gen(io.RawIOBase):
        left = 64 * 1024 * 1024
        block = os.urandom(cs)

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), self.left, cs)
            b[:n] = self.block[:n]
            self.left -= n
            return n

    class Sink(io.RawIOBase):
        def writable(self):
            return True

        def write(self, b):
            return len(b)

    tracemalloc.start()
    AS.encrypt_stream(Gen(), Sink(), PW, sealing=AS.Sealing(cs, KDF, allow_weak_kdf=True))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 * cs + 512 * 1024, peak


# --- files -----------------------------------------------------------------------


def test_files_are_private_and_atomic(tmp_path):
    src = tmp_path / "plain"
    src.write_bytes(os.urandom(3000))
    arc = tmp_path / "a.hbx"
    AF.encrypt_file(src, arc, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True))
    assert stat.S_IMODE(arc.stat().st_mode) == 0o600
    assert AS.is_hbx(arc) and not AS.is_hbx(src)
    assert AS.read_header(arc).plaintext_size == 3000
    out = tmp_path / "out"
    AF.decrypt_file(arc, out, PW)
    assert out.read_bytes() == src.read_bytes()
    assert AF.verify_file(arc, PW) == 3000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.hbx", "out", "plain"]


def test_create_archive_failure_leaves_nothing(tmp_path):
    with (
        pytest.raises(RuntimeError),
        AF.create_archive(
            tmp_path / "x.hbx", PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True)
        ) as e,
    ):
        e.feed(b"abc")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_empty_passphrase_refused():
    with pytest.raises(ArchiveError):
        enc(b"x", pw=b"")


# --- rejections --------------------------------------------------------------------


def test_every_truncation_point_is_rejected(tmp_path):
    data = os.urandom(2 * CS + 500)
    a = enc(data)
    for cut in range(len(a)):
        e = rejects(a[:cut])
        assert isinstance(e, ArchiveCorrupt), (cut, e)
    # the all-or-nothing file API writes nothing, checked on a spread of cuts
    src = tmp_path / "t.hbx"
    dst = tmp_path / "out"
    for cut in list(range(0, 200)) + list(range(AH.HEADER_SIZE, len(a), 37)) + [len(a) - 1]:
        src.write_bytes(a[:cut])
        with pytest.raises(ArchiveCorrupt):
            AF.decrypt_file(src, dst, PW)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["t.hbx"]


def test_truncation_at_chunk_boundary_is_named():
    a = enc(os.urandom(3 * CS))
    e = rejects(a[: AH.HEADER_SIZE + 2 * (CS + AH.TAG_SIZE)])
    assert isinstance(e, ArchiveTruncated) and "before its final chunk" in str(e)
    e = rejects(a[: AH.HEADER_SIZE])
    assert isinstance(e, ArchiveTruncated)


def test_header_bit_flips():
    a = enc(os.urandom(CS + 3))
    for i in range(AH.HEADER_SIZE):
        for bit in (0, 7):
            bad = bytearray(a)
            bad[i] ^= 1 << bit
            e = rejects(bytes(bad))
            if i < 4:
                assert isinstance(e, NotAnArchive)
            elif i in (4, 5, 6):
                assert isinstance(e, UnsupportedArchive)
            elif i >= 112:
                assert isinstance(e, ArchiveCorrupt) and "header" in str(e)
            elif i >= 20:
                assert isinstance(e, WrongPassphrase)


def test_tag_and_body_bit_flips():
    a = enc(os.urandom(2 * CS + 10))
    step = CS + AH.TAG_SIZE
    for pos in (
        AH.HEADER_SIZE,
        AH.HEADER_SIZE + 500,
        AH.HEADER_SIZE + step - 1,  # body, tag of chunk 0
        AH.HEADER_SIZE + step + 3,
        len(a) - 1,
        len(a) - 20,
    ):
        bad = bytearray(a)
        bad[pos] ^= 0x10
        assert isinstance(rejects(bytes(bad)), ArchiveCorrupt)


def test_chunks_swapped_duplicated_dropped():
    a = enc(os.urandom(3 * CS + 10))
    h, c = a[: AH.HEADER_SIZE], chunks_of(a)
    assert len(c) == 4
    variants = [
        c[1] + c[0] + c[2] + c[3],  # swapped
        c[0] + c[0] + c[1] + c[2] + c[3],  # duplicated
        c[0] + c[2] + c[3],  # dropped (middle)
        c[0] + c[1] + c[2],  # dropped (final)
        c[1] + c[2] + c[3],  # dropped (first)
        c[0] + c[1] + c[2] + c[3] + c[3],  # final repeated
    ]
    for body in variants:
        assert isinstance(rejects(h + body), ArchiveCorrupt)
    # chunks from another archive with the same passphrase
    other = chunks_of(enc(os.urandom(3 * CS + 10)))
    assert isinstance(rejects(h + c[0] + other[1] + c[2] + c[3]), ArchiveCorrupt)
    # header of one archive, body of another
    assert isinstance(rejects(h + b"".join(other)), ArchiveCorrupt)


@pytest.mark.parametrize("size", [0, 5, CS, 2 * CS])
@pytest.mark.parametrize(
    "extra",
    # Fixed bytes and ids: parallel workers must collect the same tests.
    [
        b"\x00",
        b"x" * 17,
        random.Random(1).randbytes(CS + AH.TAG_SIZE),
        random.Random(2).randbytes(5000),
    ],
    ids=["nul", "17-bytes", "chunk-and-tag", "5000-bytes"],
)
def test_trailing_garbage(size, extra):
    a = enc(os.urandom(size))
    assert isinstance(rejects(a + extra), ArchiveCorrupt)


def test_trailing_valid_chunk_after_final_is_named():
    a = enc(os.urandom(2 * CS))
    c = chunks_of(a)
    e = rejects(a + c[-1])
    assert isinstance(e, ArchiveCorrupt)


def _forge(rnd: AH.Randomness, chunks: list[tuple[bytes, bool]]) -> bytes:
    """An archive with hand-made chunks (correct keys, chosen flags)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    header, key = AH.build_header(PW, KDF, CS.bit_length() - 1, rnd)
    aead = AESGCM(key)
    body = b"".join(aead.encrypt(AS._nonce(i, fin), pt, None) for i, (pt, fin) in enumerate(chunks))
    return header + body


def test_forged_layouts_rejected():
    r = AH.Randomness.fresh()
    full = os.urandom(CS)
    good = _forge(r, [(full, False), (b"ab", True)])
    assert dec(good) == full + b"ab"
    cases = {
        "empty final chunk after data": [(full, False), (b"", True)],
        "short non-final chunk": [(b"abc", False), (b"d", True)],
        "no final chunk": [(full, False), (full, False)],
        "two final chunks": [(full, True), (b"x", True)],
        "final flag in the middle": [(full, False), (full, True), (b"x", True)],
    }
    for name, chunks in cases.items():
        assert isinstance(rejects(_forge(r, chunks)), ArchiveCorrupt), name


def test_wrong_passphrase(tmp_path):
    a = enc(os.urandom(100))
    assert isinstance(rejects(a, pw=b"wrong"), WrongPassphrase)
    src = tmp_path / "a.hbx"
    src.write_bytes(a)
    with pytest.raises(WrongPassphrase):
        AF.decrypt_file(src, tmp_path / "out", b"wrong")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["a.hbx"]


def _with_params(a: bytes, kdf_id: int, params: tuple[int, int, int]) -> bytes:
    return a[:6] + bytes([kdf_id]) + a[7:8] + struct.pack(">III", *params) + a[20:]


@pytest.mark.parametrize(
    "kdf_id,params",
    [
        (AK.KDF_SCRYPT, (21, 8, 1)),
        (AK.KDF_SCRYPT, (20, 16, 1)),  # 2 GiB
        (AK.KDF_SCRYPT, (18, 8, 17)),
        (AK.KDF_SCRYPT, (18, 33, 1)),
        (AK.KDF_SCRYPT, (0, 8, 1)),
        (AK.KDF_SCRYPT, (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)),
        (AK.KDF_ARGON2ID, (3, 2 * 1024 * 1024, 4)),
        (AK.KDF_ARGON2ID, (11, 65536, 4)),
        (AK.KDF_ARGON2ID, (3, 65536, 17)),
        (AK.KDF_ARGON2ID, (0, 65536, 4)),
        (AK.KDF_ARGON2ID, (3, 7, 1)),
        (AK.KDF_ARGON2ID, (8, 1024 * 1024, 4)),  # total work above the cap
    ],
)
def test_kdf_caps_checked_before_kdf_runs(monkeypatch, tmp_path, kdf_id, params):
    def boom(*a, **k):
        raise AssertionError("the KDF ran")

    monkeypatch.setattr(AK.ScryptParams, "derive", boom)
    monkeypatch.setattr(AK.Argon2idParams, "derive", boom)
    a = _with_params(_CACHED, kdf_id, params)
    with pytest.raises(KdfLimitExceeded):
        AS.verify_stream(io.BytesIO(a), PW)
    with pytest.raises(KdfLimitExceeded):
        AS.read_header(io.BytesIO(a))
    (tmp_path / "a.hbx").write_bytes(a)
    with pytest.raises(KdfLimitExceeded):
        AF.decrypt_file(tmp_path / "a.hbx", tmp_path / "out", PW)
    assert not (tmp_path / "out").exists()


_CACHED = enc(b"payload")


def test_writer_refuses_what_reader_refuses():
    with pytest.raises(KdfLimitExceeded):
        enc(b"x", kdf=AK.ScryptParams(log_n=21, r=8, p=1))
    with pytest.raises(ValueError):
        enc(b"x", cs=1000)
    with pytest.raises(ValueError):
        enc(b"x", cs=1 << 25)


def test_bad_chunk_exponent_and_ids():
    a = _CACHED
    for exp in (0, 9, 25, 255):
        assert isinstance(rejects(a[:7] + bytes([exp]) + a[8:]), ArchiveCorrupt)
    assert isinstance(rejects(a[:6] + b"\x09" + a[7:]), UnsupportedArchive)
    assert isinstance(rejects(b"PK\x03\x04" + a[4:]), NotAnArchive)


def test_read_header_without_passphrase():
    a = enc(os.urandom(3 * CS + 1))
    info = AS.read_header(io.BytesIO(a))
    assert info.version == 1 and info.aead == "AES-256-GCM"
    assert info.kdf == KDF and info.kdf_name == "scrypt" and info.chunk_size == CS
    assert info.archive_size == len(a) and info.plaintext_size == 3 * CS + 1
    assert AS.read_header(io.BytesIO(a[:-17])).plaintext_size == 3 * CS
    assert AS.read_header(io.BytesIO(a[:-1])).plaintext_size is None
    assert (
        AS.read_header(io.BytesIO(a[: AH.HEADER_SIZE + CS + AH.TAG_SIZE + 5])).plaintext_size
        is None
    )


def _outcome(fn):
    try:
        return ("ok", fn())
    except ArchiveError as exc:
        return (type(exc).__name__, str(exc))


@settings(max_examples=150, deadline=None)
@given(
    # Whole chunks too: only then does appended data leave a valid final chunk mid-file.
    size=st.one_of(st.integers(0, 6).map(lambda k: k * CS), st.integers(0, 6 * CS)),
    cut=st.one_of(st.integers(0, 8).map(lambda k: k * (CS + AH.TAG_SIZE)), st.integers(0, 8 * CS)),
    flip=st.one_of(st.none(), st.integers(min_value=AH.HEADER_SIZE, max_value=8 * CS)),
    extra=st.binary(max_size=2 * CS),
    swap=st.booleans(),
)
# Each way of refusing, for certain: cut at a chunk boundary, inside a chunk, right
# after the header; data appended after whole chunks; chunks reordered; a flipped bit.
@example(size=3 * CS, cut=CS + AH.TAG_SIZE, flip=None, extra=b"", swap=False)
@example(size=3 * CS, cut=CS // 2, flip=None, extra=b"", swap=False)
@example(size=3 * CS, cut=0, flip=None, extra=b"", swap=False)
@example(size=2 * CS, cut=8 * CS, flip=None, extra=b"x" * (CS + 40), swap=False)
@example(size=3 * CS, cut=8 * CS, flip=None, extra=b"", swap=True)
@example(size=3 * CS, cut=8 * CS, flip=AH.HEADER_SIZE + CS + 40, extra=b"", swap=False)
@example(size=3 * CS, cut=8 * CS, flip=None, extra=b"", swap=False)
def test_parallel_file_verify_agrees_with_the_stream_reader(
    tmp_path_factory, size, cut, flip, extra, swap
):
    """verify_file authenticates a file's chunks in threads; whatever was done to the
    archive, it must accept, refuse and word the refusal exactly as verify_stream does."""
    archive = bytearray(enc(os.urandom(size)))
    parts = chunks_of(bytes(archive))
    if swap and len(parts) > 2:
        parts[0], parts[1] = parts[1], parts[0]
        archive = bytearray(archive[: AH.HEADER_SIZE] + b"".join(parts))
    if flip is not None and flip < len(archive):
        archive[flip] ^= 0x01
    archive = archive[: AH.HEADER_SIZE + cut] + extra if cut < len(archive) else archive + extra
    path = tmp_path_factory.mktemp("pv") / "a.hbx"
    path.write_bytes(bytes(archive))
    if len(archive) < AH.HEADER_SIZE:
        return  # the header itself is cut: both read it the same way
    assert _outcome(lambda: AF.verify_file(path, PW)) == _outcome(
        lambda: AS.verify_stream(io.BytesIO(bytes(archive)), PW)
    )


# --- the spec's normative statements, one by one ------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3])
def test_short_files_error_class(tmp_path, n):
    """Rules 1 and 2: a proper prefix of the magic is truncated; anything else that
    differs from the magic in its first min(4, size) bytes is not an archive."""
    cases = {
        AH.MAGIC[:n]: ArchiveTruncated,
        b"X" * n: NotAnArchive,
        AH.MAGIC[: n - 1] + b"x": NotAnArchive,  # differs in its last byte
    }
    for data, cls in cases.items():
        assert type(rejects(data)) is cls, data
        with pytest.raises(cls) as ei:
            AS.read_header(io.BytesIO(data))
        assert type(ei.value) is cls
        path = tmp_path / "f.hbx"
        path.write_bytes(data)
        assert not AS.is_hbx(path)  # is_hbx needs the four bytes of the magic


def test_empty_and_short_headers():
    assert type(rejects(b"")) is ArchiveTruncated
    for n in (4, 5, 100, AH.HEADER_SIZE - 1):
        assert type(rejects(_CACHED[:n])) is ArchiveTruncated
        assert type(rejects(b"PK\x03\x04" + _CACHED[4:n])) is NotAnArchive
    assert type(rejects(_CACHED[: AH.HEADER_SIZE])) is ArchiveTruncated  # rule 11


def test_hbx_and_legacy_detection_are_disjoint(tmp_path):
    from hbtui.archive.legacy import is_legacy

    hbx = tmp_path / "box.tar.gz.gpg"  # even under the legacy name
    hbx.write_bytes(_CACHED)
    assert AS.is_hbx(hbx) and not is_legacy(hbx)
    for first in (0x8C, 0x8D, 0x8E, 0x8F, 0xC3):
        gpg = tmp_path / "old.tar.gz.gpg"
        gpg.write_bytes(bytes([first]) + b"\x0d\x04\x03\x09")
        assert is_legacy(gpg) and not AS.is_hbx(gpg)
        renamed = tmp_path / "old.hbx"
        gpg.rename(renamed)
        assert not is_legacy(renamed)  # the name counts too
    assert AH.MAGIC[0] not in (0x8C, 0x8D, 0x8E, 0x8F, 0xC3)


def test_wrapped_key_aad_is_header_bytes_0_to_63():
    """Every byte the unwrap uses: AAD = bytes 0..63 (4..7 included), then the
    wrapped key and its tag (64..111). The KDF and the KEK stay the same here:
    only the byte under test changes, so the AAD alone makes the unwrap fail."""
    a = enc(b"x")
    parsed = AH.parse_header(a[: AH.HEADER_SIZE])
    AH.open_header(parsed, PW)  # the unaltered header opens
    for i in range(AH.HEADER_SIZE):
        raw = bytearray(parsed.raw)
        raw[i] ^= 0x01
        altered = AH.Parsed(raw=bytes(raw), kdf=parsed.kdf, chunk_exp=parsed.chunk_exp)
        with pytest.raises(ArchiveError) as ei:
            AH.open_header(altered, PW)
        expected = WrongPassphrase if i < AH.OFF_MAC else ArchiveCorrupt
        assert type(ei.value) is expected, i


def test_header_changes_that_pass_the_checks_fail_the_unwrap():
    """Rule 9: bytes 4..7 are authenticated too, whenever a change passes rules 4-8."""
    a = enc(b"x", kdf=AK.ScryptParams(log_n=3, r=8, p=1))
    # byte 7: another chunk size in range
    assert type(rejects(a[:7] + bytes([a[7] + 1]) + a[8:])) is WrongPassphrase
    # byte 6: the other KDF, whose caps these parameters also pass (t=3, m=8 KiB, p=1)
    assert type(rejects(a[:6] + bytes([AK.KDF_ARGON2ID]) + a[7:])) is WrongPassphrase
    # bytes 8..19: other parameters within the caps
    assert type(rejects(_with_params(a, AK.KDF_SCRYPT, (4, 8, 1)))) is WrongPassphrase


def test_chunk_counter_limit():
    """Counters 0 .. 2^88 - 1: at most 2^88 chunks; counter 2^88 is refused."""
    assert AS._MAX_COUNTER == 2**88 - 1
    assert AS._nonce(2**88 - 1, True) == b"\xff" * 11 + b"\x01"
    assert AS._nonce(2**88 - 1, False) == b"\xff" * 11 + b"\x00"
    for final in (True, False):
        with pytest.raises(ArchiveError):
            AS._nonce(2**88, final)
    # the writer: the chunk with counter 2^88 - 1 is the last one it can seal
    out = io.BytesIO()
    e = AS.Encryptor(out, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True))
    e._counter = 2**88 - 1
    e.finish()
    out = io.BytesIO()
    e = AS.Encryptor(out, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True))
    e._counter = 2**88 - 1
    e.feed(os.urandom(CS + 1))  # seals counter 2^88 - 1 (not final)
    with pytest.raises(ArchiveError):
        e.finish()  # the final chunk would need counter 2^88
    # the reader: opens a chunk at counter 2^88 - 1, refuses counter 2^88
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    r = AH.Randomness.fresh()
    header, key = AH.build_header(PW, KDF, CS.bit_length() - 1, r)
    last = AESGCM(key).encrypt(AS._nonce(2**88 - 1, True), b"end", None)
    d = AS.Decryptor(io.BytesIO(header), PW)
    out_buf = memoryview(bytearray(3))
    assert d._check_chunk(2**88 - 1, memoryview(last), out_buf, last=True) is None
    assert bytes(out_buf) == b"end"
    with pytest.raises(ArchiveError):
        d._check_chunk(2**88, memoryview(last), out_buf, last=True)


def _size_of(payload_len: int, cs: int = CS) -> int:
    return AH.HEADER_SIZE + payload_len + AH.TAG_SIZE * max(1, -(-payload_len // cs))


def test_payload_size_from_the_file_size_exactly():
    """read_header()'s plaintext_size is L exactly when the size is that of a valid
    archive of L bytes; every other size gives None (`archive info`: payload_size
    None / null)."""
    sizes = {_size_of(n): n for n in range(4 * CS + 3)}
    for size in range(AH.HEADER_SIZE, _size_of(4 * CS)):
        assert AH.plaintext_size_for(size, CS) == sizes.get(size), size
    a = enc(os.urandom(2 * CS))
    for cut in (AH.HEADER_SIZE, AH.HEADER_SIZE + 5, AH.HEADER_SIZE + CS + AH.TAG_SIZE + 16):
        info = AS.read_header(io.BytesIO(a[:cut]))
        assert info.archive_size == cut and info.plaintext_size is None
    with pytest.raises(ArchiveTruncated):
        AS.read_header(io.BytesIO(a[: AH.HEADER_SIZE - 1]))


def test_second_flag_attempt_decides_the_error_class():
    """Rules 13-15 and 17 with their exact classes: the reader must retry a
    full-size last chunk with flag 0x00 to tell truncation from damage."""
    r = AH.Randomness.fresh()
    full = os.urandom(CS)
    cases = {
        "last chunk full, sealed non-final (cut at a boundary)": (
            [(full, False), (full, False)],
            ArchiveTruncated,
        ),
        "last chunk short, sealed non-final": ([(full, False), (b"abc", False)], ArchiveCorrupt),
        "final chunk in the middle": ([(full, True), (b"x", True)], ArchiveCorrupt),
        "final chunk in the middle, full chunk after": (
            [(full, True), (full, False), (b"x", True)],
            ArchiveCorrupt,
        ),
        "empty final chunk after data": ([(full, False), (b"", True)], ArchiveCorrupt),
    }
    for name, (chunks, cls) in cases.items():
        assert type(rejects(_forge(r, chunks))) is cls, name
    good = _forge(r, [(full, False), (full, False), (b"x", True)])
    damaged = bytearray(good[: AH.HEADER_SIZE + 2 * (CS + AH.TAG_SIZE)])
    damaged[-1] ^= 1  # the last piece is full-size but opens with neither flag
    assert type(rejects(bytes(damaged))) is ArchiveCorrupt


# --- minimum KDF strength ----------------------------------------------------------------


@pytest.mark.parametrize(
    "kdf,weak",
    [
        (AK.DEFAULT_KDF, False),
        (AK.ScryptParams(), False),  # the documented alternative, logN=18 r=8 p=1
        (AK.ScryptParams(log_n=17, r=8, p=1), False),
        (AK.ScryptParams(log_n=16, r=8, p=1), True),
        (AK.ScryptParams(log_n=17, r=7, p=1), True),
        (AK.Argon2idParams(iterations=2, memory_kib=19456, lanes=1), False),
        (AK.Argon2idParams(iterations=1, memory_kib=1 << 20, lanes=4), True),
        (AK.Argon2idParams(iterations=10, memory_kib=19455, lanes=1), True),
        (KDF, True),
    ],
)
def test_kdf_minimum(kdf, weak):
    kdf.check()  # all within the reader's caps
    assert (kdf.weakness() is not None) is weak
    if weak:
        with pytest.raises(ValueError, match="minimum"):
            AS.Encryptor(io.BytesIO(), PW, sealing=AS.Sealing(CS, kdf))


def test_writer_refuses_weak_kdf_everywhere(tmp_path):
    src = tmp_path / "plain"
    src.write_bytes(b"x")
    with pytest.raises(ValueError):
        AS.encrypt_stream(io.BytesIO(b"x"), io.BytesIO(), PW, sealing=AS.Sealing(CS, KDF))
    with pytest.raises(ValueError):
        AF.encrypt_file(src, tmp_path / "a.hbx", PW, sealing=AS.Sealing(CS, KDF))
    with (
        pytest.raises(ValueError),
        AF.create_archive(tmp_path / "b.hbx", PW, sealing=AS.Sealing(CS, KDF)),
    ):
        pass
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain"]


def test_reader_accepts_weak_kdf_and_warns():
    a = enc(b"weak but valid")
    assert dec(a) == b"weak but valid"
    info = AS.read_header(io.BytesIO(a))
    assert info.kdf_warning is not None and "minimum" in info.kdf_warning
    strong = AS.read_header(io.BytesIO(enc(b"x", kdf=AK.Argon2idParams(2, 19456, 1))))
    assert strong.kdf_warning is None


def test_kdf_minimum_is_documented():
    doc = DOCS.read_text()
    assert f"log2(N) >= {AK.SCRYPT_MIN_LOG_N}" in doc and f"r >= {AK.SCRYPT_MIN_R}" in doc
    assert f"t >= {AK.ARGON2_MIN_ITERATIONS}" in doc
    assert f"m >= {AK.ARGON2_MIN_MEMORY_KIB} KiB" in doc


def test_an_archive_never_replaces_a_file_that_appeared_meanwhile(tmp_path):
    """Two saves racing for one path: the second to finish fails and the first's file
    stays whole (the final rename is link-then-unlink, which cannot take a used name)."""
    target = tmp_path / "box.hbx"
    with (
        pytest.raises(FileExistsError),
        AF.create_archive(target, PW, sealing=AS.Sealing(CS, KDF, allow_weak_kdf=True)) as enc,
    ):
        enc.feed(b"second writer")
        target.write_bytes(b"the first writer's archive")
    assert target.read_bytes() == b"the first writer's archive"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["box.hbx"]


def test_an_archive_written_with_the_key_another_opened_with_runs_no_kdf(monkeypatch):
    """A file rewritten by the process that read it (the secrets file) wraps a new file
    key under the key the KDF gave for the old one: the KDF runs once, not twice. The new
    archive shares the old one's KDF and salt, and nothing else, and opens with the
    passphrase alone."""
    old = enc(b"first")
    opened = AS.Decryptor(io.BytesIO(old), PW)
    assert b"".join(bytes(c) for c in opened.chunks()) == b"first"

    def boom(*a, **k):
        raise AssertionError("the KDF ran")

    monkeypatch.setattr(AK.ScryptParams, "derive", boom)
    out = io.BytesIO()
    sealing = AS.Sealing(CS, KDF, allow_weak_kdf=True)
    AS.encrypt_stream(io.BytesIO(b"second"), out, opened.kek, sealing=sealing)
    new = out.getvalue()
    assert repr(opened.kek.key) not in repr(opened.kek)  # a key is never printed
    monkeypatch.undo()
    assert dec(new) == b"second"
    salt = slice(AH.OFF_KDF_SALT, AH.OFF_PAYLOAD_SALT)
    assert new[: AH.OFF_KDF_SALT] == old[: AH.OFF_KDF_SALT] and new[salt] == old[salt]
    rest = slice(AH.OFF_PAYLOAD_SALT, AH.HEADER_SIZE)
    assert new[rest] != old[rest]  # payload salt, wrap nonce, wrapped key, MAC: fresh
    with pytest.raises(ValueError, match="other KDF parameters"):
        AS.Encryptor(
            io.BytesIO(),
            opened.kek,
            sealing=AS.Sealing(CS, AK.ScryptParams(log_n=5, r=1, p=1), allow_weak_kdf=True),
        )
