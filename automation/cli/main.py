"""Top-level command group and the lazily opened application context."""

from __future__ import annotations

import sys
from typing import Any, NoReturn

import click

from automation import __version__
from automation.cli.inputs import InputPath
from automation.cli.lazy import LazyGroup
from automation.cli.output import fail

# Each command's module is imported when the command runs: a start-up path pays only for its
# own (``benchmarks/bench_start_up.py``).
_COMMANDS = {
    "cluster": "automation.cli.cluster:cluster",
    "credentials": "automation.cli.credentials:credentials",
    "node-pool": "automation.cli.node_pool:node_pool",
    "deployment": "automation.cli.deployment:deployment",
    "policy": "automation.cli.rollout:policy",
    "preview": "automation.cli.rollout:preview_all",
    "reconcile": "automation.cli.reconcile:reconcile",
    "serve": "automation.cli.reconcile:serve",
    "demo": "automation.cli.demo:demo",
    "catalog": "automation.cli.catalog:catalog",
    "cost": "automation.cli.cost:cost",
    "agent-pool": "automation.cli.agent_pool:agent_pool",
    "broker": "automation.cli.broker:broker",
    "agent": "automation.cli.agent:agent",
    "session": "automation.cli.session:session",
    "operator": "automation.cli.operator:operator",
    "org": "automation.cli.org:org",
    "project": "automation.cli.org:project",
    "sudo": "automation.cli.sudo:sudo",
    "token": "automation.cli.token:token",
    "api": "automation.cli.remote:api",
    "login": "automation.cli.remote:login",
    "secrets-key": "automation.cli.secrets_key:secrets_key",
}

class _Boundary(LazyGroup):
    """The root group: an exception escaping while click parses a subcommand's arguments
    (a parameter type's own bug or an ``os.stat`` refusal) meets the same boundary as one
    escaping a command (``output.handle_errors``), instead of a traceback."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["anycloud.json"] = "--json" in args
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.UsageError as exc:
            if not ctx.meta.get("anycloud.json"):
                raise
            _usage_error_as_json(exc)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            fail(exc, as_json=bool(ctx.meta.get("anycloud.json")))


def _usage_error_as_json(exc: click.exceptions.UsageError) -> NoReturn:
    """With ``--json`` a refused argument is a JSON error object too (still exit 2), so a
    script reads every refusal the same way; the usage text stays on stderr."""
    from automation.cli.inputs import short_value
    from automation.cli.output import print_json

    exc.show()
    message = " ".join(exc.format_message().split())
    param = getattr(exc, "param", None)
    field = None
    if param is not None:
        field = param.opts[0] if getattr(param, "opts", None) else param.name
    error: dict[str, Any] = {"code": "INVALID_ARGUMENT", "message": message, "field": field,
                             "rule": message}
    if exc.ctx is not None and param is not None and param.name in exc.ctx.params:
        error["value"] = short_value(exc.ctx.params[param.name])
    print_json({"error": error})
    sys.exit(exc.exit_code)


@click.group(cls=_Boundary, lazy_subcommands=_COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="anycloud")
@click.option(
    "--home", envvar="ANYCLOUD_HOME", type=InputPath(file_okay=False),
    help="State directory (default ~/.anycloud; env ANYCLOUD_HOME).",
)
@click.option(
    "--api", metavar="URL|local",
    help="This command only: the control plane's API (remote mode), or local (embedded); "
         "default: ANYCLOUD_API_URL, else what `anycloud api use` chose, else local.",
)
@click.option(
    "--insecure", is_flag=True,
    help="This command only: send the API token over plain HTTP to another machine (refused "
         "otherwise: anyone on the way could read it). `anycloud api use URL --insecure` "
         "keeps it for that URL.",
)
@click.pass_context
def cli(ctx: click.Context, home: str | None, api: str | None, insecure: bool) -> None:
    """Pools of compute on any cloud, joined to one K3s cluster."""
    ctx.obj = {"home": home, "api": api, "insecure": insecure}

