"""API tokens in the ledger: issued, looked up by hash, revoked.

A token is ``acy_`` + 43 URL-safe characters (256 random bits). It is shown once, when it is
issued; the ledger keeps its SHA-256 (a slow hash buys nothing against 256 random bits, and
every request looks one up) and a short prefix so people can tell their tokens apart.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from automation import ids
from automation.auth.roles import Principal, Role
from automation.errors import Unauthenticated
from automation.ledger import schema
from automation.ledger.db import Ledger
from automation.ledger.records import record_event

TOKEN_PREFIX = "acy_"
_TOKEN = re.compile(r"acy_[A-Za-z0-9_-]{43}")
_SHOWN = len(TOKEN_PREFIX) + 6
_T = schema.api_tokens


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def live(now: datetime) -> sa.ColumnElement[bool]:
    """Not revoked and not expired at ``now``."""
    return sa.and_(_T.c.revoked_at.is_(None),
                   sa.or_(_T.c.expires_at.is_(None), _T.c.expires_at > now))


def issue(conn: Connection, *, name: str, role: Role, scope: str | None,
          expires_at: datetime | None, created_by: str, now: datetime,
          org_id: str | None = None, project_id: str | None = None
          ) -> tuple[str, dict[str, Any]]:
    """A new token and its row (the caller has checked the name is free and the role fits)."""
    token = new_token()
    row_id = ids.new_id("tok")
    row: dict[str, Any] = dict(id=row_id, name=name, role=role, scope=scope,
               token_hash=hash_token(token), prefix=token[:_SHOWN], created_by=created_by,
               created_at=now, expires_at=expires_at, revoked_at=None, org_id=org_id,
               project_id=project_id)
    conn.execute(_T.insert().values(**row))
    record_event(conn, now, "token", row_id, "created",
                 f"token {name} ({role}{' of ' + scope if scope else ''}) by {created_by}")
    return token, row


def revoke(conn: Connection, row_id: str, *, by: str, now: datetime) -> None:
    conn.execute(_T.update().where(_T.c.id == row_id, _T.c.revoked_at.is_(None))
                 .values(revoked_at=now))
    record_event(conn, now, "token", row_id, "revoked", f"revoked by {by}")


def mint_agent_token(ledger: Ledger, pool: str, *, by: str, now: datetime) -> str:
    """A fresh agent token for the AgentPool ``pool`` ("<namespace>/<name>"); every earlier
    token of that pool is revoked in the same transaction (the pool was recreated, or its
    Secret lost), so at most one is live."""
    with ledger.write() as conn:
        revoke_pool_tokens(conn, pool, by=by, now=now)
        token, _ = issue(conn, name=f"agentpool/{pool}", role="agent", scope=pool,
                         expires_at=None, created_by=by, now=now)
    return token


def revoke_pool_tokens(conn: Connection, pool: str, *, by: str, now: datetime) -> int:
    """Revoke the live tokens of the AgentPool ``pool``; how many there were."""
    found = conn.execute(sa.select(_T.c.id).where(
        _T.c.scope == pool, _T.c.revoked_at.is_(None)).with_for_update()).scalars().all()
    for row_id in found:
        revoke(conn, row_id, by=by, now=now)
    return len(found)


def bearer(authorization: str | None) -> str:
    """The token of an ``Authorization: Bearer …`` header, Unauthenticated otherwise."""
    if not authorization:
        raise Unauthenticated("no token: send Authorization: Bearer acy_…", field="Authorization",
                              rule="must carry an API token (anycloud token create)")
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("the Authorization header must be Bearer <token>",
                              field="Authorization", value=scheme,
                              rule="must be Bearer <token>")
    return token.strip()


def authenticate(ledger: Ledger, token: str, now: datetime) -> Principal:
    """The caller a token names; Unauthenticated (saying which) when it is malformed, unknown,
    revoked or expired. The token itself never appears in an error."""
    if not _TOKEN.fullmatch(token):
        raise Unauthenticated("malformed token", field="token", value=_shown(token),
                              rule=f"must be {TOKEN_PREFIX} followed by 43 URL-safe characters")
    with ledger.read() as conn:
        row = conn.execute(sa.select(_T).where(_T.c.token_hash == hash_token(token))
                           ).mappings().first()
    shown = token[:_SHOWN]
    if row is None:
        raise Unauthenticated("unknown token", field="token", value=shown,
                              rule="must be a token this control plane issued")
    if row["revoked_at"] is not None:
        raise Unauthenticated(f"token {row['name']!r} was revoked", field="token", value=shown,
                              rule="must not be revoked")
    if row["expires_at"] is not None and row["expires_at"] <= now:
        raise Unauthenticated(f"token {row['name']!r} expired at "
                              f"{row['expires_at']:%Y-%m-%dT%H:%M:%SZ}", field="token",
                              value=shown, rule="must not be expired")
    return Principal(token_id=row["id"], name=row["name"], role=row["role"], scope=row["scope"],
                     expires_at=row["expires_at"], org_id=row["org_id"],
                     project_id=row["project_id"])


def _shown(token: str) -> str:
    return token[:_SHOWN] + ("…" if len(token) > _SHOWN else "")


def principal(ledger: Ledger, authorization: str | None, now: datetime) -> Principal:
    """The caller of an HTTP request, from its ``Authorization`` header."""
    return authenticate(ledger, bearer(authorization), now)
