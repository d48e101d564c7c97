"""``anycloud deployment …``: project deployments (a runtime from the provisioner set) and
placements on a node pool (``--node-pool``: work that blocks the pool's deletion)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from automation.cli.context import app_from, provisioner_set_from
from automation.cli.output import handle_errors, info, json_option, print_json, print_table

if TYPE_CHECKING:
    from automation.models import ProjectDeployment, Workload
    from automation.provisioners.base import RuntimeProvisioner
    from automation.services.provisioner_factory import Built


class _Provisioners:
    """The set's provisioners, loaded on first use: deleting or stopping a deployment that
    holds nothing needs no provisioner set configured."""

    def __init__(self, ctx: click.Context) -> None:
        self.ctx = ctx
        self.built: Built | None = None

    def __call__(self, name: str) -> RuntimeProvisioner:
        if self.built is None:
            from automation.services.provisioner_factory import provisioners

            self.built = provisioners(app_from(self.ctx), provisioner_set_from(self.ctx))
        return self.built(name)

    def __enter__(self) -> _Provisioners:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.built is not None:
            self.built.close()


def _find(ctx: click.Context, ref: str) -> ProjectDeployment | Workload:
    """A project deployment, else a node-pool placement, by id or name."""
    from automation.errors import NotFound
    from automation.services import deployments, workloads

    app = app_from(ctx)
    try:
        return deployments.get_deployment(app, ref)
    except NotFound:
        return workloads.get_workload(app, ref)


def _project_deployment(ctx: click.Context, ref: str, verb: str) -> ProjectDeployment:
    from automation.errors import InvalidInput
    from automation.models import ProjectDeployment

    found = _find(ctx, ref)
    if not isinstance(found, ProjectDeployment):
        raise InvalidInput("deployment", ref, f"is a placement on node pool {found.pool_id} "
                           f"(deployment create --node-pool): it has no runtime to {verb}; "
                           "a project deployment runs on a nodepool provisioner instead")
    return found


def _say(d: ProjectDeployment) -> None:
    where = f" on {d.provisioner} at {d.runtime_host}" if d.provisioner else ""
    click.echo(f"deployment {d.name} ({d.id}) {d.state}{where}")


@click.group()
def deployment() -> None:
    """Deployments: a project's runtime from the provisioner set, or work placed on a pool."""


@deployment.command()
@click.argument("name")
@click.option("--project", help="The project (name or id): a deployment with a runtime from "
              "the provisioner set, created stopped.")
@click.option("--node-pool", help="Node pool id or name: place work on the pool.")
@click.option("--service", is_flag=True,
              help="With --node-pool: a Service (gives the pool an ingress entry).")
@click.option("--start", "start_now", is_flag=True, help="With --project: start it at once.")
@click.option("--slots", type=int, help="With --project: slots held on a static runtime (1).")
@click.option("--cpu", help="With --project: the runtime's CPU request (1).")
@click.option("--memory", help="With --project: its memory (2Gi).")
@click.option("--storage", help="With --project: its data claim (10Gi; never shrunk).")
@json_option
@handle_errors
@click.pass_context
def create(ctx: click.Context, name: str, project: str | None, node_pool: str | None,
           service: bool, start_now: bool, slots: int | None, cpu: str | None,
           memory: str | None, storage: str | None, as_json: bool) -> None:
    """Create a deployment in a project (stopped: nothing is provisioned until `deployment
    start`), or place one on a node pool (`--node-pool`)."""
    from automation.errors import InvalidInput

    if (project is None) == (node_pool is None):
        raise InvalidInput("--project", project,
                           "give exactly one of --project PROJECT and --node-pool POOL")
    asked: dict[str, Any] = {k: v for k, v in dict(
        slots=slots, cpu=cpu, memory=memory, storage=storage).items() if v is not None}
    if project is not None:
        if service:
            raise InvalidInput("--service", True, "goes with --node-pool only")
        from automation.provisioners.base import ProvisionRequest
        from automation.services.deployments import create_deployment, start_deployment

        app = app_from(ctx)
        made = create_deployment(app, name, project, ProvisionRequest(**asked))
        if start_now:
            with _Provisioners(ctx) as built:
                made = start_deployment(app, made.id, provisioner_set_from(ctx), built)
        print_json(made) if as_json else _say(made)
        return
    for option, value in [("start", start_now or None), *asked.items()]:
        if value is not None:
            raise InvalidInput(f"--{option}", value, "goes with --project only")
    from automation.models import WorkloadKind
    from automation.services.workloads import create_workload

    kind = WorkloadKind.SERVICE if service else WorkloadKind.DEPLOYMENT
    w = create_workload(app_from(ctx), name, str(node_pool), kind)
    if as_json:
        print_json(w)
    else:
        click.echo(f"{w.kind} {w.name} ({w.id}) placed on node pool {w.pool_id}")


def _start(ctx: click.Context, ref: str, as_json: bool, *, restart: bool) -> None:
    from automation.services.deployments import restart_deployment, start_deployment

    dep = _project_deployment(ctx, ref, "restart" if restart else "start")
    with _Provisioners(ctx) as built:
        done = (restart_deployment if restart else start_deployment)(
            app_from(ctx), dep.id, provisioner_set_from(ctx), built)
    print_json(done) if as_json else _say(done)


@deployment.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def start(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Start: provision its runtime with the provisioner it resolves to (project, else org
    default, else global default), moving it if that changed; wait until it is ready."""
    _start(ctx, ref, as_json, restart=False)


@deployment.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def stop(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Stop: its runtime stays provisioned (a later start may move it)."""
    from automation.services.deployments import stop_deployment

    done = stop_deployment(app_from(ctx), _project_deployment(ctx, ref, "stop").id)
    print_json(done) if as_json else _say(done)


@deployment.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def restart(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Stop and start: a changed project or org provisioner applies now."""
    _start(ctx, ref, as_json, restart=True)


@deployment.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def status(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Its provisioner, provision id, runtime host, what the next start would use, and what
    the provisioner finds of the runtime now (drift, missing objects, capacity)."""
    from automation.models import ProjectDeployment
    from automation.services.deployments import choice_for, deployment_health

    found = _find(ctx, ref)
    if not isinstance(found, ProjectDeployment):
        if as_json:
            print_json(found)
        else:
            click.echo(f"{found.kind} {found.name} ({found.id}) {found.state} on node pool "
                       f"{found.pool_id}")
        return
    pset = provisioner_set_from(ctx)
    nxt = choice_for(app_from(ctx), found, pset)
    with _Provisioners(ctx) as built:
        health = deployment_health(found, built)
    doc: dict[str, Any] = found.model_dump(mode="json", by_alias=True) | {
        "nextStart": {"provisioner": nxt.name, "level": nxt.level},
        "health": None if health is None else {"ok": health.ok, "detail": health.detail},
    }
    if as_json:
        print_json(doc)
        return
    rows = [("state", found.state), ("project", found.project_id),
            ("provisioner", found.provisioner or "(none)"), ("provision id", found.provision_id),
            ("runtime host", found.runtime_host or "-"), ("data dir", found.data_dir or "-"),
            ("next start", f"{nxt.name} ({nxt.level})")]
    if found.move:
        rows.append(("move", f"{found.move.get('from')} -> {found.move.get('to')} "
                             f"at {found.move.get('step')}: `deployment start` finishes it"))
    if health is not None:
        rows.append(("runtime", ("ok: " if health.ok else "DRIFT: ") + health.detail))
    if found.last_error:
        rows.append(("last error", found.last_error))
    print_table(f"Deployment {found.name} ({found.id})", ["", ""], rows)


@deployment.command("list")
@click.option("--project", help="Only this project's deployments.")
@json_option
@handle_errors
@click.pass_context
def list_(ctx: click.Context, project: str | None, as_json: bool) -> None:
    """Project deployments, then the deployments and services placed on a node pool."""
    from automation.services.deployments import list_deployments
    from automation.services.workloads import list_workloads

    app = app_from(ctx)
    mine = list_deployments(app, project)
    placed = [] if project else list_workloads(app)
    if as_json:
        print_json([*mine, *placed])
        return
    print_table("Deployments", ["ID", "NAME", "PROJECT / NODE POOL", "PROVISIONER", "STATE",
                                "HOST"],
                [(d.id, d.name, d.project_id, d.provisioner or "-", d.state,
                  d.runtime_host or "-") for d in mine]
                + [(w.id, w.name, w.pool_id, f"({w.kind} on pool)", w.state, "-")
                   for w in placed])


@deployment.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def delete(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Delete a deployment, releasing what its runtime holds (a service placed on a pool
    keeps counting until its objects are removed)."""
    from automation.models import ProjectDeployment
    from automation.services.deployments import delete_deployment
    from automation.services.workloads import delete_workload

    found = _find(ctx, ref)
    if isinstance(found, ProjectDeployment):
        with _Provisioners(ctx) as built:
            gone = delete_deployment(app_from(ctx), found.id, built)
        if as_json:
            print_json(gone)
        else:
            click.echo(f"deployment {gone.name} deleted")
            info("its data in object storage is kept")
        return
    w = delete_workload(app_from(ctx), found.id)
    if as_json:
        print_json(w)
    else:
        click.echo(f"{w.kind} {w.name} {w.state}")
