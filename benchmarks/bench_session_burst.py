"""A burst of session requests on one AgentPool (issue 11, "Measure"): wall seconds (real
clock) and operator passes from the burst until every session holds a slot, on the local
control plane (kwok plays the kubelets).

What is real: etcd, kube-apiserver, scheduler, controller-manager, kwok; the operator
in-process (kopf in a thread, its timer at ``INTERVAL`` s, the ``Reconciler`` and autoscaler
of ``anycloud operator``); the broker's ``Registry`` over a SQLite ledger (or
``BENCH_DATABASE_URL``). What stands in: the agents. 500 sessions at 10 slots an agent need
50 agents, and 50 ``anycloud agent`` processes on two cores would measure Python start-up,
so each worker pod is an agent **as registry calls** (as test_operator's ``Agents``): a
thread lists the pool's pods every 20 ms, registers each one kwok reports Running under the
pod's name with the pod's ``ANYCLOUD_AGENT_SLOTS``, and heartbeats every agent every 0.5 s
(registering and heartbeats are what hand pending sessions slots). Sessions are
``Registry.acquire`` calls from 32 threads fired at once, i.e. the broker's work for
``POST /v1/sessions`` without HTTP.

Cases (each a fresh pool: defaultSlotsPerAgent 10, maxReplicas 60, minIdle 0, deleted after):
- burst: 500 sessions on a pool at zero agents (it must grow to 50);
- baseline, small: 50 sessions on a pool at zero (grows to 5);
- baseline, warm: 500 sessions on a pool already at 50 registered agents (minReplicas 50):
  the registry's own cost, no scaling.

A *pass* is one reconcile of the pool (timer tick or event) from the burst until the last
session holds a slot. The operator's reaction (kubectl apply -> first pod) is
bench_operator.py's.

    .venv/bin/python benchmarks/bench_session_burst.py [--smoke]    (BENCH_RUNS=3 by default)

--smoke: 11 sessions at 0 agents (grows to 2) and 11 at 2 registered agents, with the
operator's timer at 0.2 s and no quiet moment before each burst; the small baseline is left
out (the burst's code path with fewer sessions); one run, no warm-up burst.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _agentpool_plane, _cli, _kube_plane
from benchmarks._table import median, print_table

MARKS = ("kube", "slow")
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
# Sessions of the burst and of the small baseline; agents of the warm baseline (which gets
# BURST sessions); sessions of the warm-up burst (0: none).
BURST, SMALL, WARM, WARMUP = 500, 50, 50, 50
INTERVAL = float(os.environ.get("BENCH_INTERVAL", "0.5"))
QUIET = True  # wait two timer intervals before each burst (see burst())
REPO = Path(__file__).resolve().parent.parent
NS = "bench"
SLOTS, MAX_REPLICAS = 10, 60
FIRE_THREADS = 32


@dataclass
class Passes:
    """Reconcile passes per pool, with the time of each and the pods it created."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    log: dict[str, list[tuple[float, int]]] = field(default_factory=dict)

    def add(self, pool: str, created: int) -> None:
        with self.lock:
            self.log.setdefault(pool, []).append((time.perf_counter(), created))

    def between(self, pool: str, start: float, end: float) -> list[tuple[float, int]]:
        with self.lock:
            return [p for p in self.log.get(pool, []) if start <= p[0] <= end]


class Counted:
    """A Reconciler that records each pass (what kopf's handlers call)."""

    def __init__(self, inner: Any, passes: Passes) -> None:
        self.inner, self.passes = inner, passes

    def reconcile(self, pool: dict[str, Any]) -> Any:
        out = self.inner.reconcile(pool)
        self.passes.add(pool["metadata"]["name"], len(out.created))
        return out

    def delete(self, pool: dict[str, Any]) -> Any:
        return self.inner.delete(pool)


class StandInAgents:
    """Each Running worker pod of ``pool`` registers as an agent (the pod's slot count) and
    heartbeats; ``first_pod``/``registered`` record when pods and agents appeared."""

    def __init__(self, plane: Any, registry: Any, pool: str) -> None:
        self.plane, self.registry, self.pool = plane, registry, pool
        self.key = f"{NS}/{pool}"
        self.up: set[str] = set()
        self.first_pod: float | None = None
        self.last_register: float | None = None
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        beat = 0.0
        path = (f"/api/v1/namespaces/{NS}/pods?labelSelector=anycloud.sh/agent-pool%3D"
                f"{self.pool}")
        while not self._stop.wait(0.02):
            try:
                items = self.plane.get(path)["items"]
                if items and self.first_pod is None:
                    self.first_pod = time.perf_counter()
                for pod in items:
                    name = pod["metadata"]["name"]
                    if name in self.up or pod["metadata"].get("deletionTimestamp") or \
                            (pod.get("status") or {}).get("phase") != "Running":
                        continue
                    env = {e["name"]: e.get("value") for e in
                           pod["spec"]["containers"][0].get("env") or []}
                    self.registry.register(self.key, name, name,
                                           int(env.get("ANYCLOUD_AGENT_SLOTS") or 1))
                    self.up.add(name)
                    self.last_register = time.perf_counter()
                if time.perf_counter() - beat > 0.5:
                    beat = time.perf_counter()
                    for agent in self.registry.pool_view(self.key).agents:
                        self.registry.heartbeat(agent.id, agent.busy_slots)
            except BaseException as exc:
                self.errors.append(exc)
                return


@dataclass
class Result:
    acquired: float  # every acquire call returned
    first_pod: float  # the first worker pod listed
    all_running: float  # the last session holds a slot
    passes: int  # reconcile passes in [burst, all running]
    creating_passes: int  # of which created pods
    pods: int  # pods the pool had when all ran


def burst(plane: Any, registry: Any, passes: Passes, name: str, sessions: int,
          warm: int = 0) -> Result:
    doc = yaml.safe_load((REPO / "k8s/examples/shell-pool.yaml").read_text())
    doc["metadata"].update({"name": name, "namespace": NS})
    doc["spec"]["autoscaler"] = {"minIdle": 0, "maxIdle": SLOTS, "maxReplicas": MAX_REPLICAS,
                                 "minReplicas": warm, "defaultSlotsPerAgent": SLOTS,
                                 "idleDecaySecond": 600}
    doc["spec"]["template"]["spec"]["containers"][0]["args"] = [f"--pool={name}"]
    _kube_plane.apply(plane, f"/apis/anycloud.sh/v1/namespaces/{NS}/agentpools", doc)
    agents = StandInAgents(plane, registry, name)
    key = f"{NS}/{name}"
    try:
        # The operator must have seen the pool (its first list may wait out an API server
        # still initialising its storage: 429 and a retry): until then a session is refused.
        _wait(lambda: registry.pool_open(key), f"the operator to record {key}")
        if warm:
            _wait(lambda: registry.pool_view(key).ready_agents == warm, f"{warm} agents")
        # A quiet moment: the pool as the operator left it (no pass mid-flight). Only for
        # the figures: --smoke skips it.
        if QUIET:
            time.sleep(INTERVAL * 2)

        def acquire(i: int) -> None:
            registry.acquire(key, ["sh", "-c", f"echo {i}"])

        start = time.perf_counter()
        with ThreadPoolExecutor(FIRE_THREADS) as pool:
            list(pool.map(acquire, range(sessions)))
        acquired = time.perf_counter() - start
        _wait(lambda: registry.pool_view(key).running_sessions == sessions,
              f"{sessions} running sessions", poll=0.01, errors=agents.errors)
        end = time.perf_counter()
        seen = passes.between(name, start, end)
        return Result(acquired=acquired,
                      first_pod=(agents.first_pod or end) - start if not warm else 0.0,
                      all_running=end - start, passes=len(seen),
                      creating_passes=sum(1 for _, made in seen if made),
                      pods=len(agents.up))
    finally:
        agents.stop()
        _kube_plane.delete(plane, f"/apis/anycloud.sh/v1/namespaces/{NS}/agentpools/{name}")


def _wait(check: Callable[[], bool], what: str, timeout: float = 180.0, poll: float = 0.05,
          errors: list[BaseException] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if errors:
            raise SystemExit(f"the stand-in agents failed: {errors[0]!r}")
        if time.monotonic() > deadline:
            raise SystemExit(f"no {what} within {timeout:.0f} s")
        time.sleep(poll)


def main() -> None:
    global RUNS, BURST, SMALL, WARM, WARMUP, INTERVAL, QUIET
    smoke = _cli.parse(__doc__, MARKS).smoke
    if smoke:
        RUNS, BURST, SMALL, WARM, WARMUP, INTERVAL, QUIET = 1, 11, 10, 2, 0, 0.2, False
    url = os.environ.get("BENCH_DATABASE_URL")

    with tempfile.TemporaryDirectory() as tmp:
        def meanwhile() -> Any:  # while the control plane starts
            _agentpool_plane.imports()
            from automation.ledger import open_ledger

            return open_ledger(url or f"sqlite:///{Path(tmp) / 'ledger.db'}")

        plane, ledger = _agentpool_plane.start(Path(tmp) / "cp", meanwhile)
        try:
            from automation.agentpools.kubeapi import KubeApi
            from automation.agentpools.operator import Operator, build_registry
            from automation.agentpools.reconcile import Reconciler, RegistryState
            from automation.agentpools.registry import Registry
            from automation.kube.kubeconfig import client_configuration

            _kube_plane.namespace(plane, NS)
            config_map = yaml.safe_load((REPO / "k8s/examples/agent-config.yaml").read_text())
            config_map["metadata"]["namespace"] = NS
            _kube_plane.api(plane, "POST", f"/api/v1/namespaces/{NS}/configmaps", config_map)
            registry = Registry(ledger)
            passes = Passes()
            client_config = client_configuration(plane.kubeconfig)
            reconciler = Counted(Reconciler(api=KubeApi(client_config),
                                            state=RegistryState(registry)), passes)
            op = Operator(build_registry(lambda ns: reconciler, client_config, INTERVAL), [NS])
            op.start()
            cases = [(f"burst: {BURST} sessions, pool at 0 agents", BURST, 0),
                     (f"baseline: {SMALL} sessions, pool at 0 agents", SMALL, 0),
                     (f"baseline: {BURST} sessions, pool at {WARM} agents", BURST, WARM)]
            if smoke:  # the small baseline is the burst's code path with fewer sessions
                del cases[1]
            results: dict[str, list[Result]] = {c[0]: [] for c in cases}
            try:
                if WARMUP:
                    burst(plane, registry, passes, "warmup", WARMUP)  # not counted
                for run in range(RUNS):
                    for i, (title, sessions, warm) in enumerate(cases):
                        results[title].append(burst(plane, registry, passes,
                                                    f"burst-{run}-{i}", sessions, warm))
            finally:
                op.stop()
                ledger.dispose()
        finally:
            plane.stop()
    db = "PostgreSQL" if (url or "").startswith("postgresql") else "SQLite"
    rows = []
    for title, got in results.items():
        def med(attr: str, fmt: str, got: list[Result] = got) -> str:
            return format(median([getattr(r, attr) for r in got]), fmt)

        rows.append((title, med("acquired", ".2f"), med("first_pod", ".2f"),
                     med("all_running", ".2f"),
                     f"{min(r.all_running for r in got):.2f}-"
                     f"{max(r.all_running for r in got):.2f}",
                     med("passes", ".0f"), med("creating_passes", ".0f"),
                     med("pods", ".0f")))
    print_table(f"Session burst on one AgentPool ({SLOTS} slots an agent, operator timer "
                f"{INTERVAL:g} s, {db} ledger, stand-in agents): medians of {RUNS} runs, "
                "seconds from the burst",
                ["case", "acquires done", "first pod", "all hold a slot", "range",
                 "passes", "passes creating", "agents"], rows)


if __name__ == "__main__":
    main()
