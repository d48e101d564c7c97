"""``anycloud demo``: the quick-start run in a temporary home."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from automation.cli.output import handle_errors, info, json_option, print_json


@click.command()
@click.option("--keep", is_flag=True, help="Keep the temporary home and print its path.")
@json_option
@handle_errors
def demo(keep: bool, as_json: bool) -> None:
    """Register a cluster and create node pools in a throw-away home, showing each step."""
    from automation.demo import run_demo
    from automation.ledger import open_ledger
    from automation.services.context import App

    workdir = Path(tempfile.mkdtemp(prefix="anycloud-demo-"))

    def step(kind: str, message: str, data: dict[str, object]) -> None:
        if as_json:
            click.echo(json.dumps({"step": kind, "message": message, "data": data}))
        else:
            info(f"• {message}")

    app = App(ledger=open_ledger(f"sqlite:///{workdir / 'anycloud.db'}"))
    try:
        final = run_demo(app, workdir, step)
    finally:
        app.ledger.dispose()
        if not keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    if as_json:
        click.echo(json.dumps({"step": "status", "data": final}))
    else:
        print_json(final)
    if keep:
        info(f"home kept at {workdir} (ANYCLOUD_HOME={workdir} anycloud node-pool list)")
