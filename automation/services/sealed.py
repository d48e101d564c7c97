"""Rows of ``sealed_secrets``: a credential's secret or a cluster's kubeconfig, sealed under
the server's key (``automation.sealing``) and summarised without it; and the ledger's own
key for digesting requests that carry secrets."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from automation.app import App
from automation.ledger import schema
from automation.models import SecretSummary
from automation.sealing import SealingKey, SealingKeyMissing, owner

_T = schema.sealed_secrets


def require_key(app: App, what: str) -> SealingKey:
    if app.sealing is None:
        raise SealingKeyMissing(f"storing the secret of {what}")
    return app.sealing


def store(conn: Any, key: SealingKey, whose: str, data: bytes, shown: dict[str, str],
          now: datetime, *, replace: bool = False) -> SecretSummary:
    """Seal ``data`` for ``whose``: a new row, or (``replace``) the old one overwritten, so a
    rotated secret is gone rather than kept beside the new one."""
    values = dict(key_id=key.key_id.hex(), sealed=key.seal(data, whose),
                  fingerprint=key.fingerprint(data), shown=shown)
    if replace:
        conn.execute(_T.update().where(_T.c.owner == whose).values(**values, rotated_at=now))
        row = conn.execute(sa.select(_T).where(_T.c.owner == whose)).mappings().one()
    else:
        row = {**values, "created_at": now, "rotated_at": None}
        conn.execute(_T.insert().values(owner=whose, **row))
    return summary(row)


def summary(row: Any) -> SecretSummary:
    return SecretSummary(fingerprint=row["fingerprint"], fields=row["shown"],
                         stored_at=row["created_at"], rotated_at=row["rotated_at"])


def summaries(conn: Any, owners: list[str]) -> dict[str, SecretSummary]:
    """The summaries of those owners that have a sealed secret."""
    rows = conn.execute(sa.select(_T.c.owner, _T.c.fingerprint, _T.c.shown, _T.c.created_at,
                                  _T.c.rotated_at).where(_T.c.owner.in_(owners))).mappings()
    return {r["owner"]: summary(r) for r in rows}


def sealed_blob(conn: Any, whose: str) -> bytes | None:
    """What is sealed for ``whose`` (still sealed), or None."""
    blob: bytes | None = conn.execute(sa.select(_T.c.sealed).where(_T.c.owner == whose)).scalar()
    return blob


def held(conn: Any, whose: str) -> bool:
    return conn.execute(sa.select(_T.c.owner).where(_T.c.owner == whose)).first() is not None


def drop(conn: Any, whose: str) -> None:
    conn.execute(_T.delete().where(_T.c.owner == whose))


DIGEST_KEY = owner("idempotency", "request-digest-key")


def digest_key(app: App) -> SealingKey:
    """The key that digests requests carrying a secret (``api.idempotency``): random, made on
    first use and kept sealed here like any secret. A secrets-key rotation seals it again
    without changing it, so a digest made before the rotation still matches its retry once
    the old key has left the key file (digests under the secrets key itself would not)."""
    key = require_key(app, "a request that carries a secret")
    with app.ledger.read() as conn:
        blob = sealed_blob(conn, DIGEST_KEY)
    if blob is not None:
        return SealingKey(key.open(blob, DIGEST_KEY))
    made = os.urandom(32)
    try:
        with app.ledger.write() as conn:
            store(conn, key, DIGEST_KEY, made, {}, app.clock.now())
    except sa.exc.IntegrityError:  # another request (or replica) made it first: use that one
        return digest_key(app)
    return SealingKey(made)
