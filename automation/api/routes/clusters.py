"""Clusters: read by any reader, registered and deleted by an admin (the kubeconfig sent is
sealed under the server's key and never returned), refreshed by a member; the preview of
its NVIDIA add-on stack (any reader) and unlocking it (admin), with the server's engine.

A cluster registered on the server's own host names its kubeconfig file there; that path is
the server's business, shown to admins only (``kubeconfigPath`` is null for anyone else)."""

from __future__ import annotations

from fastapi import Request, Response

from automation.api import etags
from automation.api.idempotency import once
from automation.api.paging import DEFAULT_PAGE_SIZE, Page, PageSize, PageToken, by_name, page_of
from automation.api.routers import v1
from automation.api.security import Admin, Member, Reader
from automation.auth.roles import Principal
from automation.models import (
    Cluster,
    EngineUnlock,
    MovedToOrg,
    MoveToOrg,
    NewKubeconfigRequest,
    RegisterClusterRequest,
    RunResult,
)
from automation.services import clusters, org_moves
from automation.services.stack_engine import stack_runner
from automation.services.tenancy import only_visible, resolve, visible_ids

router = v1("clusters")


def _shown(cluster: Cluster, who: Principal) -> Cluster:
    if who.role == "admin" or cluster.kubeconfig_path is None:
        return cluster
    return cluster.model_copy(update={"kubeconfig_path": None})


class ClusterPage(Page[Cluster]):
    pass


@router.get("/clusters")
def list_clusters(request: Request, who: Reader, page_size: PageSize = DEFAULT_PAGE_SIZE,
                  page_token: PageToken = None) -> ClusterPage:
    ctx = request.app.state.ctx
    found = [_shown(c, who) for c in only_visible(clusters.list_clusters(ctx),
                                                  visible_ids(ctx, who, "cluster"))]
    return page_of(ClusterPage, found, by_name, page_size=page_size, page_token=page_token,
                   filters={})


@router.get("/clusters/{ref}")
def get_cluster(request: Request, response: Response, ref: str, who: Reader) -> Cluster:
    """With the cluster's ETag (for If-Match on DELETE)."""
    ctx = request.app.state.ctx
    found = clusters.get_cluster(ctx, resolve(ctx, who, "cluster", ref, field="ref"))
    etags.tag(response, found)
    return _shown(found, who)


@router.post("/clusters", status_code=201, response_model=Cluster)
def register_cluster(request: Request, body: RegisterClusterRequest, who: Admin) -> Response:
    """Register a cluster from a kubeconfig's contents: it must carry its certificates and
    token inline (no file references, no exec plugin); the server seals it."""
    req = clusters.RegisterCluster(
        name=body.name, kubeconfig_text=body.kubeconfig, context=body.context,
        server_url=body.server_url, kubernetes_version=body.kubernetes_version,
        ca_pem=body.ca_pem, offline=body.offline,
        allow_private_address=body.allow_private_address, org=body.org)
    return once(request, who, body, lambda: clusters.register_cluster(
        request.app.state.ctx, req), status=201)


@router.put("/clusters/{ref}/kubeconfig", responses=etags.STALE)
def update_kubeconfig(request: Request, response: Response, ref: str,
                      body: NewKubeconfigRequest, who: Admin,
                      if_match: etags.IfMatch = None) -> Cluster:
    """Replace the cluster's kubeconfig with one that reaches the same cluster (the same CA
    hash and kube-system UID; 409 otherwise, nothing changed). It must carry its
    certificates and token inline; the server seals it. If-Match: only if the record is
    still as it was read."""
    ctx = request.app.state.ctx
    done = clusters.update_kubeconfig(
        ctx, resolve(ctx, who, "cluster", ref, field="ref"),
        clusters.NewKubeconfig(kubeconfig_text=body.kubeconfig, context=body.context),
        etags.expectation(if_match))
    etags.tag(response, done)
    return _shown(done, who)


@router.post("/clusters/{ref}/move", responses=etags.STALE)
def move_cluster(request: Request, ref: str, body: MoveToOrg, _: Admin,
                 if_match: etags.IfMatch = None) -> MovedToOrg:
    """To another org, with its node pools and the credentials only they use (refused,
    naming it, for a credential a pool on another cluster also uses)."""
    return org_moves.move_cluster(request.app.state.ctx, ref, body.org,
                                  etags.expectation(if_match))


@router.post("/clusters/{ref}/refresh")
def refresh_cluster(request: Request, ref: str, who: Member) -> Cluster:
    ctx = request.app.state.ctx
    return _shown(clusters.refresh_cluster(ctx, resolve(ctx, who, "cluster", ref, field="ref")),
                  who)


@router.delete("/clusters/{ref}", responses=etags.STALE)
def delete_cluster(request: Request, ref: str, _: Admin, if_match: etags.IfMatch = None,
                   ) -> Cluster:
    """Refused while it has node pools; its sealed kubeconfig goes with it."""
    return clusters.delete_cluster(request.app.state.ctx, ref, etags.expectation(if_match))


@router.get("/clusters/{ref}/addons/preview")
def preview_addons(request: Request, ref: str, who: Reader, diff: bool = False) -> RunResult:
    """The cluster's NVIDIA add-on stack as the control loop would apply it (the cluster's
    objects are read first)."""
    from automation.services.rollout import preview_addons

    state = request.app.state
    return preview_addons(state.ctx, lambda: stack_runner(state),
                          resolve(state.ctx, who, "cluster", ref, field="ref"), diff=diff)


@router.post("/clusters/{ref}/addons/unlock")
def unlock_addons(request: Request, ref: str, _: Admin) -> EngineUnlock:
    """Clear a lock a killed run left on the add-on stack. Admin: cancelling a run that is
    still alive corrupts its state."""
    from automation.services.rollout import unlock_addons

    state = request.app.state
    return unlock_addons(state.ctx, lambda: stack_runner(state), ref)
