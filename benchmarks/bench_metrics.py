"""``GET /metrics`` with 10, 100 and 1,000 pools (issue 21, "Measure"), on loopback.

For each size, a SQLite ledger is seeded with that many node pools (two running VMs each)
and as many AgentPools (two ready agents of two slots, four sessions: pending, running,
done, failed), and ``anycloud serve --no-control-loop --api-listen 127.0.0.1:0`` (one API
process, the shared-instruments mode ``serve`` always uses) serves it. Measured, one
request after another over one kept-alive connection, a viewer's token:

- ``GET /metrics``: p50/p99, and the size of its answer;
- ``GET /v1/healthz`` in the same run (the baseline: the server's floor per request);
- the ledger's four GROUP BY queries alone, in-process (``fleet_counts.read_counts``).

No control loop runs: the instruments it feeds are a constant number of series (histogram
buckets by engine and kind), the ledger's figures are what grows with the pools.

    .venv/bin/python benchmarks/bench_metrics.py [--smoke]   (BENCH_REQUESTS=100)

--smoke: 3 pools, 5 requests, no warm-up request or query (the first scrape, whose answer
the table sizes, is made all the same).
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, bench_cli_list
from benchmarks._table import latency, print_table
from benchmarks.bench_api import _address, _launch, _stop

MARKS: tuple[str, ...] = ()
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "100"))
SIZES = (10, 100, 1000)
WARMUP = True


def seed_agent_pools(home: Path, pools: int) -> None:
    """``pools`` AgentPools, each with two ready agents (2 slots, one busy on the first) and
    four sessions: one pending, one running, one done, one failed."""
    from automation.ledger import open_ledger, schema

    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    now = datetime.now(UTC)
    names = [f"bench/pool-{i:04d}" for i in range(pools)]
    with ledger.write() as conn:
        conn.execute(schema.agents.insert(), [dict(
            id=f"agent-{i:04d}-{j}", pool=pool, pod_name=f"pod-{i:04d}-{j}", slots=2,
            busy_slots=1 - j, reported_busy_slots=1 - j, state="ready", registered_at=now,
            last_heartbeat_at=now) for i, pool in enumerate(names) for j in range(2)])
        conn.execute(schema.sessions.insert(), [dict(
            id=f"se-{i:04d}-{state}", pool=pool, state=state, command=["true"],
            agent_id=None if state == "pending" else f"agent-{i:04d}-0", created_at=now)
            for i, pool in enumerate(names)
            for state in ("pending", "running", "done", "failed")])
    ledger.dispose()


def viewer_token(home: Path) -> str:
    from automation.app import App
    from automation.ledger import open_ledger
    from automation.services.tokens import create_token

    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    try:
        return create_token(App(ledger=ledger, home=home), "prometheus", "viewer",
                            by="bench").token
    finally:
        ledger.dispose()


def measure(pools: int) -> tuple[object, ...]:
    import httpx2

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        bench_cli_list.POOLS = pools
        bench_cli_list.seed(home)
        seed_agent_pools(home, pools)
        env = {**os.environ, "ANYCLOUD_HOME": str(home), "ANYCLOUD_API_RATE": "off"}
        for name in ("ANYCLOUD_DATABASE_URL", "PROMETHEUS_MULTIPROC_DIR"):
            env.pop(name, None)
        # serve starts while this process makes the token and its client (the server reads
        # tokens per request).
        server = _launch(env)
        try:
            from automation.ledger import open_ledger
            from automation.services.fleet_counts import read_counts

            token = viewer_token(home)
            client = httpx2.Client(timeout=60, headers={"Authorization": f"Bearer {token}"})
            client.base_url = _address(server)
            scrape = client.get("/metrics")  # warm: imports, connection, page cache
            scrape.raise_for_status()
            if WARMUP:
                client.get("/v1/healthz").raise_for_status()
            health = latency(lambda: client.get("/v1/healthz").raise_for_status(), REQUESTS)
            metrics = latency(lambda: client.get("/metrics").raise_for_status(), REQUESTS)
            ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
            if WARMUP:
                read_counts(ledger)
            queries = latency(lambda: read_counts(ledger), REQUESTS)
            ledger.dispose()
            client.close()
        finally:
            _stop(server)
    lines = len(scrape.text.splitlines())
    return (pools, f"{health[0] * 1000:.1f}", f"{metrics[0] * 1000:.1f}",
            f"{metrics[1] * 1000:.1f}", f"{metrics[0] / health[0]:.1f}x",
            f"{queries[0] * 1000:.1f}", f"{len(scrape.content) / 1024:.0f}", lines)


def main() -> None:
    global REQUESTS, SIZES, WARMUP
    if _cli.parse(__doc__, MARKS).smoke:
        REQUESTS, SIZES, WARMUP = 5, (3,), False
    rows = [measure(n) for n in SIZES]
    print_table(f"GET /metrics, one server process on loopback, {REQUESTS} requests each, "
                "node pools (2 VMs) = AgentPools (2 agents, 4 sessions) = pools (ms)",
                ("pools", "healthz p50", "metrics p50", "metrics p99", "vs healthz",
                 "queries p50", "KiB", "lines"), rows)


if __name__ == "__main__":
    main()
