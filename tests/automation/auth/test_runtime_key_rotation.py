"""``deployment keys rotate``: a new key signs at once; the key it replaces stays in the key
set for as long as a token it signed can still be accepted, then leaves it, and the next
rotation retires it (its private half dropped). Tokens issued while a rotation runs all
verify. Both CLI modes."""

from __future__ import annotations

import base64
import os
import threading
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from automation.app import App
from automation.auth.runtime_tokens import LEEWAY_SECONDS, MAX_TTL, issue, verify
from automation.ledger import schema
from automation.sealing import SealingKey
from automation.services import runtime_tokens
from automation.services.runtime_tokens import RETIRE_AFTER, rotate_signing_key, signing_key
from tests.automation.conftest import ok_json

AUDIENCE = "https://a1.example"


@pytest.fixture
def keyed(app: App) -> App:
    app.sealing = SealingKey(os.urandom(32))
    return app


def _kids(app: App) -> list[str]:
    return [k["kid"] for k in runtime_tokens.jwks(app)["keys"]]


def test_the_old_key_stays_published_while_a_token_it_signed_can_be_accepted(
        keyed: App) -> None:
    clock: Any = keyed.clock
    old = signing_key(keyed)
    clock.advance(timedelta(minutes=1))
    views = rotate_signing_key(keyed)
    new = signing_key(keyed)
    assert new.kid != old.kid
    assert [(v.kid, v.state) for v in views] == [(new.kid, "signing"), (old.kid, "verifying")]
    rotated_at = clock.now()
    assert views[1].retires_at == rotated_at + RETIRE_AFTER
    assert _kids(keyed) == [new.kid, old.kid]
    # The last token the old key can sign: a replica that read it as the newest just before
    # the rotation, signing a moment after it, with the longest lifetime.
    late = issue(old, audience=AUDIENCE, subject="p", now=rotated_at + timedelta(
        seconds=LEEWAY_SECONDS), ttl=MAX_TTL)
    last_accepted = rotated_at + timedelta(seconds=LEEWAY_SECONDS) + MAX_TTL + timedelta(
        seconds=LEEWAY_SECONDS)
    clock.advance(last_accepted - clock.now())
    assert verify(late, runtime_tokens.jwks(keyed), audience=AUDIENCE, now=clock.now(),
                  subject="p")
    clock.advance(timedelta(seconds=1))  # past it: the old key leaves the key set
    assert _kids(keyed) == [new.kid]
    assert [v.state for v in runtime_tokens.signing_keys(keyed)] == ["signing", "retired"]
    assert verify(issue(new, audience=AUDIENCE, subject="p", now=clock.now()),
                  runtime_tokens.jwks(keyed), audience=AUDIENCE, now=clock.now(),
                  subject="p")
    # The next rotation retires it for good: marked, its private half gone.
    clock.advance(timedelta(minutes=1))
    newest = rotate_signing_key(keyed)
    assert [v.state for v in newest] == ["signing", "verifying", "retired"]
    assert newest[2].retired_at == clock.now()
    with keyed.ledger.read() as conn:
        owners = set(conn.execute(sa.select(schema.sealed_secrets.c.owner)).scalars())
    assert f"signing-key/{old.kid}" not in owners
    assert f"signing-key/{new.kid}" in owners


def test_tokens_issued_while_keys_rotate_all_verify(keyed: App) -> None:
    tokens: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def issuing() -> None:
        try:
            while not stop.is_set():
                key = signing_key(keyed)
                tokens.append(issue(key, audience=AUDIENCE, subject="p",
                                    now=keyed.clock.now()))
        except BaseException as exc:  # reported below
            errors.append(exc)

    signing_key(keyed)  # the first key (replicas racing to make it each publish theirs)
    workers = [threading.Thread(target=issuing) for _ in range(2)]
    for w in workers:
        w.start()
    try:
        for _ in range(3):
            while len(tokens) < 5:
                pass
            before = len(tokens)
            rotate_signing_key(keyed)
            while len(tokens) < before + 5 and not errors:
                pass
    finally:
        stop.set()
        for w in workers:
            w.join(30)
    assert errors == []
    jwks = runtime_tokens.jwks(keyed)
    assert len(jwks["keys"]) == 4  # three rotations after the first key, none expired yet
    for token in tokens:
        verify(token, jwks, audience=AUDIENCE, now=keyed.clock.now(), subject="p")


def test_keys_rotate_in_both_modes(run: Any, in_each_mode: str,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_SECRETS_KEY", base64.b64encode(os.urandom(32)).decode())
    first = ok_json(run("deployment", "keys", "rotate", "--json"))
    second = ok_json(run("deployment", "keys", "rotate", "--json"))
    assert [k["state"] for k in first] == ["signing"]
    assert [(k["kid"], k["state"]) for k in second] == [
        (second[0]["kid"], "signing"), (first[0]["kid"], "verifying")]
    listed = ok_json(run("deployment", "keys", "list", "--json"))
    assert listed == second
    jwks = ok_json(run("deployment", "jwks"))
    assert [k["kid"] for k in jwks["keys"]] == [k["kid"] for k in second]
    text = run("deployment", "keys", "list")
    assert text.exit_code == 0 and "verifying" in text.stdout
