"""``anycloud api use|status`` and ``anycloud login``: point the CLI at a control plane's API
(remote mode) or back at the local ledger (embedded mode)."""

from __future__ import annotations

import sys
from typing import Any

import click

from automation.cli.inputs import InputPath
from automation.cli.output import handle_errors, info, json_option, print_fields, print_json


@click.group()
def api() -> None:
    """Remote mode: send commands to a control plane's API instead of the local ledger."""


@api.command("use")
@click.argument("url")
@click.option("--ca-file", type=InputPath(dir_okay=False, exists=True),
              help="The CA that signed the server's certificate (PEM), if not a public one.")
@click.option("--insecure", is_flag=True,
              help="The URL is plain HTTP to another machine and the token may go there in "
                   "the clear (kept for this URL; refused without it).")
@json_option
@handle_errors
@click.pass_context
def use(ctx: click.Context, url: str, ca_file: str | None, insecure: bool,
        as_json: bool) -> None:
    """Send commands to the API at URL from now on (checked first: it must answer), or back to
    the local ledger with `local`. A new URL forgets the token of the old one. Plain HTTP
    to another machine needs --insecure: the token would cross the network in the clear."""
    import os

    from automation.client.config import (
        INSECURE,
        LOCAL,
        check_transport,
        check_url,
        read_config,
        write_config,
    )

    done: dict[str, object]
    if url == LOCAL:
        path = write_config({"apiUrl": None, "caFile": None, "token": None, INSECURE: None})
        done = {"mode": "embedded", "apiUrl": None, "configFile": str(path)}
    else:
        url = check_url(url, "URL")
        insecure = insecure or bool(ctx.find_root().obj.get("insecure"))
        check_transport(url, insecure, "URL")
        _reachable(url, os.path.abspath(ca_file) if ca_file else None)
        same = read_config().get("apiUrl") == url
        path = write_config({"apiUrl": url,
                             "caFile": os.path.abspath(ca_file) if ca_file else None,
                             INSECURE: "true" if insecure else None,
                             **({} if same else {"token": None})})
        done = {"mode": "remote", "apiUrl": url, "configFile": str(path),
                "insecure": insecure}
    if as_json:
        print_json(done)
    elif url == LOCAL:
        click.echo(f"embedded mode: commands use the local ledger ({path})")
    else:
        click.echo(f"remote mode: commands go to {url} ({path})")
        if not read_config().get("token"):
            info("next: anycloud login (the token on stdin, or ANYCLOUD_TOKEN)")


def _reachable(url: str, ca_file: str | None) -> None:
    from automation.client.http import ApiClient

    client = ApiClient(url, None, ca_file=ca_file)
    try:
        client.call("GET", "/healthz", dict)
    finally:
        client.close()


@click.command()
@json_option
@handle_errors
@click.pass_context
def login(ctx: click.Context, as_json: bool) -> None:
    """Store the token for the API chosen with `anycloud api use`: read from stdin (or
    ANYCLOUD_TOKEN), checked with the server, kept in the config file (mode 0600)."""
    import os
    from dataclasses import replace

    from automation.cli.backend import api_client
    from automation.cli.context import endpoint_from
    from automation.client.config import TOKEN_ENV, write_config
    from automation.errors import InvalidInput

    endpoint = endpoint_from(ctx)
    if endpoint.url is None:
        raise InvalidInput("mode", "embedded", "login is for remote mode: anycloud api use "
                           "URL first (embedded mode reads the local ledger, no token)")
    if sys.stdin.isatty() and not os.environ.get(TOKEN_ENV):
        token = click.prompt("API token", hide_input=True, err=True)
    else:
        token = os.environ.get(TOKEN_ENV) or sys.stdin.readline()
    token = token.strip()
    client = api_client(replace(endpoint, token=token))
    try:
        me: dict[str, Any] = client.call("GET", "/me", dict)
    finally:
        client.close()
    write_config({"token": token})
    if as_json:
        print_json({"apiUrl": endpoint.url, "name": me["name"], "role": me["role"]})
    else:
        click.echo(f"logged in to {endpoint.url} as {me['name']} ({me['role']})")


@api.command("status")
@json_option
@handle_errors
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """The mode, the endpoint and where that choice came from, who the token is, and both
    versions."""
    from automation import __version__
    from automation.cli.backend import api_client
    from automation.cli.context import endpoint_from
    from automation.client.config import config_path

    endpoint = endpoint_from(ctx)
    out: dict[str, object] = {
        "mode": "remote" if endpoint.url else "embedded", "apiUrl": endpoint.url,
        "source": endpoint.source, "configFile": str(config_path()),
        "clientVersion": __version__,
    }
    if endpoint.url is not None:
        client = api_client(endpoint)
        try:
            me: dict[str, Any] = client.call("GET", "/me", dict)
        finally:
            client.close()
        out |= {"identity": me["name"], "role": me["role"], "tokenSource": endpoint.token_source,
                "insecure": endpoint.insecure, "serverVersion": me["serverVersion"]}
    if as_json:
        print_json(out)
    else:
        print_fields("API", [(k, v) for k, v in out.items()])
