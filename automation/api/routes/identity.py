"""Who the caller is, and the server's version (``anycloud api status``); the health probe."""

from __future__ import annotations

from datetime import datetime

from automation import __version__
from automation.api.routers import v1
from automation.api.security import Public, Reader
from automation.models import CamelModel

router = v1("identity")


class Health(CamelModel):
    ok: bool


class Me(CamelModel):
    name: str  # the token's name
    role: str
    scope: str | None = None
    expires_at: datetime | None = None
    org_id: str | None = None  # the tenant a scoped token sees (None: every org)
    project_id: str | None = None
    server_version: str


@router.get("/healthz")
def healthz(_: Public) -> Health:
    """Liveness: open to all, answers nothing else."""
    return Health(ok=True)


@router.get("/me")
def me(who: Reader) -> Me:
    return Me(name=who.name, role=who.role, scope=who.scope, expires_at=who.expires_at,
              org_id=who.org_id, project_id=who.project_id, server_version=__version__)
