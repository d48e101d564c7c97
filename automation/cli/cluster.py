"""``anycloud cluster …``"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from automation.cli.inputs import InputPath
from automation.cli.lazy import LazyGroup
from automation.cli.org import move_options, show_moved
from automation.cli.output import (
    F,
    handle_errors,
    json_option,
    print_fields,
    print_json,
    print_table,
)

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
        ("Kubeconfig", c.kubeconfig_path or (
            f"sealed on the server ({c.sealed_kubeconfig.fingerprint})"
            if c.sealed_kubeconfig else None)),
        ("Last error", c.last_error),
    ])


@click.group(cls=LazyGroup, lazy_subcommands={
    "preview": "automation.cli.rollout:preview_addons",
    "unlock": "automation.cli.rollout:unlock_addons",
})
def cluster() -> None:
    """Register and inspect the cluster node pools join."""


def _kubeconfig_options(fn: F) -> F:
    """``--kubeconfig FILE`` and ``--context``, as register and update take them."""
    fn = click.option("--context", "kube_context", help="Kubeconfig context to use.")(fn)
    return click.option(
        "--kubeconfig", required=True, type=InputPath(path_type=Path),
        help="Kubeconfig of the cluster (embedded mode: its path is stored; remote mode: its "
             "contents are sent and sealed).")(fn)


@cluster.command()
@click.argument("name")
@_kubeconfig_options
@click.option("--server-url", help="Public https address agents join (default: kubeconfig's).")
@click.option("--kubernetes-version", help="Offline: the cluster's version, e.g. v1.36.2+k3s1.")
@click.option("--ca-file", type=InputPath(path_type=Path), help="Offline: the cluster CA (PEM).")
@click.option("--offline", is_flag=True, help="Do not contact the cluster now.")
@click.option("--allow-private-address", is_flag=True,
              help="Accept a private, loopback or link-local server address: the VMs reach "
                   "it (VPC peering, VPN).")
@click.option("--org", help="The org that owns it and its pools (default: the org named "
                            "default).")
@json_option
@handle_errors
@click.pass_context
def register(ctx: click.Context, name: str, kubeconfig: Path, kube_context: str | None,
             server_url: str | None, kubernetes_version: str | None, ca_file: Path | None,
             offline: bool, allow_private_address: bool, org: str | None, as_json: bool
             ) -> None:
    """Record a cluster: its address, CA hash, version and identity. Embedded mode stores
    the kubeconfig's path; remote mode sends its contents, which the server seals (it must
    then carry its certificates and token inline, with no exec plugin)."""
    from automation.cli.backend import backend_from

    c = backend_from(ctx).register_cluster(dict(
        name=name, kubeconfig=kubeconfig, context=kube_context, server_url=server_url,
        kubernetes_version=kubernetes_version, ca_file=ca_file, offline=offline,
        allow_private_address=allow_private_address, org=org))
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
@move_options
def move(ctx: click.Context, ref: str, org_ref: str, as_json: bool) -> None:
    """Give a cluster to another org, with its node pools and the credentials only they use
    (what was made before tenants belongs to the org named default). Refused, changing
    nothing, when a pool on another cluster shares one of those credentials."""
    from automation.cli.backend import backend_from

    show_moved(backend_from(ctx).move_cluster(ref, org_ref), org_ref, as_json)


@cluster.command()
@click.argument("ref")
@_kubeconfig_options
@json_option
@handle_errors
@click.pass_context
def update(ctx: click.Context, ref: str, kubeconfig: Path, kube_context: str | None,
           as_json: bool) -> None:
    """Replace the cluster's kubeconfig (expired credentials, another user). It is read
    first and must reach the same cluster (the same CA hash and kube-system UID); refused,
    changing nothing, otherwise."""
    from automation.cli.backend import backend_from

    _show(backend_from(ctx).update_kubeconfig(ref, kubeconfig, kube_context), as_json)


@cluster.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def refresh(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Read the cluster again (a pending record becomes ready once it is read)."""
    from automation.cli.backend import backend_from

    _show(backend_from(ctx).refresh_cluster(ref), as_json)


@cluster.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def delete(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Forget a cluster (refused while it has node pools). Add-ons stay installed."""
    from automation.cli.backend import backend_from

    _show(backend_from(ctx).delete_cluster(ref), as_json)
