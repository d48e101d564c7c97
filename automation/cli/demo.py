"""``anycloud demo``: the whole lifecycle on the simulators, in a temporary home.

``--cluster local`` puts the cluster side on a real local control plane (tools built by
``python3 tools/build.py``) and every stack on the real Pulumi engine, the node pools' cloud
calls answered by the stand-in plugins from the simulated cloud; ``--engine`` names the
engine of the node-pool stacks.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from automation.cli.output import (
    camel_keys,
    handle_errors,
    info,
    json_option,
    print_json,
    print_table,
)


@click.command()
@click.option("--cluster", "cluster_side", type=click.Choice(["sim", "local"]), default="sim",
              show_default=True,
              help="sim: a simulated cluster. local: a real local control plane (kube-apiserver, "
                   "kwok playing the kubelets) and the real Pulumi engine for the cluster "
                   "add-ons, from the tools `python3 tools/build.py` builds; the cloud stays "
                   "simulated.")
@click.option("--engine", type=click.Choice(["mock", "pulumi"]), default=None,
              help="The node-pool stacks' engine. pulumi (the default with --cluster local): "
                   "the real engine, its cloud calls answered from the simulated cloud by "
                   "stand-in aws/gcp/azure-native plugins; it needs --cluster local, whose "
                   "API server takes the pools' bootstrap-token Secrets. mock (the default "
                   "otherwise): the mock engine, Python only.")
@click.option("--keep", is_flag=True, help="Keep the temporary home and print its path.")
@json_option
@handle_errors
def demo(cluster_side: str, engine: str | None, keep: bool, as_json: bool) -> None:
    """Create, join, replace, refuse and delete node pools on simulators (no cloud needed)."""
    from automation.app import App
    from automation.demo import ClusterSide, LocalSide, SimulatedSide, run_demo
    from automation.errors import InvalidInput
    from automation.ledger import open_ledger
    from automation.simulators.world import SimWorld

    if engine == "pulumi" and cluster_side != "local":
        raise InvalidInput("--engine", engine, "needs --cluster local: a node pool's stack "
                           "writes its bootstrap-token Secrets through the kubernetes "
                           "provider, and the simulated cluster has no API server")
    side: ClusterSide
    if cluster_side == "local":
        from automation.devcluster.engine_env import local_tools

        # every tool found before anything starts
        side = LocalSide(local_tools(), real_pools=engine != "mock")
    else:
        side = SimulatedSide()
    workdir = Path(tempfile.mkdtemp(prefix="anycloud-demo-"))
    api_server: dict[str, Any] = {}

    def step(kind: str, message: str, data: dict[str, Any]) -> None:
        if kind == "apiServer":
            api_server.update(data)
        if as_json:
            # The reconciler's reports pass through here too (node_state): camelCase keys.
            click.echo(json.dumps({"step": kind, "message": message,
                                   "data": camel_keys(data)}))
        else:
            info(message)

    world = SimWorld(workdir / "sim")
    app = App(ledger=open_ledger(f"sqlite:///{workdir / 'anycloud.db'}"), clock=world.clock,
              home=workdir)
    info(f"anycloud demo: {side.description}")
    try:
        pools = run_demo(app, world, workdir, step, side)
    finally:
        app.ledger.dispose()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if as_json:
        click.echo(json.dumps({"step": "final", "data": pools}))
    elif pools:
        print_table("Node pools at the end", ["NAME", "CLOUD", "VM TYPE", "STATE", "READY"],
                    [(p["name"], p["provider"], p["vmType"], p["state"],
                      f"{p['counts']['ready']}/{p['vms']}") for p in pools])
    else:
        print_json(pools)
    if api_server and not as_json:
        print_table(f"Nodes on the API server ({api_server['server']}) at the end",
                    ["NAME", "READY", "GPUS", "EXTERNAL IP", "ANYCLOUD LABELS", "TAINTS"],
                    [(n["name"], "yes" if n["ready"] else "no", n["gpus"], n["externalIp"],
                      " ".join(f"{k.removeprefix('anycloud.sh/')}={v}"
                               for k, v in sorted(n["labels"].items())),
                      " ".join(n["taints"])) for n in api_server["nodes"]])
    if keep:
        info(f"home kept at {workdir} (ANYCLOUD_HOME={workdir} anycloud node-pool list)")
