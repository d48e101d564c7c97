"""Rows of ``sealed_secrets``: a credential's secret or a cluster's kubeconfig, sealed under
the server's key (``automation.sealing``) and summarised without it."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from automation.app import App
from automation.ledger import schema
from automation.models import SecretSummary
from automation.sealing import SealingKey, SealingKeyMissing

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


def held(conn: Any, whose: str) -> bool:
    return conn.execute(sa.select(_T.c.owner).where(_T.c.owner == whose)).first() is not None


def drop(conn: Any, whose: str) -> None:
    conn.execute(_T.delete().where(_T.c.owner == whose))
