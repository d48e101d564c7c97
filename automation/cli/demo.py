"""``anycloud demo``: the whole lifecycle on the simulators, in a temporary home."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from automation.cli.output import handle_errors, info, json_option, print_json, print_table


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print its path.")
@json_option
@handle_errors
def demo(keep: bool, as_json: bool) -> None:
    """Create, join, replace, refuse and delete node pools on simulators (no cloud needed)."""
    from automation.demo import run_demo
    from automation.ledger import open_ledger
    from automation.services.context import App
    from automation.simulators.world import SimWorld

    workdir = Path(tempfile.mkdtemp(prefix="anycloud-demo-"))

    def step(kind: str, message: str, data: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps({"step": kind, "message": message, "data": data}))
        else:
            info(message)

    world = SimWorld(workdir / "sim")
    app = App(ledger=open_ledger(f"sqlite:///{workdir / 'anycloud.db'}"), clock=world.clock,
              home=workdir)
    info("anycloud demo: simulated cloud and cluster, mock Pulumi engine, accelerated clock")
    try:
        pools = run_demo(app, world, workdir, step)
    finally:
        app.ledger.dispose()
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if as_json:
        click.echo(json.dumps({"step": "final", "data": pools}))
    elif pools:
        print_table("Node pools at the end", ["NAME", "CLOUD", "VM TYPE", "STATE", "READY"],
                    [(p["name"], p["provider"], p["vm_type"], p["state"],
                      f"{p['counts']['ready']}/{p['vms']}") for p in pools])
    else:
        print_json(pools)
    if keep:
        info(f"home kept at {workdir} (ANYCLOUD_HOME={workdir} anycloud node-pool list)")
