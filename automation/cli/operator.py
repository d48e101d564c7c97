"""``anycloud operator``: the AgentPool operator (automation/agentpools/operator.py) alone, in
the foreground, over the control plane's ledger and the current kubeconfig context."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from automation.cli import gc_mode
from automation.cli.context import config_path as default_config_path
from automation.cli.context import ledger_from
from automation.cli.inputs import InputPath
from automation.cli.output import handle_errors, info, json_option


@click.command()
@click.option("--config", "config_path", envvar="ANYCLOUD_CONFIG",
              type=InputPath(dir_okay=False, path_type=Path),
              help="The control plane's config file (provisioners: - kubernetes: "
                   "{namespace: ...}) [default: $ANYCLOUD_HOME/config.yaml; env "
                   "ANYCLOUD_CONFIG].")
@click.option("--kubeconfig", type=InputPath(dir_okay=False, path_type=Path),
              help="[default: KUBECONFIG, else ~/.kube/config; in a pod with neither, its "
                   "service account]")
@click.option("--context", help="The kubeconfig context [default: the config's gke block's "
                                "gke_<project>_<location>_<cluster_name>, else the current].")
@click.option("--interval", type=click.FloatRange(min=0.2), default=10.0, show_default=True,
              help="Seconds between two passes over each pool (its timer).")
@json_option
@handle_errors
@click.pass_context
def operator(ctx: click.Context, config_path: Path | None, kubeconfig: Path | None,
             context: str | None, interval: float, as_json: bool) -> None:
    """Run the AgentPool operator until SIGINT/SIGTERM: it keeps each AgentPool's worker
    pods within its autoscaler bounds (idle slots from the agent broker's ledger), writes
    its status and Events, and on delete removes exactly its pods. The first line says
    which namespaces it watches."""
    gc_mode.long_running()
    from automation.agentpools.operator import assemble, load_config

    config = load_config(config_path or default_config_path(ctx))
    namespaces = sorted(config.config_maps())

    def log(line: str) -> None:
        if as_json:
            click.echo(json.dumps({"event": "action", "message": line}), err=False)
        else:
            info(line)

    op = assemble(config, ledger_from(ctx, local=True), kubeconfig=kubeconfig, context=context,
                  interval=interval, log=log)
    where = context or config.context() or "the current context"
    if as_json:
        click.echo(json.dumps({"event": "watching", "namespaces": namespaces,
                               "context": where, "pid": os.getpid()}), err=False)
    else:
        info(f"operator watching AgentPools in {', '.join(namespaces)} ({where}); "
             "SIGTERM to stop")
    op.run()
