"""Secrets at rest: sealed with AES-256-GCM under the server's key, opened only to be used.

A credential's secret material (and later a cluster's kubeconfig) is stored as one sealed
blob: ``ac1`` | key id (8 bytes) | nonce (12 bytes) | ciphertext and tag. The associated data
binds the blob to its owner (``credential/<id>``), so a blob copied onto another row does not
open. The key id names which key sealed it: a server started with another key says so
instead of failing on the tag. A fingerprint (HMAC-SHA256 under a key derived from the same
key, not a bare hash that a guess could be checked against) lets a user tell two secrets
apart without either being shown.

The key is 32 random bytes, base64, in a file only its owner reads (``anycloud
secrets-key new``; ``ANYCLOUD_SECRETS_KEY_FILE``) or in ``ANYCLOUD_SECRETS_KEY``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from automation.errors import AnycloudError, InvalidInput

KEY_FILE_ENV = "ANYCLOUD_SECRETS_KEY_FILE"
KEY_ENV = "ANYCLOUD_SECRETS_KEY"
_MAGIC = b"ac1"
_KEY_ID_LEN = 8
_NONCE_LEN = 12


class SealingKeyMissing(AnycloudError):
    """Secret material was given or is needed, and this process has no key to seal it with."""

    exit_code = 2
    default_code = "SEALING_KEY_MISSING"
    http_status = 409

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} needs the control plane's secrets key, and this process has none: start "
            f"it with {KEY_FILE_ENV}=<file> (make one with `anycloud secrets-key new FILE`)",
            field=KEY_FILE_ENV, value=None,
            rule="secrets are stored only sealed, under a key the server holds")


class SealedSecretUnreadable(AnycloudError):
    """A sealed blob that does not open: another key, or the bytes were changed."""

    default_code = "SECRET_UNREADABLE"

    def __init__(self, owner: str, why: str) -> None:
        super().__init__(f"the secret of {owner} does not open: {why}", field="secret",
                         value=owner, rule="a secret opens only under the key that sealed it, "
                                           "on the row it was sealed for")


@dataclass(frozen=True)
class SealingKey:
    raw: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if len(self.raw) != 32:
            raise InvalidInput("secrets key", f"{len(self.raw)} bytes",
                               "must be 32 bytes (base64 of 32 random bytes)")

    @property
    def key_id(self) -> bytes:
        return hashlib.sha256(b"anycloud key id\0" + self.raw).digest()[:_KEY_ID_LEN]

    def _derived(self, purpose: bytes) -> bytes:
        return hmac.new(self.raw, b"anycloud\0" + purpose, hashlib.sha256).digest()

    def seal(self, plaintext: bytes, owner: str) -> bytes:
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        nonce = os.urandom(_NONCE_LEN)
        sealed = AESGCM(self._derived(b"seal")).encrypt(nonce, plaintext, owner.encode())
        return _MAGIC + self.key_id + nonce + sealed

    def open(self, blob: bytes, owner: str) -> bytes:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        if not blob.startswith(_MAGIC) or len(blob) < len(_MAGIC) + _KEY_ID_LEN + _NONCE_LEN + 16:
            raise SealedSecretUnreadable(owner, "not a sealed secret")
        key_id = blob[len(_MAGIC):len(_MAGIC) + _KEY_ID_LEN]
        if key_id != self.key_id:
            raise SealedSecretUnreadable(
                owner, f"it was sealed under key {key_id.hex()}, this server holds key "
                       f"{self.key_id.hex()}")
        start = len(_MAGIC) + _KEY_ID_LEN
        nonce, sealed = blob[start:start + _NONCE_LEN], blob[start + _NONCE_LEN:]
        try:
            return AESGCM(self._derived(b"seal")).decrypt(nonce, sealed, owner.encode())
        except InvalidTag:
            raise SealedSecretUnreadable(owner, "its bytes were changed, or it was sealed "
                                                "for another row") from None

    def subkey(self, purpose: str) -> SealingKey:
        """A key of its own for one use (the dashboard's session cookies), derived from this
        one: what it seals opens under no other purpose, and it reveals nothing of this key."""
        return SealingKey(self._derived(b"subkey\0" + purpose.encode()))

    def fingerprint(self, plaintext: bytes) -> str:
        digest = hmac.new(self._derived(b"fingerprint"), plaintext, hashlib.sha256).hexdigest()
        return "hmac-sha256:" + digest[:16]

    def digest(self, data: bytes) -> str:
        """A keyed digest for comparing requests that carry secrets (idempotency)."""
        return hmac.new(self._derived(b"digest"), data, hashlib.sha256).hexdigest()


def owner(kind: str, row_id: str) -> str:
    """Whose secret a sealed row is ("credential/cr-..."): its key and associated data."""
    return f"{kind}/{row_id}"


def _decode(text: str, where: str) -> SealingKey:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(where, "(hidden)", "must be base64 of 32 random bytes") from None
    return SealingKey(raw)


def load_key(environ: Mapping[str, str]) -> SealingKey | None:
    """The key the environment names (a file, or the key itself); None when it names none."""
    if environ.get(KEY_FILE_ENV):
        path = Path(environ[KEY_FILE_ENV]).expanduser()
        try:
            mode = path.stat().st_mode
        except OSError as exc:
            raise InvalidInput(KEY_FILE_ENV, str(path), f"must be a readable file ({exc.strerror})"
                               ) from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise InvalidInput(KEY_FILE_ENV, str(path),
                               f"must be readable by its owner only (mode {mode & 0o777:o}; "
                               "chmod 600 it)")
        return _decode(path.read_text(), KEY_FILE_ENV)
    if environ.get(KEY_ENV):
        return _decode(environ[KEY_ENV], KEY_ENV)
    return None


def new_key_file(path: Path) -> SealingKey:
    """Write a new random key to ``path`` (mode 0600); refused if the file exists, since
    replacing a key makes every secret sealed under it unreadable."""
    raw = secrets.token_bytes(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise InvalidInput("path", str(path), "already exists: a new key would make every "
                           "secret sealed under the old one unreadable") from None
    with os.fdopen(fd, "w") as out:
        out.write(base64.b64encode(raw).decode() + "\n")
    return SealingKey(raw)
