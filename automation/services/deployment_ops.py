"""What ``deployment …`` does, for the CLI and the API alike: a name is a project deployment
(a runtime from the provisioner set) or, failing that, work placed on a node pool.

The provisioner set and the provisioners built from it are asked for only by the operations
that provision (create --start, start, restart, status, delete of a project deployment):
stopping one, or anything about a placement, needs no provisioner set configured.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from automation.app import App
from automation.errors import AnycloudError, InvalidInput, NotFound
from automation.ledger.records import Expectation
from automation.models import (
    DeploymentStatus,
    NewDeployment,
    ProjectDeployment,
    Workload,
    WorkloadKind,
)
from automation.provisioners.base import Health, ProvisionRequest, RuntimeProvisioner
from automation.provisioners.provisioner_set import ProvisionerSet
from automation.services import deployments, workloads

Found = ProjectDeployment | Workload


class Provisioning:
    """The set (``load``: the caller's way to get it, which refuses when none is configured)
    and its provisioners, built on first use and closed with this object."""

    def __init__(self, app: App, load: Callable[[], ProvisionerSet]) -> None:
        self.app, self._load = app, load
        self._set: ProvisionerSet | None = None
        self._built: Any = None

    @property
    def provisioner_set(self) -> ProvisionerSet:
        if self._set is None:
            self._set = self._load()
        return self._set

    def __call__(self, name: str) -> RuntimeProvisioner:
        if self._built is None:
            from automation.services.provisioner_factory import provisioners

            self._built = provisioners(self.app, self.provisioner_set)
        provisioner: RuntimeProvisioner = self._built(name)
        return provisioner

    def __enter__(self) -> Provisioning:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._built is not None:
            self._built.close()


def find(app: App, ref: str) -> Found:
    """A project deployment, else a node-pool placement, by id or name."""
    try:
        return deployments.get_deployment(app, ref)
    except NotFound:
        return workloads.get_workload(app, ref)


def project_deployment(app: App, ref: str, verb: str) -> ProjectDeployment:
    found = find(app, ref)
    if not isinstance(found, ProjectDeployment):
        raise InvalidInput("deployment", ref, f"is a placement on node pool {found.pool_id} "
                           f"(deployment create --node-pool): it has no runtime to {verb}; "
                           "a project deployment runs on a nodepool provisioner instead")
    return found


def create(app: App, req: NewDeployment, provisioning: Provisioning) -> Found:
    """A stopped project deployment (started at once with ``start``), or a placement on a
    node pool (``node_pool``)."""
    if (req.project is None) == (req.node_pool is None):
        raise InvalidInput("--project", req.project,
                           "give exactly one of --project PROJECT and --node-pool POOL")
    asked: dict[str, Any] = {k: v for k, v in dict(slots=req.slots, cpu=req.cpu, memory=req.memory,
                                   storage=req.storage).items() if v is not None}
    if req.project is not None:
        if req.service:
            raise InvalidInput("--service", True, "goes with --node-pool only")
        made = deployments.create_deployment(app, req.name, req.project,
                                             ProvisionRequest(**asked))
        if req.start:  # one step: a refused start leaves no deployment behind
            try:
                made = deployments.start_deployment(app, made.id,
                                                    provisioning.provisioner_set, provisioning)
            except AnycloudError:
                deployments.delete_deployment(app, made.id, provisioning)
                raise
        return made
    for option, value in [("start", req.start or None), *asked.items()]:
        if value is not None:
            raise InvalidInput(f"--{option}", value, "goes with --project only")
    kind = WorkloadKind.SERVICE if req.service else WorkloadKind.DEPLOYMENT
    return workloads.create_workload(app, req.name, str(req.node_pool), kind)


def start(app: App, ref: str, provisioning: Provisioning, *, restart: bool = False,
          expect: Expectation | None = None) -> ProjectDeployment:
    """``expect``: the If-Match check (``automation.api.etags``), under the row's lock."""
    dep = project_deployment(app, ref, "restart" if restart else "start")
    if restart:
        return deployments.restart_deployment(app, dep.id, provisioning.provisioner_set,
                                              provisioning, expect)
    return deployments.start_deployment(app, dep.id, provisioning.provisioner_set,
                                        provisioning, expect=expect)


def stop(app: App, ref: str, expect: Expectation | None = None) -> ProjectDeployment:
    return deployments.stop_deployment(app, project_deployment(app, ref, "stop").id, expect)


def status(app: App, ref: str, provisioning: Provisioning) -> DeploymentStatus | Workload:
    """A project deployment with what its next start would use and what its provisioner
    finds of the runtime now; a placement as it is."""
    return describe(app, find(app, ref), provisioning)


def describe(app: App, found: Found, provisioning: Provisioning) -> DeploymentStatus | Workload:
    """``status`` of a record already read."""
    if not isinstance(found, ProjectDeployment):
        return found
    # What the ledger knows is always answered; a missing or broken set, or a provisioner
    # gone from it, is said beside it rather than refusing the whole status.
    next_start, problem, health = None, None, None
    try:
        nxt = deployments.choice_for(app, found, provisioning.provisioner_set)
        next_start = {"provisioner": nxt.name, "level": nxt.level}
    except AnycloudError as exc:
        problem = exc.message
    if problem is None:
        try:
            found_health = deployments.deployment_health(found, provisioning)
        except AnycloudError as exc:
            found_health = Health(False, exc.message)
        if found_health is not None:
            health = {"ok": found_health.ok, "detail": found_health.detail}
    return DeploymentStatus.model_validate({
        **found.model_dump(by_alias=False), "next_start": next_start, "health": health,
        "set_problem": problem})


def list_all(app: App, project: str | None = None) -> list[Found]:
    """Project deployments, then (without ``project``) the placements on node pools."""
    mine: list[Found] = list(deployments.list_deployments(app, project))
    return mine + ([] if project else list(workloads.list_workloads(app)))


def delete(app: App, ref: str, provisioning: Provisioning,
           expect: Expectation | None = None) -> Found:
    """A project deployment's runtime released, then forgotten; a placement removed (a
    service keeps counting until its objects are gone)."""
    found = find(app, ref)
    if isinstance(found, ProjectDeployment):
        return deployments.delete_deployment(app, found.id, provisioning, expect)
    return workloads.delete_workload(app, found.id, expect)
