"""``anycloud deployment …``: work that targets a node pool (and blocks its deletion)."""

from __future__ import annotations

import click

from automation.cli.context import app_from
from automation.cli.output import handle_errors, json_option, print_json, print_table


def _svc():  # type: ignore[no-untyped-def]
    """The service module, imported on use: --help must not load the ledger stack."""
    from automation.services import workloads

    return workloads


@click.group()
def deployment() -> None:
    """Deployments and services placed on a node pool."""


@deployment.command()
@click.argument("name")
@click.option("--node-pool", required=True, help="Node pool id or name.")
@click.option("--service", is_flag=True, help="A Service (gives the pool an ingress entry).")
@json_option
@handle_errors
@click.pass_context
def create(ctx: click.Context, name: str, node_pool: str, service: bool, as_json: bool) -> None:
    """Place a deployment (or service) on a node pool."""
    from automation.models import WorkloadKind

    kind = WorkloadKind.SERVICE if service else WorkloadKind.DEPLOYMENT
    w = _svc().create_workload(app_from(ctx), name, node_pool, kind)
    if as_json:
        print_json(w)
    else:
        click.echo(f"{w.kind} {w.name} ({w.id}) placed on node pool {w.pool_id}")


@deployment.command("list")
@json_option
@handle_errors
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """List deployments and services that still target a pool."""
    items = _svc().list_workloads(app_from(ctx))
    if as_json:
        print_json(items)
    else:
        print_table("Deployments", ["ID", "NAME", "KIND", "NODE POOL", "STATE"],
                    [(w.id, w.name, w.kind, w.pool_id, w.state) for w in items])


@deployment.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def delete(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Delete a deployment (a service keeps counting until its objects are removed)."""
    w = _svc().delete_workload(app_from(ctx), ref)
    if as_json:
        print_json(w)
    else:
        click.echo(f"{w.kind} {w.name} {w.state}")
