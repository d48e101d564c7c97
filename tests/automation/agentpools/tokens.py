"""API tokens for the broker's tests: a member's (sessions), one scoped to an org (and a
project), and a pool's agent token."""

from __future__ import annotations

from automation import ids
from automation.auth import tokens
from automation.clock import SystemClock
from automation.ledger import schema
from automation.ledger.db import Ledger


def member_token(ledger: Ledger, name: str = "tester", role: str = "member") -> str:
    now = SystemClock().now()
    with ledger.write() as conn:
        token, _ = tokens.issue(conn, name=name, role=role, scope=None,  # type: ignore[arg-type]
                                expires_at=None, created_by="test", now=now)
    return token


def scoped_token(ledger: Ledger, name: str, role: str = "member", *,
                 project: bool = False) -> str:
    """A token of a new org (``name``), and of a new project of it with ``project``."""
    now = SystemClock().now()
    with ledger.write() as conn:
        org_id = ids.new_id("org")
        conn.execute(schema.orgs.insert().values(id=org_id, name=f"org-{name}",
                                                 created_at=now, updated_at=now))
        project_id = ids.new_id("prj") if project else None
        if project_id:
            conn.execute(schema.projects.insert().values(
                id=project_id, name=f"prj-of-{name}", org_id=org_id, created_at=now,
                updated_at=now))
        token, _ = tokens.issue(conn, name=name, role=role, scope=None,  # type: ignore[arg-type]
                                expires_at=None, created_by="test", now=now, org_id=org_id,
                                project_id=project_id)
    return token


def token_id(ledger: Ledger, token: str) -> str:
    return tokens.authenticate(ledger, token, SystemClock().now()).token_id


def agent_token(ledger: Ledger, pool: str) -> str:
    return tokens.mint_agent_token(ledger, pool, by="test", now=SystemClock().now())


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
