"""API tokens: ``anycloud token create | list | revoke`` (issue 20).

The first admin token comes from ``token create NAME --role admin --bootstrap`` run against
the control plane's own ledger (the server's host, its ANYCLOUD_DATABASE_URL): allowed only
while no admin token is live, so it can never mint a second way in. After that, tokens are
made by an admin (through the API) or, in embedded mode, by whoever owns the local ledger.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from automation.app import App
from automation.auth import tokens
from automation.auth.roles import ROLES, Role
from automation.errors import Conflict, InvalidInput
from automation.ledger import schema
from automation.ledger.records import find_live
from automation.models import ApiToken, IssuedToken, token_lifetime
from automation.validation import check_dns_label, check_name

_T = schema.api_tokens
_POOL = "must be NAMESPACE/NAME of an AgentPool (an agent token acts for that pool only)"


def create_token(app: App, name: str, role: str, *, by: str, expires_in: timedelta | None = None,
                 pool: str | None = None, bootstrap: bool = False, org: str | None = None,
                 project: str | None = None) -> IssuedToken:
    """``org``/``project`` (name or id) scope a member's or viewer's token to one tenant."""
    check_name("name", name)
    if role not in ROLES:
        raise InvalidInput("--role", role, f"must be one of {', '.join(ROLES)}")
    checked: Role = role  # type: ignore[assignment]
    if checked == "agent":
        _check_pool(pool)
    elif pool is not None:
        raise InvalidInput("--pool", pool, "is only for --role agent")
    if expires_in is not None:
        token_lifetime(expires_in.total_seconds(), str(expires_in))
    if (org or project) and checked not in ("member", "viewer"):
        raise InvalidInput("--org" if org else "--project", org or project,
                           "scopes a member's or viewer's token only (an admin is global, "
                           "an agent bound to its pool)")
    if bootstrap and checked != "admin":
        raise InvalidInput("--bootstrap", True, "makes the first admin token: use --role admin")
    now = app.clock.now()
    with app.ledger.write() as conn:
        if bootstrap and _live_admins(conn, now):
            raise Conflict("an admin token already exists: --bootstrap only makes the first "
                           "one; ask an admin for a token (anycloud token create)",
                           code="ALREADY_EXISTS", field="--bootstrap", value=True,
                           rule="allowed only while no admin token is live")
        if conn.execute(sa.select(_T.c.id).where(_T.c.name == name,
                                                 _T.c.revoked_at.is_(None))).first():
            raise Conflict(f"token {name!r} already exists", code="ALREADY_EXISTS",
                           field="name", value=name,
                           rule="must be unique among tokens not revoked")
        org_id, project_id = _tenant(conn, org, project)
        token, row = tokens.issue(conn, name=name, role=checked, scope=pool,
                                  expires_at=now + expires_in if expires_in else None,
                                  created_by=by, now=now, org_id=org_id,
                                  project_id=project_id)
    return IssuedToken.model_validate(_view(row, now) | {"token": token})


def list_tokens(app: App, *, include_revoked: bool = False) -> list[ApiToken]:
    now = app.clock.now()
    query = sa.select(_T).order_by(_T.c.name, _T.c.created_at)
    if not include_revoked:
        query = query.where(_T.c.revoked_at.is_(None))
    with app.ledger.read() as conn:
        return [ApiToken.model_validate(_view(r, now)) for r in conn.execute(query).mappings()]


def revoke_token(app: App, ref: str, *, by: str) -> ApiToken:
    """Revoke the live token named ``ref`` (or with that id); it is refused from then on."""
    now = app.clock.now()
    with app.ledger.write() as conn:
        row = find_live(conn, _T, ref, live=_T.c.revoked_at.is_(None), kind="token",
                        field="name", lock=True)
        tokens.revoke(conn, row["id"], by=by, now=now)
    return ApiToken.model_validate(_view(dict(row) | {"revoked_at": now}, now))


def _tenant(conn: Any, org: str | None, project: str | None
            ) -> tuple[str | None, str | None]:
    """The org and project ids a token is scoped to (a project's org when only it is named;
    a project named with an org must be that org's)."""
    org_row = None if org is None else find_live(conn, schema.orgs, org, live=sa.true(),
                                                 kind="org", field="--org")
    if project is None:
        return (None if org_row is None else org_row["id"]), None
    found = find_live(conn, schema.projects, project, live=sa.true(), kind="project",
                      field="--project")
    if org_row is not None and found["org_id"] != org_row["id"]:
        raise InvalidInput("--project", project, f"must be a project of org {org!r}")
    return found["org_id"], found["id"]


def _live_admins(conn: Any, now: datetime) -> int:
    return len(conn.execute(sa.select(_T.c.id).where(tokens.live(now), _T.c.role == "admin"))
               .all())


def _check_pool(pool: str | None) -> None:
    namespace, _, name = (pool or "").partition("/")
    if not namespace or not name:
        raise InvalidInput("--pool", pool, _POOL)
    check_dns_label("--pool", namespace)  # Kubernetes names, not ours: any label will do
    check_dns_label("--pool", name)


def _view(row: Any, now: datetime) -> dict[str, Any]:
    out = {k: v for k, v in dict(row).items() if k != "token_hash"}
    expired = out["expires_at"] is not None and out["expires_at"] <= now
    out["state"] = "revoked" if out["revoked_at"] else "expired" if expired else "active"
    return out
