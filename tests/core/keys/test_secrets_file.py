"""The encrypted secrets file (`[secrets] store = "file"`): what a change to it costs."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from hbtui.archive import kdf as AK
from hbtui.archive import stream as AS
from hbtui.core.keys.secrets import FileStore

PASS = b"the secrets passphrase"


@pytest.fixture
def derivations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every KDF run, by the KDF's name."""
    ran: list[str] = []
    for kind in (AK.Argon2idParams, AK.ScryptParams):
        derive = kind.derive

        def counted(self, passphrase: bytes, salt: bytes, derive=derive) -> bytes:
            ran.append(self.name)
            return derive(self, passphrase, salt)

        monkeypatch.setattr(kind, "derive", counted)
    return ran


def test_a_change_runs_the_kdf_once_to_read_and_not_again_to_write(tmp_path: Path, derivations):
    """Each `hbtui secrets set` or `rm` is a process that reads the file and writes it
    again: Argon2id (~0.2 s here) ran for each; the write now wraps its new file key
    under the key the read derived."""
    path = tmp_path / "secrets.hbx"
    FileStore(path, lambda confirm: PASS).put("one", "1")
    assert derivations == ["argon2id"]  # a new file: derived once, to write it
    derivations.clear()
    store = FileStore(path, lambda confirm: PASS)  # the next process
    store.put("two", "2")
    store.delete("one")
    assert derivations == ["argon2id"]
    assert FileStore(path, lambda confirm: PASS).get("two") == "2"


def test_a_file_sealed_with_older_kdf_parameters_is_rewritten_with_todays(
    tmp_path: Path, derivations
):
    path = tmp_path / "secrets.hbx"
    weak = AK.ScryptParams(log_n=4, r=1, p=1)
    sealed = io.BytesIO()
    AS.encrypt_stream(
        io.BytesIO(b'{"one": "1"}'), sealed, PASS, sealing=AS.Sealing(kdf=weak, allow_weak_kdf=True)
    )
    path.write_bytes(sealed.getvalue())
    derivations.clear()
    FileStore(path, lambda confirm: PASS).put("two", "2")
    assert derivations == ["scrypt", "argon2id"]
    assert AS.read_header(path).kdf == AK.DEFAULT_KDF
    assert FileStore(path, lambda confirm: PASS).get("one") == "1"
