"""Deployments: a project's runtime from the server's provisioner set, or work placed on a
node pool. Read by any reader; created, started, stopped and deleted by a member. The same
operations as ``deployment …`` (``automation.services.deployment_ops``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from fastapi import Query, Request, Response

from automation.api.idempotency import once
from automation.api.routers import v1
from automation.api.security import Member, Reader
from automation.models import DeploymentStatus, NewDeployment, ProjectDeployment, Workload
from automation.provisioners.provisioner_set import ProvisionerSet, load_from_env, required
from automation.services import deployment_ops
from automation.services.deployment_ops import Provisioning

router = v1("deployments")


@contextmanager
def _provisioning(request: Request) -> Iterator[Provisioning]:
    """The server's provisioner set (``create_api``'s, else the environment's, read when first
    needed: paths in it are relative to the server's working directory)."""
    state = request.app.state
    with Provisioning(state.ctx, lambda: required(_server_set(state))) as provisioning:
        yield provisioning


def _server_set(state: Any) -> ProvisionerSet | None:
    if getattr(state, "provisioner_set", None) is None:
        state.provisioner_set = load_from_env(os.environ, Path.cwd())
    found: ProvisionerSet | None = state.provisioner_set
    return found


@router.get("/deployments")
def list_deployments(request: Request, _: Reader,
                     project: Annotated[str | None, Query(
                         description="Only this project's (name or id); without it, the "
                                     "placements on node pools follow.")] = None,
                     ) -> list[ProjectDeployment | Workload]:
    return deployment_ops.list_all(request.app.state.ctx, project)


@router.post("/deployments", status_code=201, response_model=ProjectDeployment | Workload)
def create_deployment(request: Request, body: NewDeployment, who: Member) -> Response:
    def made() -> ProjectDeployment | Workload:
        with _provisioning(request) as provisioning:
            return deployment_ops.create(request.app.state.ctx, body, provisioning)

    return once(request, who, body, made, status=201)


@router.get("/deployments/{ref}")
def deployment_status(request: Request, ref: str, _: Reader) -> DeploymentStatus | Workload:
    with _provisioning(request) as provisioning:
        return deployment_ops.status(request.app.state.ctx, ref, provisioning)


@router.post("/deployments/{ref}/start")
def start_deployment(request: Request, ref: str, _: Member) -> ProjectDeployment:
    with _provisioning(request) as provisioning:
        return deployment_ops.start(request.app.state.ctx, ref, provisioning)


@router.post("/deployments/{ref}/restart")
def restart_deployment(request: Request, ref: str, _: Member) -> ProjectDeployment:
    with _provisioning(request) as provisioning:
        return deployment_ops.start(request.app.state.ctx, ref, provisioning, restart=True)


@router.post("/deployments/{ref}/stop")
def stop_deployment(request: Request, ref: str, _: Member) -> ProjectDeployment:
    return deployment_ops.stop(request.app.state.ctx, ref)


@router.delete("/deployments/{ref}")
def delete_deployment(request: Request, ref: str, _: Member) -> ProjectDeployment | Workload:
    with _provisioning(request) as provisioning:
        return deployment_ops.delete(request.app.state.ctx, ref, provisioning)
