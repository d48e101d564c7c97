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

router = v1("projects")


class OrgPage(Page[Org]):
    pass


class ProjectPage(Page[Project]):
    pass


@router.get("/orgs")
def list_orgs(request: Request, _: Reader, page_size: PageSize = DEFAULT_PAGE_SIZE,
              page_token: PageToken = None) -> OrgPage:
    return page_of(OrgPage, projects.list_orgs(request.app.state.ctx), by_name,
                   page_size=page_size, page_token=page_token, filters={})


@router.get("/orgs/{ref}")
def get_org(request: Request, response: Response, ref: str, _: Reader) -> Org:
    found = projects.get_org(request.app.state.ctx, ref)
    etags.tag(response, found)
    return found


@router.post("/orgs", status_code=201, response_model=Org)
def create_org(request: Request, body: NewOrg, who: Admin) -> Response:
    return once(request, who, body, lambda: projects.create_org(
        request.app.state.ctx, body.name), status=201)


@router.get("/projects")
def list_projects(request: Request, _: Reader,
                  org: Annotated[str | None, Query(description="Only this org's (name or id).")]
                  = None, page_size: PageSize = DEFAULT_PAGE_SIZE, page_token: PageToken = None,
                  ) -> ProjectPage:
    return page_of(ProjectPage, projects.list_projects(request.app.state.ctx, org), by_name,
                   page_size=page_size, page_token=page_token, filters={"org": org})


@router.get("/projects/{ref}")
def get_project(request: Request, response: Response, ref: str, _: Reader) -> Project:
    found = projects.get_project(request.app.state.ctx, ref)
    etags.tag(response, found)
    return found


@router.post("/projects", status_code=201, response_model=Project)
def create_project(request: Request, body: NewProject, who: Member) -> Response:
    return once(request, who, body, lambda: projects.create_project(
        request.app.state.ctx, body.name, body.org), status=201)
