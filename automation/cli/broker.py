"""``anycloud broker``: the agent broker's HTTP API (automation/api/broker.py) on
``--listen``, over the control plane's ledger."""

from __future__ import annotations

import json
from datetime import timedelta

import click

from automation.cli import gc_mode
from automation.cli.context import ledger_from
from automation.cli.output import handle_errors, info, json_option


@click.command()
@click.option("--listen", default="127.0.0.1:50051", show_default=True,
              help="HOST:PORT to serve on (port 0: any free port; 0.0.0.0 inside a pod).")
@click.option("--heartbeat-timeout", default="30s", show_default=True,
              help="An agent silent this long is unknown.")
@click.option("--give-up-after", default="5m", show_default=True,
              help="The sessions of an agent unknown this long are failed, its slots freed.")
@json_option
@handle_errors
@click.pass_context
def broker(ctx: click.Context, listen: str, heartbeat_timeout: str, give_up_after: str,
           as_json: bool) -> None:
    """Serve the agent broker until SIGINT/SIGTERM: agents register and heartbeat, sessions
    acquire and release slots (state in the ledger, ANYCLOUD_DATABASE_URL or
    $ANYCLOUD_HOME/anycloud.db). The first line says where it listens."""
    gc_mode.long_running()
    from automation.agentpools.config import parse_duration
    from automation.agentpools.registry import Registry
    from automation.api.broker import create_app, parse_listen, serve

    parse_listen(listen)
    timeout = timedelta(seconds=parse_duration(heartbeat_timeout, "--heartbeat-timeout"))
    give_up = timedelta(seconds=parse_duration(give_up_after, "--give-up-after"))
    if timeout.total_seconds() <= 0:
        from automation.errors import InvalidInput

        raise InvalidInput("--heartbeat-timeout", heartbeat_timeout, "must be above 0s")
    app = create_app(Registry(ledger_from(ctx, local=True)), heartbeat_timeout=timeout,
                     give_up_after=give_up,
                     expire_every=max(0.5, min(5.0, timeout.total_seconds() / 3)))

    def ready(url: str) -> None:
        if as_json:
            click.echo(json.dumps({"event": "listening", "url": url}))
        else:
            info(f"broker listening on {url} (heartbeat timeout {heartbeat_timeout}, "
                 f"give up after {give_up_after}); SIGTERM to stop")

    serve(app, listen, ready)
