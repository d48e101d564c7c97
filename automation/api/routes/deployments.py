"""Deployments: a project's runtime from the server's provisioner set, or work placed on a
node pool. Read by any reader; created, started, stopped and deleted by a member. The same
operations as ``deployment …`` (``automation.services.deployment_ops``).

``GET /deployments/{ref}`` carries the record's ETag (of the deployment as the ledger holds
it, not of its provisioner's health, which the answer adds); start, restart, stop and delete
take ``If-Match`` and answer 412, changing and releasing nothing, when it is stale."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Request, Response

from automation.api import etags
from automation.api.idempotency import once
from automation.api.paging import DEFAULT_PAGE_SIZE, Page, PageSize, PageToken, page_of
from automation.api.provisioning import provisioning
from automation.api.routers import v1
from automation.api.security import Member, Reader
from automation.auth.roles import Principal
from automation.models import DeploymentStatus, NewDeployment, ProjectDeployment, Workload
from automation.services import deployment_ops
from automation.services.tenancy import only_visible, resolve, visible_ids

router = v1("deployments")


class DeploymentPage(Page[ProjectDeployment | Workload]):
    pass


def _listed(found: ProjectDeployment | Workload) -> tuple[int, str, str]:
    """Project deployments first, then the placements on node pools, each by name."""
    return (0 if isinstance(found, ProjectDeployment) else 1, found.name, found.id)


def _ref(request: Request, who: Principal, ref: str) -> str:
    """The deployment (or placement) ``ref`` names, as the caller may see it."""
    return resolve(request.app.state.ctx, who, "deployment", ref, field="ref")


@router.get("/deployments")
def list_deployments(request: Request, who: Reader,
                     project: Annotated[str | None, Query(
                         description="Only this project's (name or id); without it, the "
                                     "placements on node pools follow.")] = None,
                     page_size: PageSize = DEFAULT_PAGE_SIZE, page_token: PageToken = None,
                     ) -> DeploymentPage:
    ctx = request.app.state.ctx
    where = None if project is None else resolve(ctx, who, "project", project, field="project")
    found = only_visible(deployment_ops.list_all(ctx, where), visible_ids(ctx, who, "deployment"))
    return page_of(DeploymentPage, found, _listed, page_size=page_size,
                   page_token=page_token, filters={"project": project})


@router.post("/deployments", status_code=201, response_model=ProjectDeployment | Workload)
def create_deployment(request: Request, body: NewDeployment, who: Member) -> Response:
    ctx = request.app.state.ctx
    scoped = body.model_copy(update={
        "project": body.project and resolve(ctx, who, "project", body.project, field="project"),
        "node_pool": body.node_pool and resolve(ctx, who, "node pool", body.node_pool,
                                                field="nodePool")})

    def made() -> ProjectDeployment | Workload:
        with provisioning(request) as found:
            return deployment_ops.create(ctx, scoped, found)

    return once(request, who, body, made, status=201)


@router.get("/deployments/{ref}")
def deployment_status(request: Request, response: Response, ref: str, who: Reader
                      ) -> DeploymentStatus | Workload:
    ctx = request.app.state.ctx
    record = deployment_ops.find(ctx, _ref(request, who, ref))
    etags.tag(response, record)
    with provisioning(request) as found:
        return deployment_ops.describe(ctx, record, found)


def _start(request: Request, response: Response, ref: str, if_match: str | None, *,
           restart: bool) -> ProjectDeployment:
    with provisioning(request) as found:
        done = deployment_ops.start(request.app.state.ctx, ref, found, restart=restart,
                                    expect=etags.expectation(if_match))
    etags.tag(response, done)
    return done


@router.post("/deployments/{ref}/start", responses=etags.STALE)
def start_deployment(request: Request, response: Response, ref: str, who: Member,
                     if_match: etags.IfMatch = None) -> ProjectDeployment:
    return _start(request, response, _ref(request, who, ref), if_match, restart=False)


@router.post("/deployments/{ref}/restart", responses=etags.STALE)
def restart_deployment(request: Request, response: Response, ref: str, who: Member,
                       if_match: etags.IfMatch = None) -> ProjectDeployment:
    return _start(request, response, _ref(request, who, ref), if_match, restart=True)


@router.post("/deployments/{ref}/stop", responses=etags.STALE)
def stop_deployment(request: Request, response: Response, ref: str, who: Member,
                    if_match: etags.IfMatch = None) -> ProjectDeployment:
    done = deployment_ops.stop(request.app.state.ctx, _ref(request, who, ref),
                               etags.expectation(if_match))
    etags.tag(response, done)
    return done


@router.delete("/deployments/{ref}", responses=etags.STALE)
def delete_deployment(request: Request, ref: str, who: Member, if_match: etags.IfMatch = None
                      ) -> ProjectDeployment | Workload:
    with provisioning(request) as found:
        return deployment_ops.delete(request.app.state.ctx, _ref(request, who, ref), found,
                                     etags.expectation(if_match))
