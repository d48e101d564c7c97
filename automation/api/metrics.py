"""``GET /metrics``: Prometheus' text format, for a scraper holding a viewer token (reading is
all it does; anonymous: 401, an agent token: 403, a token scoped to an org: 403, since the
figures are the whole control plane's). An admin's scrape also has the node pools and VMs
per org (``anycloud_org_*``, labelled with the org's name): who the tenants are is an
admin's to see.

Two sources, joined in one registry per app:
- the ledger, read at each scrape (``LedgerCollector``): node pools and VMs by state, each
  AgentPool's agents, slots and sessions. Every API worker reads the same ledger, so every
  worker answers the same figures;
- the in-process instruments (``automation.instruments``): reconcile passes and stack
  operations. Under ``serve`` they are shared between its processes (the control loop, its
  stack workers, every API worker) and any worker's answer sums them all; in a process on
  its own (a test's app) they are that process's.

Not in the OpenAPI document (as ``/v1/openapi.json`` itself is not): it is no JSON call of
the API, the SDK has nothing to make of it, and Prometheus is its client."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from automation import instruments
from automation.api.security import FleetReader
from automation.ledger.db import Ledger
from automation.services.fleet_counts import read_counts, read_org_counts

PATH = "/metrics"
# Each AgentPool's desired replicas, as its operator last decided: {"ns/name": replicas}.
DesiredReplicas = Callable[[], Mapping[str, int]]


class LedgerCollector:
    """The ledger's counts as metric families, read at each scrape.

    ``desired``: where each AgentPool's desired replica count comes from (``create_api``
    passes ``fleet_counts.desired_replicas``: the operator's last decision per open pool, as
    it records it in the ledger); None leaves the family out."""

    def __init__(self, ledger: Ledger, desired: DesiredReplicas | None = None, *,
                 per_org: bool = False) -> None:
        self.ledger, self.desired, self.per_org = ledger, desired, per_org

    def collect(self) -> Iterator[Metric]:
        counts = read_counts(self.ledger)
        node_pools = GaugeMetricFamily("anycloud_node_pools", "Node pools by state.",
                                       labels=["state"])
        for state, n in counts.node_pools.items():
            node_pools.add_metric([state], n)
        vms = GaugeMetricFamily("anycloud_vms", "VMs (attempts) of node pools by state.",
                                labels=["state"])
        for state, n in counts.vms.items():
            vms.add_metric([state], n)
        yield node_pools
        yield vms
        if self.per_org:
            yield from _per_org(self.ledger)

        def gauge(name: str, text: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, text, labels=["pool"])

        ready = gauge("anycloud_agent_pool_ready_agents", "Agents ready for sessions.")
        idle = gauge("anycloud_agent_pool_idle_slots", "Free slots of ready agents.")
        busy = gauge("anycloud_agent_pool_busy_slots", "Slots held by running sessions.")
        pending = gauge("anycloud_agent_pool_pending_sessions", "Sessions waiting for a slot.")
        running = gauge("anycloud_agent_pool_running_sessions", "Sessions running.")
        started = CounterMetricFamily("anycloud_agent_pool_sessions_started_total",
                                      "Sessions asked for.", labels=["pool"])
        finished = CounterMetricFamily(
            "anycloud_agent_pool_sessions_finished_total",
            "Sessions ended, by outcome (done: the command ended; failed: it could not run "
            "or its agent was lost; cancelled: released by its client first).",
            labels=["pool", "outcome"])
        for pool, c in sorted(counts.agent_pools.items()):
            ready.add_metric([pool], c.ready_agents)
            idle.add_metric([pool], c.idle_slots)
            busy.add_metric([pool], c.busy_slots)
            pending.add_metric([pool], c.pending_sessions)
            running.add_metric([pool], c.running_sessions)
            started.add_metric([pool], c.sessions_started)
            for outcome, n in c.sessions_finished.items():
                finished.add_metric([pool, outcome], n)
        yield from (ready, idle, busy, pending, running, started, finished)
        if self.desired is not None:
            desired = gauge("anycloud_agent_pool_desired_replicas",
                            "Agents the AgentPool operator last decided the pool should have.")
            for pool, n in sorted(self.desired().items()):
                desired.add_metric([pool], n)
            yield desired


def _per_org(ledger: Ledger) -> Iterator[Metric]:
    pools = GaugeMetricFamily("anycloud_org_node_pools", "Node pools of each org by state.",
                              labels=["org", "state"])
    vms = GaugeMetricFamily("anycloud_org_vms", "VMs of each org's node pools by state.",
                            labels=["org", "state"])
    for org, (by_pool_state, by_vm_state) in read_org_counts(ledger).items():
        for state, n in by_pool_state.items():
            pools.add_metric([org, state], n)
        for state, n in by_vm_state.items():
            vms.add_metric([org, state], n)
    yield pools
    yield vms


class _Instruments:
    """This process's instruments, collected at each scrape."""

    def collect(self) -> Iterator[Metric]:
        collected: Iterator[Metric] = instruments.registry().collect()
        return collected


def scrape_registry(ledger: Ledger, desired: DesiredReplicas | None = None, *,
                    per_org: bool = False) -> Any:
    instruments.enable()  # this process serves them: its passes and operations count
    registry = CollectorRegistry()
    registry.register(LedgerCollector(ledger, desired, per_org=per_org))
    shared = instruments.shared_directory()
    if shared is not None:
        MultiProcessCollector(registry, path=shared)
    else:
        registry.register(_Instruments())
    return registry


def install(api: FastAPI, ledger: Ledger, desired: DesiredReplicas | None = None) -> None:
    fleet = scrape_registry(ledger, desired)
    with_orgs = scrape_registry(ledger, desired, per_org=True)

    @api.get(PATH, include_in_schema=False)
    def metrics(who: FleetReader) -> Response:
        # A plain function: FastAPI runs it in a worker thread (it reads the ledger).
        registry = with_orgs if who.role == "admin" else fleet
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
