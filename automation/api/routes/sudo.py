"""The ``sudo`` administration: where projects' deployments are provisioned. Through the API
it is the admin role's (embedded mode: the OS users the config names superusers)."""

from __future__ import annotations

from fastapi import Request

from automation.api.provisioning import provisioning, server_set
from automation.api.routers import v1
from automation.api.security import Admin
from automation.models import Org, Project, ProjectDeployment, SetProvisioner
from automation.services import deployments, projects

router = v1("sudo")


@router.post("/sudo/projects/{ref}/provisioner")
def set_project_provisioner(request: Request, ref: str, body: SetProvisioner,
                            who: Admin) -> Project:
    """Set (or, with null, unset) the project's provisioner: it applies to each deployment
    the next time it starts."""
    return projects.set_project_provisioner(request.app.state.ctx, ref, body.provisioner,
                                            server_set(request.app.state), by=who.name)


@router.post("/sudo/projects/{ref}/restart")
def restart_project(request: Request, ref: str, _: Admin) -> list[ProjectDeployment]:
    """Each running deployment stopped and started (moved if its provisioner changed), and
    any interrupted start or move finished."""
    with provisioning(request) as found:
        return deployments.restart_project(request.app.state.ctx, ref, found.provisioner_set,
                                           found)


@router.post("/sudo/orgs/{ref}/default-provisioner")
def set_org_default_provisioner(request: Request, ref: str, body: SetProvisioner,
                                who: Admin) -> Org:
    """Set (or, with null, unset) the provisioner of the org's projects that choose none."""
    return projects.set_org_default_provisioner(request.app.state.ctx, ref, body.provisioner,
                                                server_set(request.app.state), by=who.name)
