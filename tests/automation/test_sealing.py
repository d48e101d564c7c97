"""The server's sealing key: AES-GCM bound to the owner row, the key named by its id, keyed
fingerprints, and a key file only its owner may read."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.errors import InvalidInput
from automation.sealing import SealedSecretUnreadable, SealingKey, load_key, new_key_file

KEY = SealingKey(bytes(range(32)))


@given(st.binary(max_size=4096), st.text(min_size=1, max_size=60))
def test_what_is_sealed_opens_for_its_owner_only(plaintext: bytes, owner: str) -> None:
    blob = KEY.seal(plaintext, owner)
    assert KEY.open(blob, owner) == plaintext
    if len(plaintext) >= 16:  # shorter runs turn up in random bytes by chance
        assert plaintext not in blob
    with pytest.raises(SealedSecretUnreadable, match="sealed for another row"):
        KEY.open(blob, owner + "x")


def test_a_changed_byte_or_another_key_does_not_open() -> None:
    blob = KEY.seal(b"secret", "credential/cr-1")
    flipped = blob[:-1] + bytes([blob[-1] ^ 1])
    with pytest.raises(SealedSecretUnreadable, match="bytes were changed"):
        KEY.open(flipped, "credential/cr-1")
    other = SealingKey(os.urandom(32))
    with pytest.raises(SealedSecretUnreadable, match=f"sealed under key {KEY.key_id.hex()}"):
        other.open(blob, "credential/cr-1")
    with pytest.raises(SealedSecretUnreadable, match="not a sealed secret"):
        KEY.open(b"plain", "credential/cr-1")


def test_fingerprints_tell_secrets_apart_and_depend_on_the_key() -> None:
    assert KEY.fingerprint(b"a") == KEY.fingerprint(b"a") != KEY.fingerprint(b"b")
    assert SealingKey(os.urandom(32)).fingerprint(b"a") != KEY.fingerprint(b"a")
    assert "bytes" not in repr(KEY) and str(KEY.raw) not in repr(KEY)


def test_the_key_file_is_new_private_and_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "secrets.key"
    made = new_key_file(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_key({"ANYCLOUD_SECRETS_KEY_FILE": str(path)}) == made
    with pytest.raises(InvalidInput, match="already exists"):
        new_key_file(path)
    assert load_key({"ANYCLOUD_SECRETS_KEY_FILE": str(path)}) == made
    path.chmod(0o644)
    with pytest.raises(InvalidInput, match="readable by its owner only"):
        load_key({"ANYCLOUD_SECRETS_KEY_FILE": str(path)})


@pytest.mark.parametrize(("environ", "rule"), [
    ({"ANYCLOUD_SECRETS_KEY": "not base64!"}, "base64 of 32 random bytes"),
    ({"ANYCLOUD_SECRETS_KEY": base64.b64encode(b"short").decode()}, "must be 32 bytes"),
    ({"ANYCLOUD_SECRETS_KEY_FILE": "/nonexistent/key"}, "readable file"),
])
def test_a_bad_key_is_refused_by_name(environ: dict[str, str], rule: str) -> None:
    with pytest.raises(InvalidInput, match=rule) as caught:
        load_key(environ)
    assert "not base64!" not in str(caught.value)


def test_no_key_named_is_none() -> None:
    assert load_key({}) is None
    assert load_key({"ANYCLOUD_SECRETS_KEY": base64.b64encode(KEY.raw).decode()}) == KEY
