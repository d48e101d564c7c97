"""Deployments of projects: a runtime resource provisioned when the deployment starts, with
the provisioner resolved then (project, else org default, else global default; seed 002).

- A running deployment keeps its provisioner; a project or org change applies the next time
  it goes from stopped to running (``restart`` does both).
- The global default only places runtimes that have none: changing it, or unsetting a project
  or org choice, moves nothing that is provisioned already.
- A start that resolves to another provisioner than the one holding the runtime moves it,
  keeping the provision id: deprovision with the old one, reset, provision with the new one,
  update the host. The old disk is not migrated (the runtime recovers from object storage).
- Each step is written to the ledger before it is taken (``move``), so a process killed at any
  point resumes where it stopped: one resource, the same id, released exactly once.
- A move asks the new provisioner first (``preflight``: capacity, cluster, namespace,
  templates) and releases nothing when it says no: the deployment stays where it was, the
  refusal recorded as its ``lastError``. A move interrupted later follows the choice in force
  when it is resumed (a superuser who changed the project's choice redirects it).
- Delete never needs a provisioner back: what cannot be released is named, with how to
  remove it by hand, and static slots the ledger holds are released by the ledger.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import sqlalchemy as sa

from automation import ids
from automation.app import App
from automation.crash import crashpoint
from automation.errors import AnycloudError, Conflict, InvalidInput
from automation.ledger import schema
from automation.ledger.records import (
    Expectation,
    check_deployment_name_free,
    find_live,
    record_event,
)
from automation.models import MAX_SLOTS, ProjectDeployment
from automation.provisioners.base import Health, ProvisionRequest
from automation.provisioners.objects import PROVISION_ID_LABEL
from automation.provisioners.provisioner_set import ProvisionerSet
from automation.provisioners.resolve import Resolved, resolve
from automation.services.provisioner_factory import Provisioners
from automation.validation import check_name, check_quantity

_dep = schema.deployments
_LIVE = _dep.c.state != "deleted"


def create_deployment(app: App, name: str, project: str,
                      request: ProvisionRequest | None = None) -> ProjectDeployment:
    """A stopped deployment: nothing is provisioned until it starts. ``request`` (what every
    start asks of the runtime) is kept with it."""
    check_name("name", name)
    asked = check_request(request or ProvisionRequest())
    now = app.clock.now()
    with app.ledger.write() as conn:
        owner = find_live(conn, schema.projects, project, live=sa.true(), kind="project",
                          field="--project")
        check_deployment_name_free(conn, name)
        dep_id = ids.new_id("dpl")
        row = dict(id=dep_id, name=name, project_id=owner["id"], state="stopped",
                   provision_id="rt-" + dep_id.removeprefix("dpl-"), created_at=now,
                   updated_at=now, resources=asdict(asked))
        conn.execute(_dep.insert().values(**row))
        record_event(conn, now, "deployment", dep_id, "created",
                     f"deployment {name} in project {owner['name']}")
    return ProjectDeployment.model_validate(row)


def check_request(request: ProvisionRequest) -> ProvisionRequest:
    if not 1 <= request.slots <= MAX_SLOTS:
        raise InvalidInput("--slots", request.slots, f"must be 1 to {MAX_SLOTS}")
    for field in ("cpu", "memory", "storage"):
        if getattr(request, field) is not None:
            check_quantity(f"--{field}", getattr(request, field))
    return request


def list_deployments(app: App, project: str | None = None) -> list[ProjectDeployment]:
    with app.ledger.read() as conn:
        query = sa.select(_dep).where(_LIVE).order_by(_dep.c.name)
        if project is not None:
            owner = find_live(conn, schema.projects, project, live=sa.true(), kind="project",
                              field="--project")
            query = query.where(_dep.c.project_id == owner["id"])
        return [ProjectDeployment.model_validate(dict(r)) for r in conn.execute(query).mappings()]


def get_deployment(app: App, ref: str) -> ProjectDeployment:
    with app.ledger.read() as conn:
        return ProjectDeployment.model_validate(dict(_row(conn, ref)))


def choice_for(app: App, dep: ProjectDeployment, provisioner_set: ProvisionerSet) -> Resolved:
    """What a start would use: the resolution, except that a runtime already provisioned
    stays where it is unless the project or its org chose otherwise."""
    with app.ledger.read() as conn:
        project = conn.execute(sa.select(schema.projects).where(
            schema.projects.c.id == dep.project_id)).mappings().one()
        org = conn.execute(sa.select(schema.orgs).where(
            schema.orgs.c.id == project["org_id"])).mappings().one()
    resolved = resolve(provisioner_set, project=project["name"],
                       project_choice=project["provisioner"], org=org["name"],
                       org_default=org["default_provisioner"])
    if resolved.level == "global" and dep.provisioner is not None:
        return Resolved(dep.provisioner, "current")
    return resolved


def start_deployment(app: App, ref: str, provisioner_set: ProvisionerSet,
                     provisioners: Provisioners,
                     request: ProvisionRequest | None = None,
                     expect: Expectation | None = None) -> ProjectDeployment:
    """stopped -> running. A running deployment is left as it is (its provisioner kept); an
    interrupted move is finished first, to the provisioner it was moving to. ``expect``: a
    check of the locked record before anything is written or provisioned (``If-Match``)."""
    dep = check_version(app, ref, expect)
    request = request or ProvisionRequest(**(dep.resources or {}))
    if dep.state == "running" and dep.move is None:
        return dep
    if dep.move is not None:
        dep = _follow_choice(app, dep, provisioner_set, provisioners, request)
    else:
        target = choice_for(app, dep, provisioner_set).name
        step = "provision" if dep.provisioner in (None, target) else "deprovision"
        if step == "deprovision":
            _check_shared_data(app, dep, provisioner_set, str(dep.provisioner), target)
            _preflight(app, dep, provisioners, target, request)
        dep = _write(app, dep, move={"from": dep.provisioner, "to": target, "step": step},
                     event=("move_started" if step == "deprovision" else "starting",
                            f"to {target}" + (f" from {dep.provisioner}"
                                              if step == "deprovision" else "")),
                     expect=expect)
        crashpoint("after-move-intent")
    return _finish_move(app, dep, provisioners, request)


def _check_shared_data(app: App, dep: ProjectDeployment, provisioner_set: ProvisionerSet,
                       source: str, target: str) -> None:
    """A moved runtime finds its data again only where it left it: a move between
    provisioners whose data bucket or metastore differ is refused before anything is
    released (recorded as the deployment's lastError)."""
    for what, old, new in zip(("data_bucket", "metastore_id"),
                              provisioner_set.shared_data(source),
                              provisioner_set.shared_data(target), strict=True):
        if old != new:
            exc = Conflict(f"moving from {source} to {target} would change its {what} from "
                           f"{old!r} to {new!r}: the runtime would not find its data",
                           code="SHARED_DATA_DIFFERS", field=what, value=new,
                           rule=f"every provisioner a deployment moves between must name the "
                                f"same {what} (set it on both, or move it by hand)")
            _write(app, dep, last_error=exc.message,
                   event=("move_refused", f"to {target}, nothing released: {exc.message}"))
            raise exc


def _preflight(app: App, dep: ProjectDeployment, provisioners: Provisioners, target: str,
               request: ProvisionRequest) -> None:
    """Ask ``target`` before anything is released; a refusal is recorded and raised."""
    try:
        provisioners(target).preflight(dep.provision_id, request)
    except AnycloudError as exc:
        _write(app, dep, last_error=exc.message,
               event=("move_refused", f"to {target}, nothing released: {exc.message}"))
        raise


def _follow_choice(app: App, dep: ProjectDeployment, provisioner_set: ProvisionerSet,
                   provisioners: Provisioners, request: ProvisionRequest) -> ProjectDeployment:
    """A pending move goes where the choice in force now says (seed 002: the choice at the
    next stopped -> running), not where it was headed when it stopped."""
    move = dict(dep.move or {})
    target = choice_for(app, dep, provisioner_set).name
    if target == move["to"]:
        return dep
    step = move["step"]
    if step == "deprovision" and target == move["from"]:
        step = "provision"  # back to where it still is: nothing to release
    elif step == "deprovision":
        _check_shared_data(app, dep, provisioner_set, move["from"], target)
        _preflight(app, dep, provisioners, target, request)
    return _write(app, dep, move=move | {"to": target, "step": step},
                  event=("move_redirected", f"to {target} (was to {move['to']})"))


def _finish_move(app: App, dep: ProjectDeployment, provisioners: Provisioners,
                 request: ProvisionRequest) -> ProjectDeployment:
    move = dict(dep.move or {})
    try:
        if move["step"] == "deprovision":
            provisioners(move["from"]).deprovision(dep.provision_id)
            crashpoint("after-deprovision")
            # Reset for the new provisioner, keeping the id: nothing holds it now.
            dep = _write(app, dep, move=move | {"step": "provision"}, provisioner=None,
                         runtime_host=None, data_dir=None, audience=None,
                         event=("deprovisioned", f"released by {move['from']}"))
        new = provisioners(move["to"])
        held = new.provision(dep.provision_id, request)
        crashpoint("after-provision")
        new.await_ready(held)
    except AnycloudError as exc:
        _write(app, dep, last_error=exc.message, event=("start_failed", exc.message))
        raise
    return _write(app, dep, move=None, state="running", provisioner=move["to"],
                  runtime_host=held.host, data_dir=held.data_dir,
                  audience=held.audience_url or held.host, last_error=None,
                  event=("running", f"on {move['to']} at {held.host}"
                         + "".join(f"; warning: {w}" for w in held.warnings)))


def stop_deployment(app: App, ref: str, expect: Expectation | None = None
                    ) -> ProjectDeployment:
    """running -> stopped; the runtime stays provisioned (a later start may move it)."""
    dep = check_version(app, ref, expect)
    if dep.state == "stopped":
        return dep
    return _write(app, dep, state="stopped", event=("stopped", "runtime kept"), expect=expect)


def restart_deployment(app: App, ref: str, provisioner_set: ProvisionerSet,
                       provisioners: Provisioners, expect: Expectation | None = None
                       ) -> ProjectDeployment:
    """Stop and start. A restart that would move the runtime asks the new provisioner
    first: refused, the deployment keeps running where it is."""
    dep = get_deployment(app, ref)
    if dep.state == "running" and dep.move is None:
        target = choice_for(app, dep, provisioner_set).name
        if target != dep.provisioner:
            _check_shared_data(app, dep, provisioner_set, str(dep.provisioner), target)
            _preflight(app, dep, provisioners, target,
                       ProvisionRequest(**(dep.resources or {})))
    stop_deployment(app, ref, expect)
    return start_deployment(app, ref, provisioner_set, provisioners)


def restart_project(app: App, project: str, provisioner_set: ProvisionerSet,
                    provisioners: Provisioners) -> list[ProjectDeployment]:
    """``sudo project restart``: each running deployment stopped and started again, and each
    one whose start was interrupted (a move pending, state still ``stopped``) finished: run
    again after a crash mid-move, the same command completes what it began."""
    running = [d for d in list_deployments(app, project)
               if d.state == "running" or d.move is not None]
    return [restart_deployment(app, d.id, provisioner_set, provisioners) for d in running]


def delete_deployment(app: App, ref: str, provisioners: Provisioners,
                      expect: Expectation | None = None) -> ProjectDeployment:
    """Release what the runtime holds (with whichever provisioner holds or may hold it),
    then forget the deployment. ``expect`` is checked before anything is released. A
    provisioner that is broken or gone from the set does not block it: what it could not
    release is recorded (``lastError`` of the deleted record and its event) with how to
    remove it by hand, and its static slots, which the ledger itself holds, are freed."""
    dep = check_version(app, ref, expect)
    holders = {dep.provisioner} | ({(dep.move or {}).get("from"), (dep.move or {}).get("to")}
                                   if dep.move else set())
    left: list[str] = []
    for name in sorted(h for h in holders if h):
        try:
            provisioners(name).deprovision(dep.provision_id)
        except AnycloudError as exc:
            left.append(f"{name}: {exc.message}")
    if left:
        with app.ledger.write() as conn:  # slots are rows of ours: no provisioner needed
            conn.execute(schema.static_allocations.delete().where(
                schema.static_allocations.c.provision_id == dep.provision_id))
        left.append(f"remove any objects by hand: kubectl delete deployment,service,ingress,"
                    f"pvc -l {PROVISION_ID_LABEL}={dep.provision_id} -n <its namespace>")
    note = "; ".join(left) or None
    return _write(app, dep, state="deleted", move=None, provisioner=None, runtime_host=None,
                  audience=None, deleted=True, last_error=f"not released: {note}" if note else None,
                  event=("deleted", "runtime released" if not note
                         else f"deleted; not released: {note}"))


def deployment_health(dep: ProjectDeployment, provisioners: Provisioners) -> Health | None:
    """What its provisioner says of the runtime (None when nothing is provisioned)."""
    if dep.provisioner is None:
        return None
    return provisioners(dep.provisioner).check(dep.provision_id)


def check_version(app: App, ref: str, expect: Expectation | None) -> ProjectDeployment:
    """The deployment, once ``expect`` passed on its locked row (None: no check)."""
    if expect is None:
        return get_deployment(app, ref)
    with app.ledger.write() as conn:
        dep = ProjectDeployment.model_validate(dict(_row(conn, ref, lock=True)))
        expect(dep)
    return dep


def _row(conn: Any, ref: str, *, lock: bool = False) -> Any:
    return find_live(conn, _dep, ref, live=_LIVE, kind="deployment", field="deployment",
                     lock=lock)


def _write(app: App, dep: ProjectDeployment, *, event: tuple[str, str],
           deleted: bool = False, expect: Expectation | None = None,
           **values: Any) -> ProjectDeployment:
    """``expect``: checked again under the lock of this write, so a change that landed since
    the request's first check refuses it here instead of being overwritten."""
    now = app.clock.now()
    values["updated_at"] = now
    if deleted:
        values["deleted_at"] = now
    with app.ledger.write() as conn:
        if expect is not None:
            expect(ProjectDeployment.model_validate(dict(_row(conn, dep.id, lock=True))))
        conn.execute(_dep.update().where(_dep.c.id == dep.id).values(**values))
        record_event(conn, now, "deployment", dep.id, event[0], event[1])
        row = conn.execute(sa.select(_dep).where(_dep.c.id == dep.id)).mappings().one()
    return ProjectDeployment.model_validate(dict(row))
