"""``anycloud sudo``: superuser-only choices of provisioner (who is one: embedded mode, the
OS users the control plane's config file names ``superusers``; remote mode, an admin token,
checked by the server)."""

from __future__ import annotations

import sys

import click

from automation.cli.backend import backend_from
from automation.cli.output import handle_errors, info, json_option, print_json
from automation.errors import InvalidInput


@click.group()
def sudo() -> None:
    """Superuser commands: choose where projects' deployments are provisioned."""


@sudo.group("project")
def sudo_project() -> None:
    """A project's provisioner, and restarting its deployments."""


@sudo_project.command("edit")
@click.argument("project")
@click.option("--provisioner", help="A provisioner of the set, for the project's deployments.")
@click.option("--unset-provisioner", is_flag=True,
              help="Back to the org's default, else the global one (moves nothing).")
@json_option
@handle_errors
@click.pass_context
def project_edit(ctx: click.Context, project: str, provisioner: str | None,
                 unset_provisioner: bool, as_json: bool) -> None:
    """Set or unset the project's provisioner: it applies to each deployment the next time
    it goes from stopped to running (`sudo project restart` does that now)."""
    from automation.errors import InvalidInput

    if (provisioner is None) == (not unset_provisioner):
        raise InvalidInput("--provisioner", provisioner,
                           "give exactly one of --provisioner NAME and --unset-provisioner")
    done = backend_from(ctx).set_project_provisioner(project, provisioner)
    if as_json:
        print_json(done)
    else:
        click.echo(f"project {done.name}: provisioner {done.provisioner or '(unset)'}")
        info("running deployments keep theirs until they restart")


@sudo_project.command("restart")
@click.argument("project")
@click.option("--yes", "-y", is_flag=True,
              help="Do not ask (required when stdin is not a terminal).")
@json_option
@handle_errors
@click.pass_context
def project_restart(ctx: click.Context, project: str, yes: bool, as_json: bool) -> None:
    """Stop and start each running deployment of the project (moving it if its provisioner
    changed), and finish any start or move that was interrupted; deployments their users
    stopped stay stopped. Asks first on a terminal; --yes otherwise."""
    if not yes:
        if not sys.stdin.isatty():
            raise InvalidInput("--yes", False, "is required when stdin is not a terminal: "
                               "restarting every running deployment of a project is not "
                               "done without asking")
        click.confirm(f"Restart every running deployment of project {project}?", abort=True,
                      err=True)
    done = backend_from(ctx).restart_project(project)
    if as_json:
        print_json(done)
    for d in [] if as_json else done:
        click.echo(f"deployment {d.name}: {d.state} on {d.provisioner} at {d.runtime_host}")


@sudo.group("org")
def sudo_org() -> None:
    """An org's default provisioner."""


@sudo_org.command("set-default-provisioner")
@click.argument("org")
@click.argument("provisioner", required=False)
@click.option("--unset", is_flag=True, help="Back to the global default (moves nothing).")
@json_option
@handle_errors
@click.pass_context
def org_default(ctx: click.Context, org: str, provisioner: str | None, unset: bool,
                as_json: bool) -> None:
    """Set (or --unset) the provisioner of the org's projects that choose none."""
    from automation.errors import InvalidInput

    if (provisioner is None) == (not unset):
        raise InvalidInput("provisioner", provisioner,
                           "give exactly one of a PROVISIONER and --unset")
    done = backend_from(ctx).set_org_default_provisioner(org, provisioner)
    if as_json:
        print_json(done)
    else:
        click.echo(f"org {done.name}: default provisioner {done.default_provisioner or '(unset)'}")
