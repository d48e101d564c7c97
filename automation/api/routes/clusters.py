"""Clusters and credentials, as registered (read here; registering through the API comes with
the server-side secrets)."""

from __future__ import annotations

from fastapi import Request

from automation.api.routers import v1
from automation.api.security import Reader
from automation.models import Cluster, Credential
from automation.services import clusters, credentials

router = v1("clusters")


@router.get("/clusters")
def list_clusters(request: Request, _: Reader) -> list[Cluster]:
    return clusters.list_clusters(request.app.state.ctx)


@router.get("/clusters/{ref}")
def get_cluster(request: Request, ref: str, _: Reader) -> Cluster:
    return clusters.get_cluster(request.app.state.ctx, ref)


@router.get("/credentials")
def list_credentials(request: Request, _: Reader) -> list[Credential]:
    return credentials.list_credentials(request.app.state.ctx)
