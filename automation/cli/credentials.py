"""``anycloud credentials …``

Embedded mode stores references (a profile, a key file's path, the variable a secret is
in). In remote mode a reference to this machine's files means nothing to the server, so the
secret itself is read here (the key file's contents, AZURE_CLIENT_SECRET, the named API key
variable) and sent; the server seals it. An AWS access key (``--access-key-id``, its secret
from AWS_SECRET_ACCESS_KEY or a hidden prompt) is sealed in both modes: it is not a
reference to anything.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

import click

from automation.cli.backend import backend_from
from automation.cli.org import move_options, show_moved
from automation.cli.output import handle_errors, json_option, print_json, print_table

if TYPE_CHECKING:
    from automation.models import Credential, SecretMaterial


def _rows(items: list[Credential]) -> list[tuple[str, ...]]:
    def secret(c: Credential) -> str:
        if c.secret is None:
            return "-"
        return " ".join([c.secret.fingerprint, *(f"{k}={v}" for k, v in c.secret.fields.items())])

    return [(c.id, c.name, c.provider,
             ", ".join(f"{k}={v}" for k, v in c.reference.items()) or "-", secret(c))
            for c in items]


HEADERS = ["ID", "NAME", "PROVIDER", "REFERENCE", "SECRET (SEALED)"]


def _show(cred: Credential, as_json: bool) -> None:
    if as_json:
        print_json(cred)
    else:
        print_table(None, HEADERS, _rows([cred]))


def _from_env(name: str, flag: str, why: str) -> str:
    value = os.environ.get(name)
    if value:
        return value
    if sys.stdin.isatty():
        prompted: str = click.prompt(name, hide_input=True, err=True)
        return prompted
    from automation.errors import InvalidInput

    raise InvalidInput(name, None, f"must be set (or typed at the prompt) {why} {flag}")


def _material(provider: str, options: dict[str, Any], remote: bool) -> SecretMaterial | None:
    """The secret to send, read on this machine; ``options`` loses what became the secret.
    None: a reference alone (embedded mode, or an AWS role for the server's own identity)."""
    from pydantic import SecretStr

    from automation.errors import InvalidInput
    from automation.models import SecretMaterial

    key_id = options.pop("access_key_id", None)
    if key_id is not None:
        if provider != "aws":
            raise InvalidInput("--access-key-id", key_id, f"is for --provider aws, not {provider}")
        token = os.environ.get("AWS_SESSION_TOKEN")
        return SecretMaterial(
            access_key_id=SecretStr(key_id),
            secret_access_key=SecretStr(_from_env("AWS_SECRET_ACCESS_KEY", "--access-key-id",
                                                  "with")),
            session_token=SecretStr(token) if token else None)
    if not remote:
        return None
    if provider == "aws":
        if options.get("profile"):
            raise InvalidInput("--profile", options["profile"], "names a profile on this "
                               "machine, which the server cannot read: give --access-key-id "
                               "(the secret from AWS_SECRET_ACCESS_KEY), or --role-arn alone "
                               "for the server's own identity to assume")
        return None
    if provider == "gcp":
        if not options.get("key_file"):
            return None  # the server names what is missing
        from automation.cli.inputs import read_local_text

        text = read_local_text("--key-file", options.pop("key_file"),
                               "a readable service-account key file")
        return SecretMaterial(service_account_json=SecretStr(text))
    if provider == "azure":
        return SecretMaterial(client_secret=SecretStr(_from_env(
            "AZURE_CLIENT_SECRET", "--provider azure", "in remote mode for")))
    env = options.get("api_key_env")
    if not env:
        return None
    return SecretMaterial(api_key=SecretStr(_from_env(env, "--api-key-env", "as named by")))


@click.group()
def credentials() -> None:
    """Compute credentials: references to where a secret lives, or (remote mode, or an
    access key) the secret itself, sealed by the control plane and never shown again."""


@credentials.command()
@click.argument("name")
@click.option("--provider", required=True, help="aws, gcp or azure (see the catalog).")
@click.option("--profile", help="aws, embedded mode: shared-config profile.")
@click.option("--access-key-id", help="aws: an access key, sealed (its secret from "
                                      "AWS_SECRET_ACCESS_KEY, else a hidden prompt).")
@click.option("--role-arn", help="aws: IAM role to assume.")
@click.option("--project", help="gcp: project id.")
@click.option("--key-file", help="gcp: a service-account key file (remote mode: its contents "
                                 "are sent and sealed).")
@click.option("--subscription-id", help="azure: subscription UUID.")
@click.option("--tenant-id", help="azure: tenant UUID.")
@click.option("--client-id", help="azure: client UUID (secret from AZURE_CLIENT_SECRET; "
                                  "remote mode: sent and sealed).")
@click.option("--api-key-env", help="other providers: environment variable of the API key.")
@click.option("--org", help="The org that owns it (default: the org named default); only "
                            "that org's pools may use it.")
@json_option
@handle_errors
@click.pass_context
def new(ctx: click.Context, name: str, provider: str, as_json: bool,
        **options: str | None) -> None:
    """Add a credential."""
    from automation.client.remote import Remote
    from automation.models import NewCredentialRequest

    backend = backend_from(ctx)
    given = {k: v for k, v in options.items() if v is not None}
    secret = _material(provider, given, isinstance(backend, Remote))
    _show(backend.new_credential(NewCredentialRequest(name=name, provider=provider,
                                                      secret=secret, **given)), as_json)


@credentials.command()
@click.argument("ref")
@click.option("--access-key-id", help="aws: the new access key (its secret from "
                                      "AWS_SECRET_ACCESS_KEY, else a hidden prompt).")
@click.option("--key-file", help="gcp: the new service-account key file.")
@json_option
@handle_errors
@click.pass_context
def rotate(ctx: click.Context, ref: str, access_key_id: str | None, key_file: str | None,
           as_json: bool) -> None:
    """Replace a sealed secret (the old one is gone once this succeeds). Azure reads the new
    secret from AZURE_CLIENT_SECRET, other providers from the variable they name."""
    from automation.errors import NotFound

    backend = backend_from(ctx)
    found = [c for c in backend.list_credentials() if ref in (c.id, c.name)]
    if not found:
        raise NotFound("credential", ref, field="credentials")
    cred = found[0]
    options: dict[str, Any] = {k: v for k, v in (("access_key_id", access_key_id),
                                                 ("key_file", key_file)) if v is not None}
    options |= {k: v for k, v in cred.reference.items() if k == "api_key_env"}
    secret = _material(cred.provider, options, remote=True)
    if secret is None:
        from automation.errors import InvalidInput

        flag = {"aws": "--access-key-id", "gcp": "--key-file"}.get(cred.provider, "secret")
        raise InvalidInput(flag, None, f"is required to rotate a {cred.provider} secret")
    _show(backend.rotate_credential(cred.id, secret), as_json)


@credentials.command("list")
@json_option
@handle_errors
@click.pass_context
def list_(ctx: click.Context, as_json: bool) -> None:
    """List credentials (a sealed secret shows as its fingerprint)."""
    items = backend_from(ctx).list_credentials()
    if as_json:
        print_json(items)
    else:
        print_table("Credentials", HEADERS, _rows(items))


@credentials.command()
@click.argument("ref")
@json_option
@handle_errors
@click.pass_context
def delete(ctx: click.Context, ref: str, as_json: bool) -> None:
    """Delete a credential (refused while a node pool uses it)."""
    cred = backend_from(ctx).delete_credential(ref)
    if as_json:
        print_json(cred)
    else:
        click.echo(f"credential {cred.name} deleted")


@credentials.command()
@move_options
def move(ctx: click.Context, ref: str, org_ref: str, as_json: bool) -> None:
    """Give a credential to another org (refused while a node pool uses it: move that
    pool's cluster instead, which takes the credential along)."""
    show_moved(backend_from(ctx).move_credential(ref, org_ref), org_ref, as_json)
