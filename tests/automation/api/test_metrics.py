"""``GET /metrics``: a known scenario (node pools and VMs through reconcile passes on the
simulated cloud, agents and sessions through the broker's Registry), then one scrape with a
viewer's token, parsed with prometheus_client's own parser and checked value by value; the
gate (anonymous 401, an agent's token 403); the in-process instruments count what ran.

Over SQLite and PostgreSQL (the ``rig`` fixture takes ``ledger_url``)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import httpx2
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from automation import instruments
from automation.agentpools.registry import Registry
from automation.api.app import create_api
from automation.api.metrics import LedgerCollector
from automation.app import App
from automation.clock import SystemClock
from automation.engine.runner import StackRunner
from automation.errors import AnycloudError
from automation.ledger import open_ledger
from automation.services import credentials, node_pools
from automation.services.tokens import create_token
from automation.simulators.world import register_simulated_cluster
from automation.stack_targets import pool_target
from tests.automation.api.conftest import bearer
from tests.automation.api.test_api_serve import ANYCLOUD, listening
from tests.automation.reconciler.conftest import Rig, rig  # noqa: F401  (the fixture)
from tests.imports import modules_loaded_by

M = timedelta(minutes=1)
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def of(samples: Samples, name: str) -> dict[frozenset[tuple[str, str]], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}


class CountingRunner:
    """The rig's runner, counting the operations the reconciler asks of it: the figures the
    stack-operation histogram must agree with."""

    def __init__(self, inner: StackRunner) -> None:
        self.inner, self.calls = inner, {"up": 0, "destroy": 0}

    def __getattr__(self, name: str) -> object:
        method = getattr(self.inner, name)
        if name not in self.calls:
            return method

        def counted(*args: object, **kwargs: object) -> object:
            self.calls[name] += 1
            return method(*args, **kwargs)

        return counted


def node_pool_scenario(sim: Rig) -> tuple[int, CountingRunner, str]:
    """cpu: 2 VMs, ready. gone: 1 VM, deleted (its VM released). One pass with the cluster
    unreachable (cpu's turn fails CLUSTER_UNAVAILABLE). later: pending, never reconciled.
    Returns the passes run, the counting runner and cpu's id."""
    runner = CountingRunner(sim.reconciler.ports.runner)
    sim.reconciler.ports.runner = runner  # type: ignore[assignment]
    cpu = sim.pool("cpu", count=2)
    sim.pool("gone", count=1)
    sim.passes(6, step=M)
    node_pools.delete_node_pool(sim.app, "gone")
    sim.passes(4, step=M)
    sim.world.cluster.set_unreachable(True)
    sim.passes(1, step=M)
    sim.world.cluster.set_unreachable(False)
    sim.pool("later", count=1)
    return 11, runner, cpu


def agent_scenario(registry: Registry) -> None:
    """ci/build: a1 (2 slots) ready and full; a3 (3 slots) draining with 1 busy; a2 gone.
    Eight sessions: 3 running, 1 done, 3 failed, 1 cancelled.
    ci/idle: one ready agent of 3 slots, no session. ci/queue: no agent, 2 sessions pending."""
    build = "ci/build"
    for pool, desired in ((build, 2), ("ci/idle", 1), ("ci/queue", 1), ("ci/gone", 3)):
        registry.observe_pool(pool, f"uid-{pool}", desired, "Reconciled")  # the operator
    registry.close_pool("ci/gone")  # deleted: no longer desired
    registry.register(build, "a1", "pod-a1", 2)
    registry.register(build, "a2", "pod-a2", 2)
    s = [registry.acquire(build, ["make"]).id for _ in range(3)]  # a1, a1, a2
    registry.release(s[0], 0, agent="a1")  # done
    registry.release(s[2], agent="a2", error="no such file")  # failed
    s += [registry.acquire(build, ["make"]).id for _ in range(3)]  # a1, a2, a2
    s.append(registry.acquire(build, ["make"]).id)  # no room: pending ...
    registry.release(s[6])  # ... cancelled by its client
    s.append(registry.acquire(build, ["make"]).id)  # pending
    registry.deregister("a2")  # its two running sessions failed
    registry.register(build, "a3", "pod-a3", 3)  # takes the pending one
    registry.heartbeat("a3", 1, draining=True)
    assert [registry.session(i).state for i in s] == [
        "done", "running", "failed", "running", "failed", "failed", "cancelled", "running"]
    registry.register("ci/idle", "b1", "pod-b1", 3)
    registry.acquire("ci/queue", ["make"])
    registry.acquire("ci/queue", ["make"])


def test_a_scrape_after_a_known_scenario(rig: Rig) -> None:  # noqa: F811
    api = create_api(rig.app, limiter=None)
    http = TestClient(api, raise_server_exceptions=False)  # no lifespan: no broker expiry
    viewer = bearer(create_token(rig.app, "prometheus", "viewer", by="test").token)
    before = parse(http.get("/metrics", headers=viewer).text)

    passes, runner, cpu = node_pool_scenario(rig)
    agent_scenario(Registry(rig.app.ledger, rig.app.clock))
    runner.inner.preview(pool_target(rig.app, cpu))

    answer = http.get("/metrics", headers=viewer)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    after = parse(answer.text)

    assert of(after, "anycloud_node_pools") == {
        frozenset({("state", state)}): n for state, n in {
            "pending": 1, "provisioning": 0, "ready": 1, "failed": 0, "deleting": 0,
            "deleted": 1}.items()}
    assert of(after, "anycloud_vms") == {
        frozenset({("state", state)}): n for state, n in {
            "pending": 0, "creating": 0, "running": 2, "releasing": 0, "released": 1}.items()}

    figures = {
        # pool: ready agents, idle slots, busy slots, pending, running, started
        "ci/build": (1, 0, 3, 0, 3, 8),
        "ci/idle": (1, 3, 0, 0, 0, 0),
        "ci/queue": (0, 0, 0, 2, 0, 2),
    }
    names = ("ready_agents", "idle_slots", "busy_slots", "pending_sessions",
             "running_sessions", "sessions_started_total")
    for i, name in enumerate(names):
        assert of(after, f"anycloud_agent_pool_{name}") == {
            frozenset({("pool", pool)}): row[i] for pool, row in figures.items()}, name
    assert of(after, "anycloud_agent_pool_sessions_finished_total") == {
        frozenset({("pool", pool), ("outcome", outcome)}): n
        for pool, ends in {"ci/build": (1, 3, 1), "ci/idle": (0, 0, 0),
                           "ci/queue": (0, 0, 0)}.items()
        for outcome, n in zip(("done", "failed", "cancelled"), ends, strict=True)}
    assert of(after, "anycloud_agent_pool_desired_replicas") == {
        frozenset({("pool", pool)}): n
        for pool, n in {"ci/build": 2, "ci/idle": 1, "ci/queue": 1}.items()}

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("anycloud_reconcile_pass_duration_seconds_count") == passes
    assert delta("anycloud_reconcile_pass_duration_seconds_sum") > 0
    assert delta("anycloud_reconcile_pass_duration_seconds_bucket", le="+Inf") == passes
    codes = {dict(k)["code"]: v - value(before, "anycloud_reconcile_errors_total", **dict(k))
             for k, v in of(after, "anycloud_reconcile_errors_total").items()}
    assert {c: n for c, n in codes.items() if n} == {"CLUSTER_UNAVAILABLE": 1}
    ops = "anycloud_stack_operation_duration_seconds_count"
    assert runner.calls["up"] > 0 and runner.calls["destroy"] == 1
    assert delta(ops, engine="mock", kind="up") == runner.calls["up"]
    assert delta(ops, engine="mock", kind="destroy") == 1
    assert delta(ops, engine="mock", kind="preview") == 1
    assert delta(ops, engine="mock", kind="refresh") == 0


@pytest.mark.parametrize("caller, status", [("none", 401), ("agent", 403)])
def test_the_gate(rig: Rig, caller: str, status: int) -> None:  # noqa: F811
    http = TestClient(create_api(rig.app, limiter=None), raise_server_exceptions=False)
    headers = {} if caller == "none" else bearer(
        create_token(rig.app, "agent", "agent", by="test", pool="ci/build").token)
    answer = http.get("/metrics", headers=headers)
    assert answer.status_code == status
    assert answer.headers["content-type"] == "application/problem+json"
    assert "anycloud_" not in answer.text
    assert ("GET", "/metrics") in http.app.state.route_access  # type: ignore[attr-defined]


def test_not_in_the_openapi_document(rig: Rig) -> None:  # noqa: F811
    assert "/metrics" not in create_api(rig.app, limiter=None).openapi()["paths"]


def test_desired_replicas_when_given_a_source(rig: Rig) -> None:  # noqa: F811
    collector = LedgerCollector(rig.app.ledger, desired=lambda: {"ci/build": 4, "ci/idle": 0})
    families = {f.name: f for f in collector.collect()}
    assert {s.labels["pool"]: s.value
            for s in families["anycloud_agent_pool_desired_replicas"].samples} == {
        "ci/build": 4, "ci/idle": 0}


def test_a_pass_that_fails_counts_under_its_code() -> None:
    """A pass that raises (the ledger unreachable) is timed, and counted under its code."""
    instruments.enable()
    sample = instruments.registry().get_sample_value
    errors = ("anycloud_reconcile_errors_total", {"code": "LEDGER_DOWN"})
    passes = "anycloud_reconcile_pass_duration_seconds_count"
    were, ran = sample(*errors) or 0.0, sample(passes) or 0.0
    with pytest.raises(AnycloudError), instruments.reconcile_pass():
        raise AnycloudError("ledger unreachable", code="LEDGER_DOWN")
    assert (sample(*errors), sample(passes)) == (were + 1, ran + 1)


@pytest.mark.parametrize("args", [["--help"], ["reconcile", "--once", "--simulate", "--json"]])
def test_commands_that_serve_no_metrics_never_import_prometheus_client(
        tmp_path: Path, args: list[str]) -> None:
    """A reconcile pass outside ``serve --api-listen`` records nothing: its hooks are no-ops
    and prometheus_client (~100 ms) is never loaded."""
    loaded, done = modules_loaded_by(args, {"ANYCLOUD_HOME": str(tmp_path / "home"),
                                            "ANYCLOUD_DATABASE_URL": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert "prometheus_client" not in loaded
    assert ("automation" in loaded) and ("click" in loaded)  # the probe saw the CLI load


def _serve(home: Path, *args: str) -> tuple[subprocess.Popen[str], str, dict[str, str]]:
    """``anycloud serve ARGS --api-listen 127.0.0.1:0`` over a SQLite ledger in ``home``
    (with the simulated cluster and a credential), the URL it serves, and a viewer's
    headers."""
    (home.parent / "tmp").mkdir(parents=True, exist_ok=True)  # where its metrics files go
    env = {**os.environ, "ANYCLOUD_HOME": str(home), "ANYCLOUD_API_RATE": "off",
           "TMPDIR": str(home.parent / "tmp")}
    for name in ("ANYCLOUD_DATABASE_URL", instruments.MULTIPROC_ENV):
        env.pop(name, None)
    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    app = App(ledger=ledger, clock=SystemClock(), home=home)
    register_simulated_cluster(app, home)
    credentials.new_credential(app, credentials.NewCredential("team-aws", "aws",
                                                              {"profile": "team"}))
    for name in ("cpu", "web"):
        node_pools.create_node_pool(app, node_pools.CreateNodePool(
            name=name, credentials="team-aws", region="us-east-1", vm_type="m7i.large",
            min_vms=1, max_vms=1))
    headers = bearer(create_token(app, "prometheus", "viewer", by="test").token)
    ledger.dispose()
    proc = subprocess.Popen([ANYCLOUD, "serve", *args, "--interval", "0.2", "--api-listen",
                             "127.0.0.1:0"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url, _ = listening(proc)
    return proc, url.removesuffix("/v1"), headers


def _stopped(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err[-2000:]


def _scrape_until(url: str, headers: dict[str, str], done: Callable[[Samples], bool]
                  ) -> Samples:
    deadline = time.monotonic() + 90
    while True:
        # A fresh connection each time: with several API workers, the kernel spreads them.
        # (A worker's first answer waits for its imports: seconds on a busy machine.)
        answer = httpx2.get(f"{url}/metrics", headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        samples = parse(answer.text)
        if done(samples):
            return samples
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.3)


@pytest.mark.slow
def test_serve_counts_the_stack_operations_its_workers_ran(tmp_path: Path) -> None:
    """``serve --simulate``: two pools' stacks run in stack worker processes (a concurrent
    pass), and the API's scrape counts their operations beside the loop's passes."""
    proc, url, headers = _serve(tmp_path / "home", "--simulate", "--speed", "300")
    try:
        samples = _scrape_until(url, headers, lambda s: value(
            s, "anycloud_node_pools", state="ready") == 2)
        ups = value(samples, "anycloud_stack_operation_duration_seconds_count",
                    engine="mock", kind="up")
        assert ups >= 2, ups
        assert value(samples, "anycloud_reconcile_pass_duration_seconds_count") >= 1
        assert len(list((tmp_path / "tmp").glob("anycloud-metrics-*"))) == 1
    finally:
        _stopped(proc)
    # The directory the processes shared is gone with them, not left in /tmp by each serve.
    assert list((tmp_path / "tmp").glob("anycloud-metrics-*")) == []


@pytest.mark.slow
def test_every_api_worker_reports_the_control_loops_passes(tmp_path: Path) -> None:
    """``serve --api-workers 2``: the control loop runs in the parent, which answers no
    request; each worker's scrape still counts its passes (and the errors of its pools'
    turns: the cluster's address answers nothing, CLUSTER_UNAVAILABLE)."""
    proc, url, headers = _serve(tmp_path / "home", "--engine", "mock", "--api-workers", "2")
    try:
        for _ in range(6):
            samples = _scrape_until(url, headers, lambda s: value(
                s, "anycloud_reconcile_pass_duration_seconds_count") >= 1)
            assert value(samples, "anycloud_reconcile_errors_total",
                         code="CLUSTER_UNAVAILABLE") >= 2
            assert value(samples, "anycloud_node_pools", state="pending") == 2
    finally:
        _stopped(proc)
