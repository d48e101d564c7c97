"""``anycloud cluster …``"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from automation.cli.context import app_from
from automation.cli.inputs import InputPath
from automation.cli.lazy import LazyGroup
from automation.cli.output import handle_errors, json_option, print_fields, print_json, print_table

if TYPE_CHECKING:
    from automation.models import Cluster


def _show(c: Cluster, as_json: bool) -> None:
    if as_json:
        print_json(c)
        return
    print_fields(f"Cluster {c.name}", [
        ("ID", c.id), ("State", c.state), ("Server", c.server_url),
        ("Kubernetes", c.kubernetes_version), ("CA SHA-256", c.ca_sha256),
        ("kube-system UID", c.kube_system_uid), ("Facts from", c.facts_source),
        ("Last error", c.last_error),
    ])


def _svc():  # type: ignore[no-untyped-def]
    """The service module, imported on use: --help must not load the ledger stack."""
    from automation.services import clusters

    return clusters


@click.group(cls=LazyGroup, lazy_subcommands={
    "preview": "automation.cli.rollout:preview_addons",
    "unlock": "automation.cli.rollout:unlock_addons",
})
def cluster() -> None:
    """Register and inspect the cluster node pools join."""


@cluster.command()
@click.argument("name")
@click.option("--kubeconfig", required=True, type=InputPath(path_type=Path),
              help="Kubeconfig of the cluster (its path is stored, not its content).")
@click.option("--context", "kube_context", help="Kubeconfig context to use.")
@click.option("--server-url", help="Public https address agents join (default: kubeconfig's).")
@click.option("--kubernetes-version", help="Offline: the cluster's version, e.g. v1.36.2+k3s1.")
@click.option("--ca-file", type=InputPath(path_type=Path), help="Offline: the cluster CA (PEM).")
@click.option("--offline", is_flag=True, help="Do not contact the cluster now.")
@json_option
@handle_errors
@click.pass_context
def register(ctx: click.Context, name: str, kubeconfig: Path, kube_context: str | None,
             server_url: str | None, kubernetes_version: str | None, ca_file: Path | None,
             offline: bool, as_json: bool) -> None:
    """Record a cluster: its address, CA hash, version and identity."""
    c = _svc().register_cluster(app_from(ctx), _svc().RegisterCluster(
        name=name, kubeconfig=kubeconfig, context=kube_context, server_url=server_url,
        kubernetes_version=kubernetes_version, ca_file=ca_file, offline=offline,
    ))
    _show(c, as_json)


@cluster.command("list")
@json_option
@handle_errors
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """List registered clusters."""
    from automation.cli.backend import backend_from

    items = backend_from(ctx).list_clusters()
    if as_json:
        print_json(items)
        return
    print_table("Clusters", ["ID", "NAME", "STATE", "KUBERNETES", "FACTS"],
                [(c.id, c.name, c.state, c.kubernetes_version, c.facts_source) for c in items])


@cluster.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def status(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Show one cluster record."""
    from automation.cli.backend import backend_from

    _show(backend_from(ctx).get_cluster(ref), as_json)


@cluster.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def refresh(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Read the cluster again (a pending record becomes ready once it is read)."""
    _show(_svc().refresh_cluster(app_from(ctx), ref), as_json)


@cluster.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def delete(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Forget a cluster (refused while it has node pools). Add-ons stay installed."""
    _show(_svc().delete_cluster(app_from(ctx), ref), as_json)
