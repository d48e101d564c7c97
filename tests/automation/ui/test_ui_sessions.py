"""Session cookies: sealed, bound to the server's key, good for MAX_AGE; CSRF tokens."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from automation.sealing import SealingKey
from automation.ui.sessions import MAX_AGE, Sessions, login_csrf_ok

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)
TOKEN = "acy_" + "x" * 43


def test_a_session_opens_under_its_key_only_and_until_max_age() -> None:
    key = SealingKey(secrets.token_bytes(32))
    mine = Sessions(key)
    cookie = mine.seal(TOKEN, NOW)
    assert TOKEN not in cookie and "x" * 8 not in cookie
    assert mine.open(cookie, NOW) == TOKEN
    assert Sessions(key).open(cookie, NOW + MAX_AGE) == TOKEN  # another replica, same key
    assert mine.open(cookie, NOW + MAX_AGE + MAX_AGE / 100) is None
    assert Sessions(SealingKey(secrets.token_bytes(32))).open(cookie, NOW) is None
    assert Sessions(None).open(cookie, NOW) is None  # a key of its own process
    flipped = cookie[:-3] + ("A" if cookie[-3] != "A" else "B") + cookie[-2:]
    for bad in (None, "", flipped, "not base64!", TOKEN):
        assert mine.open(bad, NOW) is None


def test_csrf_tokens() -> None:
    sessions = Sessions(None)
    cookie = sessions.seal(TOKEN, NOW)
    other = sessions.seal(TOKEN, NOW)
    assert sessions.csrf_ok(cookie, sessions.csrf(cookie))
    assert not sessions.csrf_ok(other, sessions.csrf(cookie))
    assert not sessions.csrf_ok(cookie, None) and not sessions.csrf_ok(None, "x")
    assert login_csrf_ok("abc", "abc") and not login_csrf_ok("abc", "abd")
    assert not login_csrf_ok(None, None) and not login_csrf_ok("", "")
