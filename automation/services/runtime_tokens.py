"""``deployment token`` and the JWKS: tokens for a deployment's runtime, signed with the
control plane's key (``automation.auth.runtime_tokens``).

The signing key is made on first use; its private half is sealed under the server's secrets
key (never stored in plaintext), its public half is published. Replicas that race to make
the first key each publish theirs, and the newest signs.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import sqlalchemy as sa

from automation.app import App
from automation.auth.runtime_tokens import DEFAULT_TTL, MAX_TTL, SigningKey, issue
from automation.errors import Conflict, InvalidInput
from automation.ledger import schema
from automation.models import RuntimeToken
from automation.sealing import SealingKey
from automation.services import sealed
from automation.services.deployments import get_deployment

_KEYS = schema.token_signing_keys


def _owner(kid: str) -> str:
    return f"signing-key/{kid}"


def jwks(app: App) -> dict[str, Any]:
    """The published keys (RFC 7517 key set): every key not retired, newest first."""
    with app.ledger.read() as conn:
        rows = conn.execute(sa.select(_KEYS.c.public_jwk).where(_KEYS.c.retired_at.is_(None))
                            .order_by(_KEYS.c.created_at.desc())).scalars().all()
    return {"keys": list(rows)}


def _newest(conn: Any, seal: SealingKey) -> SigningKey | None:
    kid = conn.execute(sa.select(_KEYS.c.kid).where(_KEYS.c.retired_at.is_(None))
                       .order_by(_KEYS.c.created_at.desc()).limit(1)).scalar()
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
    ttl = DEFAULT_TTL if ttl_seconds is None else timedelta(seconds=ttl_seconds)
    if not timedelta(seconds=1) <= ttl <= MAX_TTL:
        raise InvalidInput("ttlSeconds", ttl_seconds,
                           f"must be 1 to {int(MAX_TTL.total_seconds())} seconds: a runtime "
                           "cannot revoke a token it accepted, so tokens are short-lived")
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
