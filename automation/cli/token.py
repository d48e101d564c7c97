"""``anycloud token``: API tokens for the control plane's HTTP endpoints (issue 20)."""

from __future__ import annotations

import click

from automation.cli.output import handle_errors, info, json_option, print_json, print_table


@click.group()
def token() -> None:
    """API tokens: admin, member, viewer, or agent (one AgentPool's broker endpoints)."""


@token.command("create")
@click.argument("name")
@click.option("--role", required=True,
              help="admin (tokens, credentials, sudo), member (pools, deployments, sessions), "
                   "viewer (read only) or agent (one AgentPool's broker endpoints).")
@click.option("--pool", help="For --role agent: the AgentPool, NAMESPACE/NAME.")
@click.option("--expires", help="Refused after this long: 30m, 12h, 90d (default: never).")
@click.option("--org", help="For a member or viewer: sees only this org (name or id).")
@click.option("--project", help="For a member or viewer: of its org, sees only this project's "
                                "deployments (name or id).")
@click.option("--bootstrap", is_flag=True,
              help="The first admin token, written straight into this control plane's ledger; "
                   "refused once an admin token exists.")
@json_option
@handle_errors
@click.pass_context
def token_create(ctx: click.Context, name: str, role: str, pool: str | None,
                 expires: str | None, org: str | None, project: str | None, bootstrap: bool,
                 as_json: bool) -> None:
    """Create a token. It is printed once, on stdout: store it now (only its hash is kept)."""
    from automation.agentpools.config import parse_duration
    from automation.cli.backend import Embedded, backend_from
    from automation.models import token_lifetime

    expires_in = token_lifetime(parse_duration(expires, "--expires"), expires) if expires \
        else None
    # --bootstrap is the server host's own step: always its local ledger.
    work = Embedded(ctx, local=True) if bootstrap else backend_from(ctx)
    made = work.create_token(name, role, pool, expires_in, bootstrap, org=org, project=project)
    if as_json:
        print_json(made)
        return
    click.echo(made.token)
    info(f"token {made.name} ({made.role}{' of ' + made.scope if made.scope else ''}) created"
         + (f", expires {made.expires_at:%Y-%m-%d %H:%M}Z" if made.expires_at else "")
         + ": it is shown only now")


@token.command("list")
@click.option("--all", "include_revoked", is_flag=True, help="Revoked tokens too.")
@json_option
@handle_errors
@click.pass_context
def token_list(ctx: click.Context, include_revoked: bool, as_json: bool) -> None:
    """Tokens (never the tokens themselves: their first characters, role and state)."""
    from automation.cli.backend import backend_from

    found = backend_from(ctx).list_tokens(include_revoked)
    if as_json:
        print_json(found)
        return
    print_table("Tokens", ["NAME", "ROLE", "POOL", "PREFIX", "STATE", "EXPIRES", "CREATED BY"],
                [(t.name, t.role, t.scope or "-", t.prefix + "…", t.state,
                  f"{t.expires_at:%Y-%m-%d %H:%M}Z" if t.expires_at else "never", t.created_by)
                 for t in found])


@token.command("revoke")
@click.argument("name")
@json_option
@handle_errors
@click.pass_context
def token_revoke(ctx: click.Context, name: str, as_json: bool) -> None:
    """Revoke a token (by name or id): every request with it is refused from now on."""
    from automation.cli.backend import backend_from

    done = backend_from(ctx).revoke_token(name)
    print_json(done) if as_json else click.echo(f"token {done.name} revoked")
