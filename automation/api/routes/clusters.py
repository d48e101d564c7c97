"""Clusters, as registered (read here; registering one through the API, with its kubeconfig
sealed like a credential's secret, is still to come)."""

from __future__ import annotations

from fastapi import Request

from automation.api.routers import v1
from automation.api.security import Reader
from automation.models import Cluster
from automation.services import clusters

router = v1("clusters")


@router.get("/clusters")
def list_clusters(request: Request, _: Reader) -> list[Cluster]:
    return clusters.list_clusters(request.app.state.ctx)


@router.get("/clusters/{ref}")
def get_cluster(request: Request, ref: str, _: Reader) -> Cluster:
    return clusters.get_cluster(request.app.state.ctx, ref)
