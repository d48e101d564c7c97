"""``anycloud operator``: the AgentPool operator (automation/agentpools/operator.py) alone, in
the foreground, over the control plane's ledger and the current kubeconfig context."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from automation.cli import gc_mode
from automation.cli.context import config_path as default_config_path
from automation.cli.context import ledger_from
from automation.cli.inputs import InputPath
from automation.cli.output import handle_errors, info, json_option
from automation.errors import AnycloudError


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
@click.option("--leader-elect", is_flag=True,
              help="Run as one of several replicas: only the holder of the Lease "
                   "anycloud-operator acts (the others stand by and take over within the "
                   "lease duration); exit 1 when the Lease is lost.")
@click.option("--lease-namespace", envvar="POD_NAMESPACE",
              help="Where the Lease lives [default: POD_NAMESPACE, else the first watched "
                   "namespace].")
@click.option("--lease-duration", type=click.FloatRange(min=1.0), default=15.0,
              show_default=True, help="Seconds a silent leader keeps the Lease (renewed "
                                      "every duration/7.5, given up after 2/3 of it).")
@json_option
@handle_errors
@click.pass_context
def operator(ctx: click.Context, config_path: Path | None, kubeconfig: Path | None,
             context: str | None, interval: float, leader_elect: bool,
             lease_namespace: str | None, lease_duration: float, as_json: bool) -> None:
    """Run the AgentPool operator until SIGINT/SIGTERM: it keeps each AgentPool's worker
    pods within its autoscaler bounds (idle slots from the agent broker's ledger), writes
    its status and Events, and on delete removes exactly its pods. The first line says
    which namespaces it watches; with --leader-elect, later lines say when it leads."""
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
    if not leader_elect:
        op.run()
        return
    _run_elected(op, lease_namespace or namespaces[0], lease_duration, as_json, log)


def _run_elected(op: Any, namespace: str, duration: float, as_json: bool,
                 log: Callable[[str], None]) -> None:
    """kopf runs only while this process holds the Lease (automation/agentpools/leader.py)."""
    from automation.agentpools.kubeapi import KubeApi
    from automation.agentpools.leader import LeaderElector, LeaseTimes

    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    elector = LeaderElector(KubeApi(op.client_config), namespace,
                            times=LeaseTimes(duration, duration * 2 / 3, duration / 7.5),
                            log=log)

    def say(event: str) -> None:
        if as_json:
            click.echo(json.dumps({"event": event, "identity": elector.identity,
                                   "lease": f"{namespace}/{elector.name}"}), err=False)
        else:
            info(f"{event}: {elector.identity} (Lease {namespace}/{elector.name})")

    def lead() -> None:
        op.start()
        say("leading")

    say("standby")
    outcome = elector.run(lead=lead, stop_leading=op.stop, stopped=stopped)
    if outcome == "lost":
        raise AnycloudError(f"lost the Lease {namespace}/{elector.name}: stopped leading; "
                            "restart to stand again", code="LEADERSHIP_LOST")
