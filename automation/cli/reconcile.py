"""``anycloud reconcile`` and ``anycloud serve``: the control loop."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import click

from automation.cli import gc_mode
from automation.cli.context import app_from, configured_provisioner_set
from automation.cli.inputs import InputPath
from automation.cli.output import camel_keys, engine_option, handle_errors, info, json_option

_engine = engine_option
_simulate = click.option(
    "--simulate", is_flag=True,
    help="Run against the simulated cloud and cluster kept in $ANYCLOUD_HOME/sim on the "
         "simulated clock: the mock engine, or with --engine pulumi the real one, its cloud "
         "calls answered by stand-in plugins.")

_concurrency = click.option(
    "--concurrency", type=int, default=None,
    help="Stack operations a pass runs at once, each in a worker process (1: pools one "
         "after another) [default: ANYCLOUD_CONCURRENCY, else 8].")
_per_credential = click.option(
    "--per-credential", type=int, default=None,
    help="At most this many of them per credential "
         "[default: ANYCLOUD_CONCURRENCY_PER_CREDENTIAL, else 4].")


_MOCK_NOTE = ("[mock engine] stacks run under the SDK's mock engine: the VMs shown are "
              "simulated, nothing was bought")


def _engine_note(runner: Any, home: Path) -> str:
    """What ran the stacks, said once: the mock engine, the real one over the stand-in
    cloud (and where its states are), or where the real engine keeps its states."""
    from automation.engine.secrets import where_state_lives

    if runner.engine == "mock":
        return _MOCK_NOTE
    where = where_state_lives(getattr(runner, "home", home), os.environ)
    label = getattr(runner, "cloud_label", None)
    if label:
        return (f"[pulumi engine, {label}] stacks run on the real Pulumi engine; their cloud "
                "calls are answered from the simulated cloud by stand-in plugins: the VMs "
                f"shown are simulated, nothing was bought. {where}")
    return where


def _parse_duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        return float(text[:-1]) * units[text[-1]] if text[-1] in units else float(text)
    except (ValueError, IndexError):
        from automation.errors import InvalidInput

        raise InvalidInput("--advance", text, "must be a duration such as 30s, 1m or 2h") from None


def _label(engine: str | None) -> str:
    """What made an event's outcome, where the user reads it: the mock engine, or the real
    one whose cloud is the simulated one behind the stand-in plugins (events name the
    engine as it is recorded, ``models.recorded_engine``)."""
    if engine == "mock":
        return " [mock engine]"
    if engine == "standin":
        from automation.simulators.standin import LABEL

        return f" [pulumi engine, {LABEL}]"
    return ""


def _setup(ctx: click.Context, engine: str | None, simulate: bool, as_json: bool,
           concurrency: int | None = None, per_credential: int | None = None) -> Any:
    from automation.reconciler.reconcile import Reconciler
    from automation.reconciler.wiring import real_ports
    from automation.settings import Settings

    limits = Settings.from_env(ctx.find_root().obj.get("home")).limits(concurrency,
                                                                      per_credential)

    def report(kind: str, message: str, data: dict[str, Any]) -> None:
        if as_json:
            # The reconciler names some data keys in snake_case (node_state): camelCase here.
            click.echo(json.dumps({"event": kind, "message": message,
                                   "data": camel_keys(data)}))
        else:
            info(f"[{kind}]{_label(data.get('engine'))} {message}")

    world = None
    if simulate:
        from automation.cli.simulation import check_engine

        check_engine(engine)  # before anything is opened
    app = app_from(ctx, local=True)
    if simulate:
        from automation.cli.simulation import simulated_runner
        from automation.simulators.ports import simulated_ports
        from automation.simulators.world import SimWorld

        world = SimWorld(app.home / "sim")
        app.clock = world.clock
        ports = simulated_ports(app, world, report,
                                runner=simulated_runner(app, world, engine))
    else:
        from automation.clock import SystemClock

        app.clock = SystemClock()  # real VMs and Nodes age on the wall clock
        ports = real_ports(app, engine, report)
    return Reconciler(app, ports, report=report, limits=limits), world


@click.command()
@click.option("--once", is_flag=True, help="One pass over every pool, then exit.")
@click.option("--passes", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --simulate: passes to run, the simulated clock advancing between.")
@click.option("--advance", default="0s", help="With --simulate: clock step between passes.")
@_engine
@_simulate
@_concurrency
@_per_credential
@json_option
@handle_errors
@click.pass_context
def reconcile(ctx: click.Context, once: bool, passes: int, advance: str, engine: str | None,
              simulate: bool, concurrency: int | None, per_credential: int | None,
              as_json: bool) -> None:
    """Reconcile every node pool (one pass with --once; a loop otherwise, like serve)."""
    if not once and passes == 1:
        ctx.invoke(serve, interval=30.0, speed=1.0, engine=engine, simulate=simulate,
                   concurrency=concurrency, per_credential=per_credential, as_json=as_json)
        return
    reconciler, world = _setup(ctx, engine, simulate, as_json, concurrency, per_credential)
    step = _parse_duration(advance)
    try:
        for i in range(passes):
            outcomes = reconciler.run_once()
            if world is not None and i < passes - 1 and step:
                from datetime import timedelta

                world.advance(timedelta(seconds=step))
    finally:
        reconciler.close()
    summary = {o.pool_id: o.state for o in outcomes}
    runner = reconciler.ports.runner
    if as_json:
        label = getattr(runner, "cloud_label", None)
        click.echo(json.dumps({"pools": summary, "engine": runner.engine,
                               **({"cloud": label} if label else {})}))
    else:
        if runner.engine == "mock":
            info(_MOCK_NOTE)
        for pool_id, state in summary.items():
            click.echo(f"{pool_id}\t{state}")
        from automation.engine.secrets import where_state_lives

        info(_engine_note(runner, reconciler.app.home) if getattr(runner, "cloud_label", None)
             else where_state_lives(reconciler.app.home, os.environ))


def _api(app: Any, api_listen: str | None, tls_cert: Path | None, tls_key: Path | None,
         runner: Any = None, *, workers: int = 1, home: str | None = None,
         handed: tuple[int, str] | None = None) -> list[Any]:
    """The HTTP API (with --api-listen) in a thread of this process, over its App; its
    engine routes (preview, unlock, adopt) use ``runner``, the control loop's engine (None:
    ANYCLOUD_ENGINE's, made when first needed). ``workers`` > 1: in that many processes
    instead (``automation.cli.api_workers``). ``handed``: this process is one of them, given
    the parent's listening socket (its fd) and URL."""
    if (tls_cert is None) != (tls_key is None):
        from automation.errors import InvalidInput

        raise InvalidInput("--tls-cert" if tls_cert is None else "--tls-key", None,
                           "give both --tls-cert and --tls-key, or neither")
    if api_listen is None and handed is None:
        from automation.errors import InvalidInput

        if tls_cert is not None:
            raise InvalidInput("--tls-cert", str(tls_cert), "is for --api-listen")
        if workers > 1:
            raise InvalidInput("--api-workers", workers, "is for --api-listen")
        return []
    from automation.serving import ServerThread, Tls

    key = app.sealing  # a bad key file fails the start, not the first credential
    tls = Tls(tls_cert, tls_key) if tls_cert is not None and tls_key is not None else None
    how = "TLS" if tls else ("plain HTTP: put it behind a TLS-terminating ingress, or give "
                             "--tls-cert/--tls-key")
    if handed is not None:
        import socket

        from automation.api.app import create_api

        fd, url = handed
        api = create_api(app)
        server: Any = ServerThread(api, "", tls, bound=(socket.socket(fileno=fd), url))
        info(f"API worker {os.getpid()} serving {url}/v1")
        return [server]
    if workers > 1:
        from automation.cli.api_workers import ApiWorkers

        server = ApiWorkers(api_listen or "", workers, tls_cert=tls_cert, tls_key=tls_key,
                            home=home)
        how += f"; {workers} worker processes"
    else:
        # Here and in each worker, not in the workers' parent: it never serves a request
        # and would spend ~2 s of CPU importing the app.
        from automation.api.app import create_api

        api = create_api(app)
        api.state.runner = runner
        server = ServerThread(api, api_listen or "", tls, field="--api-listen")
    info(f"API listening on {server.url}/v1 ({how})")
    info(f"credentials' secrets sealed under key {key.key_id.hex()}" if key else
         "no secrets key (ANYCLOUD_SECRETS_KEY_FILE): credentials that carry a secret are "
         "refused; make one with anycloud secrets-key new FILE")
    return [server]


def _agent_pools(ctx: click.Context, config: Path | None, broker_listen: str | None,
                 ledger: Any) -> list[Any]:
    """The AgentPool operator (with --operator-config) and the agent broker (with
    --broker-listen), each in a thread of this process over the same ledger; what to stop."""
    running: list[Any] = []
    if config is not None:
        from automation.agentpools.operator import assemble, load_config

        running.append(assemble(load_config(config), ledger, log=info).start())
        info(f"AgentPool operator started ({config})")
    if broker_listen is not None:
        from automation.agentpools.registry import Registry
        from automation.api.broker import BrokerThread, create_app

        broker = BrokerThread(create_app(Registry(ledger)), broker_listen)
        running.append(broker)
        info(f"agent broker listening on {broker.url}")
    return running


@click.command()
@click.option("--interval", type=float, default=30.0, show_default=True,
              help="Seconds between passes.")
@click.option("--speed", type=click.FloatRange(min=1), default=1.0, show_default=True,
              help="With --simulate: simulated seconds per real second.")
@click.option("--operator-config", "operator_config", envvar="ANYCLOUD_CONFIG",
              type=InputPath(dir_okay=False, path_type=Path),
              help="Also run the AgentPool operator with this control-plane config "
                   "(provisioners: - kubernetes: {namespace: ...}; env ANYCLOUD_CONFIG), as "
                   "`anycloud operator` does.")
@click.option("--broker-listen", metavar="HOST:PORT",
              help="Also serve the agent broker here, as `anycloud broker` does.")
@click.option("--api-listen", metavar="HOST:PORT",
              help="Also serve the HTTP API here (/v1; every call takes a token: "
                   "anycloud token create).")
@click.option("--api-workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="With --api-listen: serve the API from this many processes sharing the "
                   "address (each its own App over the same ledger; PostgreSQL for more than "
                   "one host). The control loop stays in this process.")
@click.option("--api-fd", type=int, hidden=True)  # an API worker: its parent's socket
@click.option("--api-url", hidden=True)  # ... and the URL that socket serves
@click.option("--tls-cert", type=InputPath(dir_okay=False, exists=True, path_type=Path),
              help="With --api-listen: serve HTTPS with this certificate (PEM).")
@click.option("--tls-key", type=InputPath(dir_okay=False, exists=True, path_type=Path),
              help="With --api-listen: the certificate's private key (PEM).")
@_engine
@_simulate
@_concurrency
@_per_credential
@click.option("--no-control-loop", "no_loop", is_flag=True,
              help="Serve only what --api-listen, --broker-listen and --operator-config ask "
                   "for: the control loop runs in another process over the same ledger.")
@json_option
@handle_errors
@click.pass_context
def serve(ctx: click.Context, interval: float, speed: float, operator_config: Path | None,
          broker_listen: str | None, api_listen: str | None, tls_cert: Path | None,
          tls_key: Path | None, engine: str | None, simulate: bool,
          concurrency: int | None, per_credential: int | None, no_loop: bool,
          as_json: bool, api_workers: int = 1, api_fd: int | None = None,
          api_url: str | None = None) -> None:
    """Run the control loop until SIGINT/SIGTERM, one pass every --interval seconds (and,
    when asked, the API, the AgentPool operator and the agent broker beside it)."""
    gc_mode.long_running()
    configured_provisioner_set()  # a bad set fails now (exit 2), not at its first use
    stop = {"now": False}

    def _stop(*_: object) -> None:
        stop["now"] = True

    # From the start: a SIGTERM during set-up still stops it in order, and the process exits
    # normally, so the kubeconfigs it opened in memory are removed (automation.memfiles).
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    home = ctx.find_root().obj.get("home")
    if api_listen is not None:
        from automation import instruments

        # Before anything records: the loop, its stack workers and the API workers started
        # from here share their instruments, and any worker's /metrics sums them.
        shared = instruments.share_between_processes()
        ctx.call_on_close(lambda: instruments.stop_sharing(shared))
    if simulate and api_workers > 1:
        from automation.errors import InvalidInput

        raise InvalidInput("--api-workers", api_workers, "must be 1 with --simulate: the "
                           "simulated cloud lives in this process")
    handed = (api_fd, api_url or "") if api_fd is not None else None
    if no_loop:
        if not (api_listen or broker_listen or operator_config or handed):
            from automation.errors import InvalidInput

            raise InvalidInput("--no-control-loop", True, "needs something to serve: "
                               "--api-listen, --broker-listen or --operator-config")
        app = app_from(ctx, local=True)
        beside = _api(app, api_listen, tls_cert, tls_key, workers=api_workers, home=home,
                      handed=handed)
        beside += _agent_pools(ctx, operator_config, broker_listen, app.ledger)
        if handed is None:
            info("no control loop in this process (--no-control-loop); SIGTERM to stop")
        parent = os.getppid()
        while not stop["now"] and (handed is None or os.getppid() == parent):
            time.sleep(0.2)  # a worker whose parent is gone stops too
        for part in reversed(beside):
            part.stop()
        return
    reconciler, world = _setup(ctx, engine, simulate, as_json, concurrency, per_credential)
    beside = _api(reconciler.app, api_listen, tls_cert, tls_key, reconciler.ports.runner,
                  workers=api_workers, home=home)
    beside += _agent_pools(ctx, operator_config, broker_listen, reconciler.app.ledger)
    info(f"reconciling every {interval:g}s ({'simulated' if simulate else 'live'}) with the "
         f"{reconciler.ports.runner.engine} engine; SIGTERM to stop")
    info(_engine_note(reconciler.ports.runner, reconciler.app.home))
    while not stop["now"]:
        try:
            reconciler.run_once()
        except Exception as exc:
            # A pool's own failures never get here (the pass records them per pool); this is
            # the pass itself failing, e.g. the ledger unreachable: say so, try again later.
            from automation.reports import write_crash_report

            report = write_crash_report(reconciler.app.home, "running a reconcile pass")
            info(f"[error] pass failed: {type(exc).__name__}: {exc} (report: {report}); "
                 f"next pass in {interval:g}s")
        deadline = time.monotonic() + interval
        while not stop["now"] and time.monotonic() < deadline:
            time.sleep(min(0.5, interval))
        if world is not None:
            from datetime import timedelta

            world.advance(timedelta(seconds=interval * speed))
    for part in reversed(beside):
        part.stop()
    reconciler.close()
