"""``anycloud session run``: run a command on a pool's agent through the broker."""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

import click

from automation.cli.api_token import TOKEN_ENV, required_token
from automation.cli.output import handle_errors, info, json_option

POLL_WAIT = 20.0  # seconds each long poll may wait at the broker
# After a Ctrl-C: how long to wait for the agent to confirm that the command stopped (its
# next heartbeat brings the cancel, 5 s apart by default; a command that ignores SIGTERM is
# killed 5 s later). Past it the client leaves; the broker keeps the cancel for the agent.
CANCEL_WAIT = 15.0
LOCAL_BROKER = "http://127.0.0.1:50051"  # `anycloud broker`'s own default


@click.group()
def session() -> None:
    """Sessions: commands run on the agents of an AgentPool."""


@session.command("run", context_settings={"ignore_unknown_options": True})
@click.option("--pool", required=True, help="The AgentPool: NAME (namespace default, or "
              "--namespace) or NAMESPACE/NAME.")
@click.option("--namespace", default="default", show_default=True)
@click.option("--broker", "broker_address", envvar="ANYCLOUD_BROKER",
              help="The broker's URL or HOST:PORT (env ANYCLOUD_BROKER). Default: in remote "
                   f"mode the API (which serves the broker), else {LOCAL_BROKER}.")
@json_option
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@handle_errors
@click.pass_context
def run(ctx: click.Context, pool: str, namespace: str, broker_address: str | None,
        as_json: bool, command: tuple[str, ...]) -> None:
    """Acquire a slot in the pool (waiting while none is free), run COMMAND on the agent
    that holds it, stream its output here as the agent sends it, release the slot and exit
    with the command's exit code. Give the command after `--`. Ctrl-C cancels: the agent
    stops the command. --json: one JSON line per output chunk, then the session. It sends
    a member token: ANYCLOUD_TOKEN, or in remote mode the one `anycloud login` kept."""
    from automation.agentpools.config import qualified_pool
    from automation.agentpools.wire import Session, check_pool
    from automation.errors import AnycloudError

    full_pool = check_pool(qualified_pool(pool, namespace), "--pool")
    client = _broker_client(ctx, broker_address)

    def emit(obj: dict[str, Any]) -> None:
        click.echo(json.dumps(obj))

    interrupts = _Interrupts()
    s: Session | None = None
    cancel_by: float | None = None  # once cancelled: when to stop waiting for the agent
    shown_ahead: int | None = None
    after = 0
    try:
        interrupts.install()  # from here a Ctrl-C is never lost: see _Interrupts
        while True:
            try:
                if s is None:
                    s = client.acquire(full_pool, list(command))  # no wait: say so at once
                    interrupts.arm()  # a Ctrl-C that came meanwhile cancels it now
                while s.state == "pending":
                    if s.ahead != shown_ahead:
                        shown_ahead = s.ahead
                        info(f"waiting for a free slot in pool {full_pool} (session {s.id}, "
                             f"{s.ahead} ahead)")
                    s = client.session(s.id, wait=POLL_WAIT)
                if shown_ahead is not None and cancel_by is None and s.state == "running":
                    info(f"session {s.id} running on agent {s.agent_id}")
                while True:
                    wait = POLL_WAIT if cancel_by is None else cancel_by - time.monotonic()
                    if wait <= 0:
                        info(f"session {s.id}: its agent has not confirmed the stop within "
                             f"{CANCEL_WAIT:g}s; leaving (the broker keeps the cancel)")
                        sys.exit(130)
                    out = client.output(s.id, after, wait=min(wait, POLL_WAIT))
                    for chunk in out.chunks:
                        if as_json:
                            emit({"stream": chunk.stream, "data": chunk.data})
                        else:
                            target = sys.stdout if chunk.stream == "stdout" else sys.stderr
                            target.write(chunk.data)
                            target.flush()
                    after = out.next_after
                    if out.complete:
                        s = out.session
                        break
                break
            except KeyboardInterrupt:  # the first Ctrl-C (or SIGTERM); a second one leaves
                assert s is not None  # armed only once the broker answered the acquire
                info(f"cancelling session {s.id} (Ctrl-C again to leave it)")
                cancel_by = time.monotonic() + CANCEL_WAIT
                s = client.cancel(s.id)
    except _Leave:
        info("left before the broker answered" if s is None else f"left session {s.id}")
        sys.exit(130)
    except KeyboardInterrupt:  # after the session ended, before the handlers were restored
        sys.exit(130)
    finally:
        interrupts.restore()
    if as_json:
        emit({"session": s.model_dump(mode="json")})
    if s.state == "failed":
        raise AnycloudError(f"session {s.id} failed: {s.error}", code="SESSION_FAILED")
    if s.state == "cancelled":
        sys.exit(130)  # interrupted, as a shell says it, whatever the stopped command said
    code = s.exit_code if s.exit_code is not None else 1
    sys.exit(128 - code if code < 0 else code)


class _Leave(BaseException):
    """A second Ctrl-C (or SIGTERM): leave at once, whatever the client was waiting for."""


class _Interrupts:
    """SIGINT and SIGTERM while ``session run`` runs, its own handlers even if the process
    started with SIGINT ignored (as a non-interactive shell starts a command run with ``&``):
    an inherited SIG_IGN would have made Ctrl-C do nothing at all.

    The first one cancels: ``KeyboardInterrupt`` in the main thread, or, before ``arm`` (the
    broker has not yet answered the acquire, so there is no session id to cancel), as soon as
    ``arm`` is called. Any later one raises ``_Leave``: the client exits 130 at once, without
    waiting for the broker or the agent. ``restore`` puts back the handlers ``install``
    replaced."""

    def __init__(self) -> None:
        self.count = 0
        self._armed = False
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, *_: object) -> None:
        self.count += 1
        if self.count > 1:
            raise _Leave
        if self._armed:
            raise KeyboardInterrupt

    def arm(self) -> None:
        self._armed = True
        if self.count:
            raise KeyboardInterrupt

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def _broker_client(ctx: click.Context, broker_address: str | None) -> Any:
    """The broker --broker (or ANYCLOUD_BROKER) names, with ANYCLOUD_TOKEN; else in remote
    mode the API's, with remote mode's token and CA; else the local broker."""
    from automation.agentpools.client import BrokerClient
    from automation.agentpools.config import broker_url
    from automation.cli.context import endpoint_from

    endpoint = endpoint_from(ctx) if broker_address is None else None
    if endpoint is not None and endpoint.url is not None:
        from automation.cli.backend import remote_token
        from automation.client.http import tls_verify

        return BrokerClient(endpoint.url, token=remote_token(endpoint),
                            verify=tls_verify(endpoint.ca_file))
    return BrokerClient(broker_url(broker_address or LOCAL_BROKER, "--broker"),
                        token=required_token(TOKEN_ENV))
