"""``deployment token`` and the JWKS: tokens for a deployment's runtime, signed with the
control plane's key (``automation.auth.runtime_tokens``).

The signing key is made on first use; its private half is sealed under the server's secrets
key (never stored in plaintext), its public half is published. Replicas that race to make
the first key each publish theirs, and the newest signs.

``deployment keys rotate`` makes a new key, which signs from then on. The key it supersedes
stays published until every token it signed has expired (``RETIRE_AFTER``), so a runtime
keeps accepting them; then it leaves the key set, and the next rotation retires it (its
private half dropped).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa

from automation.app import App
from automation.auth.runtime_tokens import (
    DEFAULT_TTL,
    LEEWAY_SECONDS,
    MAX_TTL,
    SigningKey,
    issue,
)
from automation.errors import Conflict, InvalidInput
from automation.ledger import schema
from automation.models import RuntimeSigningKey, RuntimeToken
from automation.sealing import SealingKey
from automation.services import sealed
from automation.services.deployments import get_deployment

_KEYS = schema.token_signing_keys


def _owner(kid: str) -> str:
    return f"signing-key/{kid}"


# A superseded key's tokens: issued up to MAX_TTL before, accepted LEEWAY_SECONDS past their
# expiry, and one may be signed a moment after the rotation by a replica that had just read
# the old key as the newest (another LEEWAY_SECONDS of margin).
RETIRE_AFTER = MAX_TTL + timedelta(seconds=2 * LEEWAY_SECONDS)
_NEWEST_FIRST = (_KEYS.c.created_at.desc(), _KEYS.c.kid.desc())


def _rows(conn: Any) -> list[Any]:
    return list(conn.execute(sa.select(_KEYS).order_by(*_NEWEST_FIRST)).mappings())


def _views(rows: list[Any], now: datetime) -> list[RuntimeSigningKey]:
    """Every key of ``rows`` (newest first): the newest live one signs, a superseded one
    verifies until RETIRE_AFTER has passed since a newer key took over, and is retired
    after that."""
    views: list[RuntimeSigningKey] = []
    newer: datetime | None = None  # when the next newer live key was made
    for r in rows:
        if r["retired_at"] is not None:
            views.append(RuntimeSigningKey(kid=r["kid"], state="retired",
                                           created_at=r["created_at"],
                                           retired_at=r["retired_at"]))
            continue
        retires = None if newer is None else newer + RETIRE_AFTER
        state: Literal["signing", "verifying", "retired"] = (
            "signing" if retires is None else "verifying" if now <= retires else "retired")
        views.append(RuntimeSigningKey(kid=r["kid"], state=state, created_at=r["created_at"],
                                       superseded_at=newer, retires_at=retires))
        newer = r["created_at"]
    return views


def jwks(app: App) -> dict[str, Any]:
    """The published keys (RFC 7517 key set): the one that signs and those whose tokens may
    still be alive, newest first."""
    with app.ledger.read() as conn:
        rows = _rows(conn)
    return {"keys": [r["public_jwk"] for r, view in zip(rows, _views(rows, app.clock.now()),
                                                         strict=True)
                     if view.state != "retired"]}


def signing_keys(app: App) -> list[RuntimeSigningKey]:
    """Every signing key, newest first, with its state."""
    with app.ledger.read() as conn:
        return _views(_rows(conn), app.clock.now())


def rotate_signing_key(app: App) -> list[RuntimeSigningKey]:
    """A new key signs from now on; the one it supersedes stays published until its tokens
    have expired. Keys past that are retired here: marked, and their private half dropped."""
    seal = sealed.require_key(app, "the runtime-token signing key")
    key, now = SigningKey.generate(), app.clock.now()
    with app.ledger.write() as conn:
        for view in _views(_rows(conn), now):
            if view.state == "retired" and view.retired_at is None:
                conn.execute(_KEYS.update().where(_KEYS.c.kid == view.kid)
                             .values(retired_at=now))
                sealed.drop(conn, _owner(view.kid))
        sealed.store(conn, seal, _owner(key.kid), key.private_pem(), {"kid": key.kid}, now)
        conn.execute(_KEYS.insert().values(kid=key.kid, public_jwk=key.public_jwk(),
                                           created_at=now))
        return _views(_rows(conn), now)


def _newest(conn: Any, seal: SealingKey) -> SigningKey | None:
    kid = conn.execute(sa.select(_KEYS.c.kid).where(_KEYS.c.retired_at.is_(None))
                       .order_by(*_NEWEST_FIRST).limit(1)).scalar()
    if kid is None:
        return None
    blob = conn.execute(sa.select(schema.sealed_secrets.c.sealed).where(
        schema.sealed_secrets.c.owner == _owner(kid))).scalar_one()
    return SigningKey.from_pem(seal.open(blob, _owner(kid)))


def signing_key(app: App) -> SigningKey:
    """The newest key, opened; made (and published) when there is none yet. Only the first
    token takes a write transaction: every later one reads."""
    seal = sealed.require_key(app, "the runtime-token signing key")
    with app.ledger.read() as conn:
        found = _newest(conn, seal)
    if found is not None:
        return found
    with app.ledger.write() as conn:
        found = _newest(conn, seal)  # made meanwhile by another request or replica
        if found is not None:
            return found
        key, now = SigningKey.generate(), app.clock.now()
        sealed.store(conn, seal, _owner(key.kid), key.private_pem(), {"kid": key.kid}, now)
        conn.execute(_KEYS.insert().values(kid=key.kid, public_jwk=key.public_jwk(),
                                           created_at=now))
        return key


def deployment_token(app: App, ref: str, ttl_seconds: int | None = None) -> RuntimeToken:
    """A token for the runtime ``ref`` runs on now: ``aud`` its audience, ``sub`` its
    provision id. Refused for a deployment that is not running (it has no runtime)."""
    # Checked as a number first: a timedelta of 2**63 seconds cannot even be built.
    if ttl_seconds is not None and not 1 <= ttl_seconds <= MAX_TTL.total_seconds():
        raise InvalidInput("ttlSeconds", ttl_seconds,
                           f"must be 1 to {int(MAX_TTL.total_seconds())} seconds: a runtime "
                           "cannot revoke a token it accepted, so tokens are short-lived")
    ttl = DEFAULT_TTL if ttl_seconds is None else timedelta(seconds=ttl_seconds)
    dep = get_deployment(app, ref)
    audience = dep.audience or dep.runtime_host
    if dep.state != "running" or dep.move is not None or audience is None:
        raise Conflict(f"deployment {dep.name} is {dep.state}"
                       + (" (a move is pending)" if dep.move else "")
                       + ": a token names its runtime's audience, known once it runs",
                       code="DEPLOYMENT_NOT_RUNNING", field="deployment", value=dep.name,
                       rule="must be running: `anycloud deployment start` it first")
    key, now = signing_key(app), app.clock.now()
    return RuntimeToken(token=issue(key, audience=audience, subject=dep.provision_id, now=now,
                                    ttl=ttl),
                        audience=audience, subject=dep.provision_id, key_id=key.kid,
                        expires_at=now + ttl)
