"""Orgs and projects: read by any reader (one record with its ETag, for If-Match on the
``sudo`` routes that change it); an org made by an admin, a project by a member (who deploys
into it). Choosing their provisioners stays with ``sudo``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from automation.api import etags
from automation.api.idempotency import once
from automation.api.paging import DEFAULT_PAGE_SIZE, Page, PageSize, PageToken, by_name, page_of
from automation.api.routers import v1
from automation.api.security import Admin, Member, Reader
from automation.models import NewOrg, NewProject, Org, Project
from automation.services import projects
from automation.services.tenancy import only_visible, org_of_new_project, resolve, visible_ids

router = v1("projects")


class OrgPage(Page[Org]):
    pass


class ProjectPage(Page[Project]):
    pass


@router.get("/orgs")
def list_orgs(request: Request, who: Reader, page_size: PageSize = DEFAULT_PAGE_SIZE,
              page_token: PageToken = None) -> OrgPage:
    ctx = request.app.state.ctx
    found = only_visible(projects.list_orgs(ctx), visible_ids(ctx, who, "org"))
    return page_of(OrgPage, found, by_name,
                   page_size=page_size, page_token=page_token, filters={})


@router.get("/orgs/{ref}")
def get_org(request: Request, response: Response, ref: str, who: Reader) -> Org:
    ctx = request.app.state.ctx
    found = projects.get_org(ctx, resolve(ctx, who, "org", ref, field="ref"))
    etags.tag(response, found)
    return found


@router.post("/orgs", status_code=201, response_model=Org)
def create_org(request: Request, body: NewOrg, who: Admin) -> Response:
    return once(request, who, body, lambda: projects.create_org(
        request.app.state.ctx, body.name), status=201)


@router.get("/projects")
def list_projects(request: Request, who: Reader,
                  org: Annotated[str | None, Query(description="Only this org's (name or id).")]
                  = None, page_size: PageSize = DEFAULT_PAGE_SIZE, page_token: PageToken = None,
                  ) -> ProjectPage:
    ctx = request.app.state.ctx
    where = None if org is None else resolve(ctx, who, "org", org, field="org")
    found = only_visible(projects.list_projects(ctx, where), visible_ids(ctx, who, "project"))
    return page_of(ProjectPage, found, by_name,
                   page_size=page_size, page_token=page_token, filters={"org": org})


@router.get("/projects/{ref}")
def get_project(request: Request, response: Response, ref: str, who: Reader) -> Project:
    ctx = request.app.state.ctx
    found = projects.get_project(ctx, resolve(ctx, who, "project", ref, field="ref"))
    etags.tag(response, found)
    return found


@router.post("/projects", status_code=201, response_model=Project)
def create_project(request: Request, body: NewProject, who: Member) -> Response:
    ctx = request.app.state.ctx
    org = org_of_new_project(ctx, who, body.org, field="org")
    return once(request, who, body, lambda: projects.create_project(
        ctx, body.name, org), status=201)
