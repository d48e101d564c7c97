"""``anycloud org`` and ``anycloud project``: who deployments belong to."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from automation.cli.backend import backend_from
from automation.cli.output import F, handle_errors, json_option, print_json, print_table

if TYPE_CHECKING:
    from automation.models import MovedToOrg


@click.group()
def org() -> None:
    """Organisations: they own projects, and may have a default provisioner (sudo)."""


@org.command("create")
@click.argument("name")
@json_option
@handle_errors
@click.pass_context
def org_create(ctx: click.Context, name: str, as_json: bool) -> None:
    """Create an org."""
    made = backend_from(ctx).create_org(name)
    print_json(made) if as_json else click.echo(f"org {made.name} ({made.id}) created")


@org.command("list")
@json_option
@handle_errors
@click.pass_context
def org_list(ctx: click.Context, as_json: bool) -> None:
    """Orgs and their default provisioner (- : the global default)."""
    found = backend_from(ctx).list_orgs()
    if as_json:
        print_json(found)
    else:
        print_table("Orgs", ["ID", "NAME", "DEFAULT PROVISIONER"],
                    [(o.id, o.name, o.default_provisioner) for o in found])


@click.group()
def project() -> None:
    """Projects: they own deployments, and may choose a provisioner (sudo)."""


@project.command("create")
@click.argument("name")
@click.option("--org", "org_ref", required=True, help="The org (name or id).")
@json_option
@handle_errors
@click.pass_context
def project_create(ctx: click.Context, name: str, org_ref: str, as_json: bool) -> None:
    """Create a project in an org."""
    made = backend_from(ctx).create_project(name, org_ref)
    print_json(made) if as_json else click.echo(f"project {made.name} ({made.id}) created")


@project.command("list")
@click.option("--org", "org_ref", help="Only this org's projects.")
@json_option
@handle_errors
@click.pass_context
def project_list(ctx: click.Context, org_ref: str | None, as_json: bool) -> None:
    """Projects and their provisioner (- : the org's default, else the global one)."""
    found = backend_from(ctx).list_projects(org_ref)
    if as_json:
        print_json(found)
    else:
        print_table("Projects", ["ID", "NAME", "ORG", "PROVISIONER"],
                    [(p.id, p.name, p.org_id, p.provisioner) for p in found])


def move_options(fn: F) -> F:
    """``cluster move`` and ``credentials move``: REF, ``--org``, ``--json``, the error
    boundary and the context."""
    wrapped = json_option(handle_errors(click.pass_context(fn)))
    wrapped = click.option("--org", "org_ref", required=True,
                           help="The org to move it to (name or id).")(wrapped)
    return click.argument("ref")(wrapped)  # type: ignore[return-value]


def show_moved(moved: MovedToOrg, org_ref: str, as_json: bool) -> None:
    """``cluster move`` and ``credentials move``: what now belongs to the org."""
    if as_json:
        print_json(moved)
        return
    parts = [f"{label} {', '.join(names)}" for label, names in (
        ("cluster", moved.clusters), ("node pool(s)", moved.node_pools),
        ("credential(s)", moved.credentials)) if names]
    click.echo(f"moved to org {org_ref} ({moved.org_id}): {'; '.join(parts)}")
