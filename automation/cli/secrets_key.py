"""``anycloud secrets-key new|status|rotate``: the key the control plane seals secrets under,
and its rotation without downtime (``automation.services.secrets_key``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from automation.cli.backend import backend_from
from automation.cli.inputs import InputPath
from automation.cli.output import handle_errors, info, json_option, print_json
from automation.cli.views import plain


@click.group("secrets-key")
def secrets_key() -> None:
    """The control plane's secrets key (credentials' secrets, sealed kubeconfigs and the
    runtime-token signing keys are sealed under it)."""


@secrets_key.command()
@click.argument("path", type=InputPath(dir_okay=False, path_type=Path))
@json_option
@handle_errors
def new(path: Path, as_json: bool) -> None:
    """Write a new random key to PATH (mode 0600; refused if PATH exists). Give it to the
    server as ANYCLOUD_SECRETS_KEY_FILE, and keep a copy safe: a secret sealed under a lost
    key cannot be opened again."""
    import json

    from automation.sealing import KEY_FILE_ENV, new_key_file

    key = new_key_file(path)
    if as_json:
        click.echo(json.dumps({"path": str(path), "keyId": key.key_id.hex()}))
    else:
        click.echo(f"key {key.key_id.hex()} written to {path}")
        info(f"start the server with {KEY_FILE_ENV}={path}")


def _counts(doc: dict[str, Any]) -> str:
    return ", ".join(f"{n} under {k}" for k, n in doc["sealed"].items()) or "no secret stored"


@secrets_key.command()
@json_option
@handle_errors
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """The key secrets are sealed under, the previous keys still accepted (a rotation under
    way), and how many sealed secrets each key id holds."""
    doc = plain(backend_from(ctx).secrets_key_status())
    if as_json:
        print_json(doc)
        return
    click.echo(f"key {doc['keyId']} seals; previous keys: "
               f"{', '.join(doc['previousKeyIds']) or 'none'}")
    click.echo(f"sealed secrets: {_counts(doc)}")
    if doc["unreadable"]:
        info(f"{doc['unreadable']} secret(s) are sealed under a key this server does not hold")


@secrets_key.command()
@click.argument("new_file", type=InputPath(dir_okay=False, path_type=Path))
@click.option("--batch-size", type=click.IntRange(1, 1000), default=100, show_default=True,
              help="secrets sealed again per transaction")
@click.option("--settle", type=click.FloatRange(0, 60), default=2.0, show_default=True,
              help="seconds to wait before the last pass, for a request that read the old "
                   "key before the new one was put first")
@json_option
@handle_errors
@click.pass_context
def rotate(ctx: click.Context, new_file: Path, batch_size: int, settle: float,
           as_json: bool) -> None:
    """Seal every stored secret again under the key in NEW_FILE (from `secrets-key new`),
    while servers keep answering.

    Embedded mode (next to the key file): the new key goes first in the key file, the old one
    after it (a server reads the file again when it changes: new secrets are sealed under the
    new key, the old one still opens what is not yet sealed again); every secret is sealed
    again, one transaction per batch; then the old key leaves the file. Interrupted, run it
    again: it goes on. Remote mode: put the new key first in the server's key file and the
    old one after it, then run this; only the key's id is sent. Remove the old key from the
    file once no secret is sealed under it."""
    from automation.sealing import read_key_file

    new_key = read_key_file(new_file, "NEW_FILE")
    doc = plain(backend_from(ctx).rotate_secrets_key(new_key, batch_size, settle))
    if as_json:
        print_json(doc)
        return
    click.echo(f"{doc['resealed']} secret(s) sealed again under key {doc['keyId']} in "
               f"{doc['batches']} batch(es); sealed secrets: {_counts(doc)}")
    if doc["previousKeyIds"]:
        info("the server still accepts key(s) " + ", ".join(doc["previousKeyIds"]) +
             ": remove them from its key file now (none of its secrets is sealed under them)")
    else:
        info("the old key is out of the key file: keep a copy only if backups sealed under "
             "it must be read")
