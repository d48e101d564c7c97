"""``anycloud agent``: the worker pod's entry point (automation/agentpools/agent.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
from pathlib import Path
from typing import Any

import click

from automation.cli import gc_mode
from automation.cli.api_token import AGENT_TOKEN_ENV, required_token
from automation.cli.inputs import InputPath
from automation.cli.output import handle_errors, info, json_option


@click.command()
@click.option("--pool", required=True,
              help="The AgentPool: NAME (in the pod's namespace) or NAMESPACE/NAME.")
@click.option("--namespace", envvar="POD_NAMESPACE",
              help="The pool's namespace [default: POD_NAMESPACE, the service account's, "
                   "else default].")
@click.option("--config", "config_path", envvar="ANYCLOUD_AGENT_CONFIG",
              default="/run/anycloud/anycloud.yaml", show_default=True,
              help="The agent config (broker.address); env ANYCLOUD_AGENT_CONFIG.")
@click.option("--broker", "broker_address", envvar="ANYCLOUD_BROKER",
              help="Broker URL or HOST:PORT; env ANYCLOUD_BROKER (the operator sets it from "
                   "its broker.address); overrides the config file (then not read).")
@click.option("--agent-id", help="This agent's id [default: POD_NAME, else HOSTNAME].")
@click.option("--slots", type=click.IntRange(1, 1024), envvar="ANYCLOUD_AGENT_SLOTS",
              default=1, show_default=True, help="Sessions at once (defaultSlotsPerAgent).")
@click.option("--data-dir", type=InputPath(file_okay=False), envvar="ANYCLOUD_AGENT_DATA",
              help="Where session directories go, unless sandbox_config.disk_source says "
                   "[default: /var/lib/anycloud/agent-sessions/<id> when sessions run as "
                   "another user (a root agent), else $ANYCLOUD_HOME/agent-sessions/<id>].")
@click.option("--keep-session-dirs", is_flag=True,
              help="Keep each session's directory after it ends (removed by default).")
@click.option("--heartbeat-interval", default="5s", show_default=True)
@click.option("--grace", default="25s", show_default=True,
              help="On SIGTERM: how long running sessions get to end before they are stopped.")
@json_option
@handle_errors
@click.pass_context
def agent(ctx: click.Context, pool: str, namespace: str | None, config_path: str,
          broker_address: str | None, agent_id: str | None, slots: int,
          data_dir: str | None, keep_session_dirs: bool, heartbeat_interval: str, grace: str,
          as_json: bool) -> None:
    """Serve a pool's sessions: register with the broker, heartbeat, run each session's
    command in a fresh directory (DATA_DIR/<session id>, its working directory, removed when
    it ends), as another user with a clean environment (the config's sandbox_config), and
    report slot use. SIGTERM: take no new session, let
    running ones end (--grace), deregister, exit 0. Retired by the operator (the broker
    answers 410: its pod is being deleted, or its pool was): stop at once without
    registering again, exit 0. The broker takes the pool's agent token from
    ANYCLOUD_AGENT_TOKEN (the operator sets it from the pool's Secret)."""
    gc_mode.long_running()
    from automation.agentpools.agent import Agent, AgentSettings
    from automation.agentpools.client import BrokerClient
    from automation.agentpools.config import (
        AgentConfig,
        broker_url,
        load_config,
        parse_duration,
        qualified_pool,
    )
    from automation.agentpools.sandbox import can_switch_user
    from automation.agentpools.wire import check_pool
    from automation.settings import Settings

    # With --broker the file is still read, for its sandbox_config, when it is there (or
    # was named): how sessions run is never left out because the address came elsewhere.
    named = ctx.get_parameter_source("config_path") is click.core.ParameterSource.COMMANDLINE
    if broker_address:
        url = broker_url(broker_address, "--broker")
        config = load_config(config_path, broker_required=False) \
            if named or Path(config_path).exists() else AgentConfig()
    else:
        config = load_config(config_path)
        url = config.broker_url
    full_pool = check_pool(qualified_pool(pool, namespace), "--pool")
    ident = agent_id or os.environ.get("POD_NAME") or os.environ.get("HOSTNAME") or \
        socket.gethostname()
    # A root agent's home is closed to the session user, who must reach its directory.
    default_root = Path("/var/lib/anycloud") if can_switch_user() else \
        Settings.from_env(ctx.find_root().obj.get("home")).home
    settings = AgentSettings(
        pool=full_pool, agent_id=ident, pod=os.environ.get("POD_NAME") or ident, slots=slots,
        data_dir=Path(data_dir) if data_dir else default_root / "agent-sessions" / ident,
        heartbeat_interval=parse_duration(heartbeat_interval, "--heartbeat-interval"),
        grace=parse_duration(grace, "--grace"), keep_session_dirs=keep_session_dirs,
        sandbox=config.sandbox_config)

    def log(kind: str, message: str, data: dict[str, Any]) -> None:
        if as_json:
            click.echo(json.dumps({"event": kind, "message": message, "data": data}),
                       nl=True)
        else:
            info(f"[{kind}] {message}")

    token = required_token(AGENT_TOKEN_ENV)
    # Out of this process's environment: nothing it starts can inherit it. (Its first copy,
    # /proc/<agent>/environ, is readable by the agent's user alone: sessions run as another.)
    os.environ.pop(AGENT_TOKEN_ENV, None)
    runner = Agent(BrokerClient(url, token=token), settings, log)

    def _stop(*_: object) -> None:
        runner.stop()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    code = runner.run()
    # Stopped already (a retired agent stops by itself, its pod's SIGTERM on the way): while
    # the interpreter shuts down Python restores SIGTERM's default action, and a late SIGTERM
    # would turn the clean exit into 143. Ignored, the container reports the agent's code.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctx.exit(code)
