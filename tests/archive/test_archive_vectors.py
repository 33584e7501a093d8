"""docs/archive-test-vectors.json: decrypt each vector, re-encrypt it byte for byte."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from hbtui.archive import errors as E
from hbtui.archive import files as AF
from hbtui.archive import header as AH
from hbtui.archive import kdf as AK
from hbtui.archive import stream as AS

VECTORS = json.loads(
    (Path(__file__).resolve().parents[2] / "docs" / "archive-test-vectors.json").read_text()
)


def _kdf(v):
    p = v["kdf_params"]
    if v["kdf"] == "scrypt":
        return AK.ScryptParams(log_n=p["log_n"], r=p["r"], p=p["p"])
    assert v["kdf"] == "argon2id"
    return AK.Argon2idParams(
        iterations=p["iterations"], memory_kib=p["memory_kib"], lanes=p["lanes"]
    )


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=lambda v: v["description"])
def test_vector_decrypts(v):
    out = io.BytesIO()
    AS.decrypt_stream(
        io.BytesIO(bytes.fromhex(v["archive_hex"])), out, bytes.fromhex(v["passphrase_hex"])
    )
    assert out.getvalue().hex() == v["plaintext_hex"]
    assert bytes.fromhex(v["plaintext_hex"]) == bytes(
        j % 251 for j in range(len(v["plaintext_hex"]) // 2)
    )


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=lambda v: v["description"])
def test_vector_reencrypts_identically(v):
    rnd = AH.Randomness(
        file_key=bytes.fromhex(v["file_key_hex"]),
        kdf_salt=bytes.fromhex(v["kdf_salt_hex"]),
        payload_salt=bytes.fromhex(v["payload_salt_hex"]),
        wrap_nonce=bytes.fromhex(v["wrap_nonce_hex"]),
    )
    kdf = _kdf(v)
    pw = bytes.fromhex(v["passphrase_hex"])
    out = io.BytesIO()
    AS.encrypt_stream(
        io.BytesIO(bytes.fromhex(v["plaintext_hex"])),
        out,
        pw,
        sealing=AS.Sealing(v["chunk_size"], kdf, allow_weak_kdf=True),
        _randomness=rnd,
    )
    assert out.getvalue().hex() == v["archive_hex"]
    # the intermediate keys printed for independent implementers
    assert kdf.derive(pw, AH.KEK_SALT_LABEL + rnd.kdf_salt).hex() == v["kek_hex"]
    assert AH.mac_key(rnd.file_key).hex() == v["header_mac_key_hex"]
    assert AH.payload_key(rnd.file_key, rnd.payload_salt).hex() == v["payload_key_hex"]


@pytest.mark.parametrize("v", VECTORS["invalid"], ids=lambda v: v["description"])
def test_invalid_vector_rejected(v, tmp_path):
    """The exact class, from the stream reader and from the threaded file verifier."""
    cls = getattr(E, v["error"])
    data = bytes.fromhex(v["archive_hex"])
    pw = bytes.fromhex(v["passphrase_hex"])
    with pytest.raises(cls) as ei:
        AS.verify_stream(io.BytesIO(data), pw)
    assert type(ei.value) is cls
    path = tmp_path / "v.hbx"
    path.write_bytes(data)
    with pytest.raises(cls) as ei:
        AF.verify_file(path, pw)
    assert type(ei.value) is cls


@pytest.mark.parametrize("v", VECTORS["vectors"], ids=lambda v: v["description"])
def test_vector_kdf_is_weak_and_flagged(v):
    """The vectors' tiny KDF parameters: accepted by the reader, flagged by read_header."""
    info = AS.read_header(io.BytesIO(bytes.fromhex(v["archive_hex"])))
    assert info.kdf == _kdf(v) and info.kdf_warning is not None
    assert info.plaintext_size == len(v["plaintext_hex"]) // 2
