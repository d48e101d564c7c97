"""``anycloud credentials …``"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from automation.cli.context import app_from
from automation.cli.output import handle_errors, json_option, print_json, print_table

if TYPE_CHECKING:
    from automation.models import Credential


def _rows(items: list[Credential]) -> list[tuple[str, ...]]:
    return [(c.id, c.name, c.provider, ", ".join(f"{k}={v}" for k, v in c.reference.items()))
            for c in items]


def _svc():  # type: ignore[no-untyped-def]
    """The service module, imported on use: --help must not load the ledger stack."""
    from automation.services import credentials

    return credentials


@click.group()
def credentials() -> None:
    """Compute credentials (stored as references, never as secrets)."""


@credentials.command()
@click.argument("name")
@click.option("--provider", required=True, help="aws, gcp or azure (see the catalog).")
@click.option("--profile", help="aws: shared-config profile.")
@click.option("--role-arn", help="aws: IAM role to assume.")
@click.option("--project", help="gcp: project id.")
@click.option("--key-file", help="gcp: path of a service-account key file.")
@click.option("--subscription-id", help="azure: subscription UUID.")
@click.option("--tenant-id", help="azure: tenant UUID.")
@click.option("--client-id", help="azure: client UUID (secret read from AZURE_CLIENT_SECRET).")
@click.option("--api-key-env", help="other providers: environment variable of the API key.")
@json_option
@handle_errors
@click.pass_context
def new(ctx: click.Context, name: str, provider: str, as_json: bool, **options: str | None) -> None:
    """Add a credential reference."""
    cred = _svc().new_credential(app_from(ctx), _svc().NewCredential(name, provider, options))
    if as_json:
        print_json(cred)
    else:
        print_table(None, ["ID", "NAME", "PROVIDER", "REFERENCE"], _rows([cred]))


@credentials.command("list")
@json_option
@handle_errors
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """List credentials."""
    from automation.cli.backend import backend_from

    items = backend_from(ctx).list_credentials()
    if as_json:
        print_json(items)
    else:
        print_table("Credentials", ["ID", "NAME", "PROVIDER", "REFERENCE"], _rows(items))


@credentials.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def delete(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Delete a credential (refused while a node pool uses it)."""
    cred = _svc().delete_credential(app_from(ctx), ref)
    if as_json:
        print_json(cred)
    else:
        click.echo(f"credential {cred.name} deleted")
