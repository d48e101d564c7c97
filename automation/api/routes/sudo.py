"""The ``sudo`` administration: where projects' deployments are provisioned. Through the API
it is the admin role's (embedded mode: the OS users the config names superusers)."""

from __future__ import annotations

from fastapi import Request, Response

from automation.api import etags
from automation.api.provisioning import provisioning, server_set
from automation.api.routers import v1
from automation.api.security import Admin
from automation.models import Org, Project, ProjectDeployment, SetProvisioner
from automation.services import deployments, projects

router = v1("sudo")


@router.post("/sudo/projects/{ref}/provisioner", responses=etags.STALE)
def set_project_provisioner(request: Request, response: Response, ref: str,
                            body: SetProvisioner, who: Admin,
                            if_match: etags.IfMatch = None) -> Project:
    """Set (or, with null, unset) the project's provisioner: it applies to each deployment
    the next time it starts. If-Match: only if the project is still as it was read."""
    done = projects.set_project_provisioner(request.app.state.ctx, ref, body.provisioner,
                                            server_set(request.app.state), by=who.name,
                                            expect=etags.expectation(if_match))
    etags.tag(response, done)
    return done


@router.post("/sudo/projects/{ref}/restart")
def restart_project(request: Request, ref: str, _: Admin) -> list[ProjectDeployment]:
    """Each running deployment stopped and started (moved if its provisioner changed), and
    any interrupted start or move finished."""
    with provisioning(request) as found:
        return deployments.restart_project(request.app.state.ctx, ref, found.provisioner_set,
                                           found)


@router.post("/sudo/orgs/{ref}/default-provisioner", responses=etags.STALE)
def set_org_default_provisioner(request: Request, response: Response, ref: str,
                                body: SetProvisioner, who: Admin,
                                if_match: etags.IfMatch = None) -> Org:
    """Set (or, with null, unset) the provisioner of the org's projects that choose none.
    If-Match: only if the org is still as it was read."""
    done = projects.set_org_default_provisioner(request.app.state.ctx, ref, body.provisioner,
                                                server_set(request.app.state), by=who.name,
                                                expect=etags.expectation(if_match))
    etags.tag(response, done)
    return done
