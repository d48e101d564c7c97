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

A key file may hold several keys, one per line: the first seals, the others (previous keys)
only open what they sealed. That is how a rotation runs without downtime (``anycloud
secrets-key rotate``): the new key goes first, every secret is sealed again under it while
the old one still opens what is not yet, then the old one leaves the file. A server reads its
key file again when the file changes (``KeySource``), so it follows without a restart.
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
    # Keys that still open what they sealed, never used to seal (a rotation under way).
    previous: tuple[SealingKey, ...] = field(default=(), repr=False)

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
        key = next((k for k in (self, *self.previous) if k.key_id == key_id), None)
        if key is None:
            held = ", ".join(k.key_id.hex() for k in (self, *self.previous))
            raise SealedSecretUnreadable(
                owner, f"it was sealed under key {key_id.hex()}, this server holds key(s) "
                       f"{held}")
        start = len(_MAGIC) + _KEY_ID_LEN
        nonce, sealed = blob[start:start + _NONCE_LEN], blob[start + _NONCE_LEN:]
        try:
            return AESGCM(key._derived(b"seal")).decrypt(nonce, sealed, owner.encode())
        except InvalidTag:
            raise SealedSecretUnreadable(owner, "its bytes were changed, or it was sealed "
                                                "for another row") from None

    def subkey(self, purpose: str) -> SealingKey:
        """A key of its own for one use (the dashboard's session cookies), derived from this
        one: what it seals opens under no other purpose, and it reveals nothing of this key.
        The previous keys' subkeys still open what they sealed."""
        return SealingKey(self._derived(b"subkey\0" + purpose.encode()),
                          tuple(k.subkey(purpose) for k in self.previous))

    def fingerprint(self, plaintext: bytes) -> str:
        digest = hmac.new(self._derived(b"fingerprint"), plaintext, hashlib.sha256).hexdigest()
        return "hmac-sha256:" + digest[:16]

    def digest(self, data: bytes) -> str:
        """A keyed digest for comparing requests that carry secrets (idempotency)."""
        return hmac.new(self._derived(b"digest"), data, hashlib.sha256).hexdigest()

    def digests(self, data: bytes) -> list[str]:
        """The digest under this key, then under each previous key: a request digested
        before a rotation still matches its retry."""
        return [k.digest(data) for k in (self, *self.previous)]

    def ring(self) -> tuple[SealingKey, ...]:
        """This key, then the previous ones, each alone."""
        return (SealingKey(self.raw), *self.previous)


def owner(kind: str, row_id: str) -> str:
    """Whose secret a sealed row is ("credential/cr-..."): its key and associated data."""
    return f"{kind}/{row_id}"


def _decode(text: str, where: str) -> SealingKey:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(where, "(hidden)", "must be base64 of 32 random bytes") from None
    return SealingKey(raw)


def parse_key_file(text: str, where: str) -> SealingKey:
    """A key file's keys: the first seals, the others are its ``previous`` keys. Blank
    lines and ``#`` comments are ignored; a key listed twice is refused."""
    lines = [line.strip() for line in text.splitlines()]
    keys = [_decode(line, where) for line in lines if line and not line.startswith("#")]
    if not keys:
        raise InvalidInput(where, "(hidden)", "must hold a key: base64 of 32 random bytes")
    ids = [k.key_id for k in keys]
    if len(set(ids)) != len(ids):
        raise InvalidInput(where, "(hidden)", "lists a key twice: each key once, the one "
                           "that seals first")
    return SealingKey(keys[0].raw, tuple(keys[1:]))


def read_key_file(path: Path, where: str = KEY_FILE_ENV) -> SealingKey:
    """The keys of ``path``, which only its owner may read."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InvalidInput(where, str(path), f"must be a readable file ({exc.strerror})"
                           ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidInput(where, str(path),
                           f"must be readable by its owner only (mode {mode & 0o777:o}; "
                           "chmod 600 it)")
    return parse_key_file(path.read_text(), where)


def load_key(environ: Mapping[str, str]) -> SealingKey | None:
    """The key the environment names (a file, or the key itself); None when it names none."""
    if environ.get(KEY_FILE_ENV):
        return read_key_file(Path(environ[KEY_FILE_ENV]).expanduser())
    if environ.get(KEY_ENV):
        return _decode(environ[KEY_ENV], KEY_ENV)
    return None


class KeySource:
    """The environment's key, read again whenever its key file changes (a rotation edits the
    file while servers run: they follow at their next use of the key). A file that fails to
    read keeps the keys read last, so a half-made edit never stops a server."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._file = (Path(environ[KEY_FILE_ENV]).expanduser()
                      if environ.get(KEY_FILE_ENV) else None)
        self._seen = self._stamp()  # first: a change while it is read is read again
        self._key = load_key(environ)  # a bad key at start fails the start

    def _stamp(self) -> tuple[int, int, int] | None:
        if self._file is None:
            return None
        try:
            st = self._file.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    def current(self) -> SealingKey | None:
        stamp = self._stamp()
        if stamp is not None and stamp != self._seen:
            try:
                self._key = read_key_file(self._file)  # type: ignore[arg-type]
                self._seen = stamp
            except InvalidInput:
                pass  # not yet whole, or wrong: the keys read last stay in use
        return self._key

    @property
    def path(self) -> Path | None:
        return self._file


def write_key_file(path: Path, key: SealingKey) -> None:
    """Replace ``path`` with ``key`` and its previous keys, one per line, atomically (mode
    0600): a reader sees the old file or the new one."""
    from automation.atomic import replace_file

    replace_file(path, "".join(base64.b64encode(k.raw).decode() + "\n"
                               for k in key.ring()).encode())


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
