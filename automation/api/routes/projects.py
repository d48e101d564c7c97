"""Orgs and projects: read by any reader; an org made by an admin, a project by a member
(who deploys into it). Choosing their provisioners stays with ``sudo``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from automation.api.idempotency import once
from automation.api.routers import v1
from automation.api.security import Admin, Member, Reader
from automation.models import NewOrg, NewProject, Org, Project
from automation.services import projects

router = v1("projects")


@router.get("/orgs")
def list_orgs(request: Request, _: Reader) -> list[Org]:
    return projects.list_orgs(request.app.state.ctx)


@router.post("/orgs", status_code=201, response_model=Org)
def create_org(request: Request, body: NewOrg, who: Admin) -> Response:
    return once(request, who, body, lambda: projects.create_org(
        request.app.state.ctx, body.name), status=201)


@router.get("/projects")
def list_projects(request: Request, _: Reader,
                  org: Annotated[str | None, Query(description="Only this org's (name or id).")]
                  = None) -> list[Project]:
    return projects.list_projects(request.app.state.ctx, org)


@router.post("/projects", status_code=201, response_model=Project)
def create_project(request: Request, body: NewProject, who: Member) -> Response:
    return once(request, who, body, lambda: projects.create_project(
        request.app.state.ctx, body.name, body.org), status=201)
