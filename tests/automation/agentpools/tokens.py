"""API tokens for the broker's tests: a member's (sessions) and a pool's agent token."""

from __future__ import annotations

from automation.auth import tokens
from automation.clock import SystemClock
from automation.ledger.db import Ledger


def member_token(ledger: Ledger, name: str = "tester", role: str = "member") -> str:
    now = SystemClock().now()
    with ledger.write() as conn:
        token, _ = tokens.issue(conn, name=name, role=role, scope=None,  # type: ignore[arg-type]
                                expires_at=None, created_by="test", now=now)
    return token


def agent_token(ledger: Ledger, pool: str) -> str:
    return tokens.mint_agent_token(ledger, pool, by="test", now=SystemClock().now())


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
