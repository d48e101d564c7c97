"""``anycloud secrets-key new FILE``: the key the control plane seals secrets under."""

from __future__ import annotations

from pathlib import Path

import click

from automation.cli.inputs import InputPath
from automation.cli.output import handle_errors, info, json_option


@click.group("secrets-key")
def secrets_key() -> None:
    """The control plane's secrets key (credentials' secrets are sealed under it)."""


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
