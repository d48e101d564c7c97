"""Roles and the one rule that decides every request (``authorize``).

- ``viewer`` reads; ``member`` also writes pools, deployments and sessions; ``admin`` also
  manages tokens, credentials and the ``sudo`` administration. Each includes the one before.
- ``agent`` is apart: one AgentPool's broker endpoints (register, heartbeat, take work, post
  output, release its sessions, read its pool) and nothing else.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict

from automation.errors import PermissionDenied

Role = Literal["admin", "member", "viewer", "agent"]
ROLES: tuple[Role, ...] = ("admin", "member", "viewer", "agent")


class Access(StrEnum):
    """What a route needs."""

    READ = "read"  # viewer and up
    WRITE = "write"  # member and up
    ADMIN = "admin"  # admin
    AGENT = "agent"  # the agent token of the pool concerned


_RANK = {"viewer": 1, "member": 2, "admin": 3}
_NEEDS = {Access.READ: 1, Access.WRITE: 2, Access.ADMIN: 3}
_NAMES = {1: "viewer", 2: "member", 3: "admin"}


class Principal(BaseModel):
    """The caller, as its token says."""

    model_config = ConfigDict(frozen=True)

    token_id: str
    name: str  # the token's name
    role: Role
    scope: str | None = None  # an agent's pool: "<namespace>/<name>"
    expires_at: datetime | None = None
    # A member's or viewer's tenant (issue 36); None: every org (see services.tenancy).
    org_id: str | None = None
    project_id: str | None = None


def authorize(who: Principal, access: Access, pool: str | None = None, *,
              fleet: bool = False) -> None:
    """Nothing when ``who`` may; PermissionDenied naming the role and the rule otherwise.

    ``pool``: the AgentPool the request concerns. Agent access needs it to be the agent's
    own; read access is also open to the agent of that pool (it reads its own pool's view).
    ``fleet``: the request is about the whole control plane, not one org's records (the
    agent broker's AgentPools, ``/metrics``, the dashboard): a token scoped to an org does
    not reach it. What a scoped token sees of each org's records is
    ``automation.services.tenancy``'s.
    """
    if fleet and who.org_id is not None:
        raise PermissionDenied(f"token {who.name!r} is scoped to an org: this is the whole "
                               "control plane's", field="scope", value=who.org_id,
                               rule="takes an unscoped token (AgentPools, metrics and the "
                                    "dashboard are not one org's)")
    if who.role == "agent":
        if access in (Access.AGENT, Access.READ) and pool is not None and pool == who.scope:
            return
        rule = ("an agent token acts only on its own pool's broker endpoints "
                f"(this one is for {who.scope})")
        raise PermissionDenied(f"token {who.name!r} (agent of {who.scope}) may not do this"
                               + (f" for pool {pool}" if pool else ""),
                               field="role", value=who.role, rule=rule)
    if access is Access.AGENT:
        raise PermissionDenied(f"token {who.name!r} ({who.role}) is not an agent token",
                               field="role", value=who.role,
                               rule="agent endpoints take the agent token of the pool "
                                    "(the operator mounts it into the pool's pods)")
    if _RANK[who.role] < _NEEDS[access]:
        needed = _NAMES[_NEEDS[access]]
        raise PermissionDenied(f"token {who.name!r} ({who.role}) may not do this: it needs "
                               f"the {needed} role", field="role", value=who.role,
                               rule=f"must be {needed} or above")
