"""``anycloud deployment …``: project deployments (a runtime from the provisioner set) and
placements on a node pool (``--node-pool``: work that blocks the pool's deletion)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from automation.cli.backend import backend_from
from automation.cli.output import handle_errors, info, json_option, print_json, print_table
from automation.cli.views import plain

if TYPE_CHECKING:
    from automation.models import ProjectDeployment


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
@click.option("--slots", type=int, help="With --project: slots held on a static runtime, or "
              "the size of a templated one (1).")
@click.option("--cpu", help="With --project: the runtime's CPU request (default: slots times "
              "the provisioner's per_slot.cpu, 1).")
@click.option("--memory", help="With --project: its memory (default: slots times 2Gi).")
@click.option("--storage", help="With --project: its data claim (default: slots times 10Gi; "
              "never shrunk).")
@json_option
@handle_errors
@click.pass_context
def create(ctx: click.Context, name: str, project: str | None, node_pool: str | None,
           service: bool, start_now: bool, slots: int | None, cpu: str | None,
           memory: str | None, storage: str | None, as_json: bool) -> None:
    """Create a deployment in a project (stopped: nothing is provisioned until `deployment
    start`), or place one on a node pool (`--node-pool`)."""
    from automation.models import NewDeployment, ProjectDeployment

    made = backend_from(ctx).create_deployment(NewDeployment(
        name=name, project=project, node_pool=node_pool, service=service, start=start_now,
        slots=slots, cpu=cpu, memory=memory, storage=storage))
    if as_json:
        print_json(made)
    elif isinstance(made, ProjectDeployment):
        _say(made)
    else:
        click.echo(f"{made.kind} {made.name} ({made.id}) placed on node pool {made.pool_id}")


def _start(ctx: click.Context, ref: str, as_json: bool, *, restart: bool) -> None:
    done = backend_from(ctx).start_deployment(ref, restart=restart)
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
    done = backend_from(ctx).stop_deployment(ref)
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
    from automation.models import DeploymentStatus

    found = backend_from(ctx).deployment_status(ref)
    if as_json:
        print_json(found)
        return
    if not isinstance(found, DeploymentStatus):
        click.echo(f"{found.kind} {found.name} ({found.id}) {found.state} on node pool "
                   f"{found.pool_id}")
        return
    nxt, health = found.next_start, found.health
    rows = [("state", found.state), ("project", found.project_id),
            ("provisioner", found.provisioner or "(none)"), ("provision id", found.provision_id),
            ("runtime host", found.runtime_host or "-"), ("data dir", found.data_dir or "-"),
            ("next start", f"{nxt.provisioner} ({nxt.level})" if nxt else "(unknown)")]
    if found.set_problem:
        rows.append(("provisioner set", f"PROBLEM: {found.set_problem}"))
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
    from automation.models import ProjectDeployment, Workload

    found = backend_from(ctx).list_deployments(project)
    if as_json:
        print_json(found)
        return
    mine = [d for d in found if isinstance(d, ProjectDeployment)]
    placed = [w for w in found if isinstance(w, Workload)]
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

    gone = backend_from(ctx).delete_deployment(ref)
    if as_json:
        print_json(gone)
    elif isinstance(gone, ProjectDeployment):
        click.echo(f"deployment {gone.name} deleted")
        info("its data in object storage is kept")
    else:
        click.echo(f"{gone.kind} {gone.name} {gone.state}")


@deployment.command()
@click.argument("ref")
@click.option("--ttl", "ttl_seconds", type=int,
              help="Seconds the token lives (default 300, at most 3600).")
@json_option
@handle_errors
@click.pass_context
def token(ctx: click.Context, ref: str, ttl_seconds: int | None, as_json: bool) -> None:
    """Print a short-lived token its runtime accepts (a JWT: aud its audience URL, sub its
    provision id), to stdout alone so it can be piped; verified against `deployment jwks`."""
    made = backend_from(ctx).deployment_token(ref, ttl_seconds)
    if as_json:
        print_json(made)
        return
    click.echo(made.token)
    info(f"for {made.audience} (sub {made.subject}), expires {made.expires_at:%H:%M:%S} UTC")


@deployment.command()
@handle_errors
@click.pass_context
def jwks(ctx: click.Context) -> None:
    """Print the keys runtimes verify tokens with (JSON Web Key Set; also served at
    GET /v1/.well-known/jwks.json without a token)."""
    print_json(backend_from(ctx).jwks())


@deployment.group()
def keys() -> None:
    """The keys that sign runtime tokens, and their rotation."""


def _show_keys(found: list[Any], as_json: bool) -> None:
    docs = plain(found)
    if as_json:
        print_json(docs)
        return
    print_table("Runtime-token signing keys", ["KID", "STATE", "CREATED", "RETIRES"],
                [(d["kid"], d["state"], d["createdAt"], d["retiresAt"] or d["retiredAt"] or "-")
                 for d in docs])


@keys.command("list")
@json_option
@handle_errors
@click.pass_context
def list_keys(ctx: click.Context, as_json: bool) -> None:
    """The signing keys, newest first: the one that signs, those still published until the
    tokens they signed have expired, and the retired ones."""
    _show_keys(backend_from(ctx).signing_keys(), as_json)


@keys.command("rotate")
@json_option
@handle_errors
@click.pass_context
def rotate_keys(ctx: click.Context, as_json: bool) -> None:
    """A new key signs from now on. The one it replaces stays in the key set until every
    token it signed has expired (an hour and a minute), so runtimes keep accepting them;
    the next rotation then retires it."""
    found = backend_from(ctx).rotate_signing_key()
    _show_keys(found, as_json)
    if not as_json:
        info("a runtime that caches the key set must fetch it again on an unknown kid")
