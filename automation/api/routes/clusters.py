"""Clusters: read by any reader, registered and deleted by an admin (the kubeconfig sent is
sealed under the server's key and never returned), refreshed by a member."""

from __future__ import annotations

from fastapi import Request, Response

from automation.api.idempotency import once
from automation.api.routers import v1
from automation.api.security import Admin, Member, Reader
from automation.models import Cluster, RegisterClusterRequest
from automation.services import clusters

router = v1("clusters")


@router.get("/clusters")
def list_clusters(request: Request, _: Reader) -> list[Cluster]:
    return clusters.list_clusters(request.app.state.ctx)


@router.get("/clusters/{ref}")
def get_cluster(request: Request, ref: str, _: Reader) -> Cluster:
    return clusters.get_cluster(request.app.state.ctx, ref)


@router.post("/clusters", status_code=201, response_model=Cluster)
def register_cluster(request: Request, body: RegisterClusterRequest, who: Admin) -> Response:
    """Register a cluster from a kubeconfig's contents: it must carry its certificates and
    token inline (no file references, no exec plugin); the server seals it."""
    req = clusters.RegisterCluster(
        name=body.name, kubeconfig_text=body.kubeconfig, context=body.context,
        server_url=body.server_url, kubernetes_version=body.kubernetes_version,
        ca_pem=body.ca_pem, offline=body.offline)
    return once(request, who, body, lambda: clusters.register_cluster(
        request.app.state.ctx, req), status=201)


@router.post("/clusters/{ref}/refresh")
def refresh_cluster(request: Request, ref: str, _: Member) -> Cluster:
    return clusters.refresh_cluster(request.app.state.ctx, ref)


@router.delete("/clusters/{ref}")
def delete_cluster(request: Request, ref: str, _: Admin) -> Cluster:
    """Refused while it has node pools; its sealed kubeconfig goes with it."""
    return clusters.delete_cluster(request.app.state.ctx, ref)
