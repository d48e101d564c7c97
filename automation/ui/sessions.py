"""The dashboard's sessions: the API token, sealed in an HTTP-only cookie, checked again on
every request; and the CSRF tokens of its two forms (log in, log out).

The cookie holds the token sealed (AES-256-GCM) under a key derived from the server's secrets
key (``automation.sealing``), with the time it was made; never the token in plaintext. Each
request opens it and authenticates the token against the ledger as the API does, so a token
revoked or expired ends its sessions at once; a session also ends after ``MAX_AGE``. A server
without a secrets key seals under a key of its own process: sessions then end when it stops
(and do not cross replicas). Nothing is stored server-side, so there is no session table.
The key is the server's current one each time: across a rotation, a cookie sealed under the
previous key still opens while that key is in the key file.

CSRF: the log-in form carries a random token that must equal a cookie set with the form (a
double submit, before there is a session); the log-out form carries a keyed digest of the
session cookie, which only this server can make.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from collections.abc import Callable
from datetime import datetime, timedelta

from automation.errors import AnycloudError
from automation.sealing import SealedSecretUnreadable, SealingKey

SESSION_COOKIE = "anycloud_session"
LOGIN_CSRF_COOKIE = "anycloud_login_csrf"
COOKIE_PATH = "/ui"
MAX_AGE = timedelta(hours=12)
_OWNER = "ui-session"


class Sessions:
    """Seals and opens session cookies, and makes and checks their CSRF tokens."""

    def __init__(self, key: SealingKey | Callable[[], SealingKey | None] | None) -> None:
        self._key_of = key if callable(key) else (lambda: key)
        self._own = SealingKey(secrets.token_bytes(32))

    @property
    def key(self) -> SealingKey:
        return (self._key_of() or self._own).subkey("ui-session")

    def seal(self, token: str, now: datetime) -> str:
        plain = f"{int(now.timestamp())}\n{token}".encode()
        return base64.urlsafe_b64encode(self.key.seal(plain, _OWNER)).decode().rstrip("=")

    def open(self, cookie: str | None, now: datetime) -> str | None:
        """The token of a session cookie; None when there is none, it does not open (another
        key, changed bytes) or it is older than MAX_AGE."""
        if not cookie:
            return None
        try:
            blob = base64.urlsafe_b64decode(cookie + "=" * (-len(cookie) % 4))
            made, _, token = self.key.open(blob, _OWNER).decode().partition("\n")
            age = now.timestamp() - int(made)
        except (binascii.Error, ValueError, UnicodeDecodeError, SealedSecretUnreadable,
                AnycloudError):
            return None
        if not token or age < -60 or age > MAX_AGE.total_seconds():
            return None
        return token

    def csrf(self, cookie: str) -> str:
        """The CSRF token of forms shown to the holder of the session ``cookie``."""
        return self.key.digest(b"csrf\0" + cookie.encode())[:32]

    def csrf_ok(self, cookie: str | None, given: str | None) -> bool:
        """``given`` is the CSRF token of this session's forms, made under the current key
        or a previous one (a form shown before a rotation)."""
        if not (cookie and given):
            return False
        made = self.key.digests(b"csrf\0" + cookie.encode())
        return any(hmac.compare_digest(d[:32], given) for d in made)


def new_login_csrf() -> str:
    return secrets.token_urlsafe(24)


def login_csrf_ok(cookie: str | None, given: str | None) -> bool:
    return bool(cookie and given) and hmac.compare_digest(cookie or "", given or "")
