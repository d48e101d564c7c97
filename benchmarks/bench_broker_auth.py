"""What the broker's token check costs (issue 20): one request of each kind through a real
uvicorn on loopback, against the same registry call made in-process in the same run (the
baseline: what the request would cost with no HTTP and no auth at all).

Rows, each the median and p99 of BENCH_REQUESTS calls (default 300), BENCH_RUNS rounds
(default 3, the median round kept):
- ``registry.pool_view`` in-process (baseline);
- ``tokens.authenticate`` alone (one indexed read of the token's hash in the ledger);
- ``GET /v1/pools/{ns}/{name}`` with a viewer token (HTTP + auth + the same read);
- the same request with no token (refused with 401 before any ledger read).

Ledger: a SQLite file in a temporary directory, or ``BENCH_DATABASE_URL``.

    .venv/bin/python benchmarks/bench_broker_auth.py [--smoke]

--smoke: one round of 5 requests.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import latency, median, print_table

MARKS = ()
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "300"))
POOL = "default/cpu"


def main() -> None:
    global RUNS, REQUESTS
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, REQUESTS = 1, 5
    import httpx2

    from automation.agentpools.registry import Registry
    from automation.api.broker import BrokerThread, create_app
    from automation.auth import tokens
    from automation.clock import SystemClock
    from automation.ledger import open_ledger

    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{tmp}/ledger.db"
        ledger = open_ledger(url)
        registry = Registry(ledger)
        for n in range(10):
            registry.register(POOL, f"pod-{n}", f"pod-{n}", 2)
        with ledger.write() as conn:
            token, _ = tokens.issue(conn, name=f"bench-{os.getpid()}", role="viewer",
                                    scope=None, expires_at=None, created_by="bench",
                                    now=SystemClock().now())
        server = BrokerThread(create_app(registry, expire_every=None), "127.0.0.1:0")
        authed = httpx2.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"})
        anonymous = httpx2.Client(base_url=server.url)
        path = f"/v1/pools/{POOL}"

        def get(client: httpx2.Client, status: int) -> Callable[[], None]:
            def call() -> None:
                if client.get(path).status_code != status:
                    raise SystemExit(f"GET {path}: expected {status}")
            return call

        kinds: dict[str, list[tuple[float, float]]] = {}
        cases: list[tuple[str, Callable[[], object]]] = [
            ("registry.pool_view in-process (baseline)", lambda: registry.pool_view(POOL)),
            ("tokens.authenticate alone",
             lambda: tokens.authenticate(ledger, token, SystemClock().now())),
            ("GET pool view, viewer token", get(authed, 200)),
            ("GET pool view, no token (401)", get(anonymous, 401)),
        ]
        try:
            for _ in range(RUNS):
                for name, call in cases:
                    kinds.setdefault(name, []).append(latency(call, REQUESTS))
        finally:
            authed.close()
            anonymous.close()
            server.stop()
            ledger.dispose()
    base = median([m for m, _ in kinds[cases[0][0]]])
    rows = []
    for name, _ in cases:
        p50 = median([m for m, _ in kinds[name]])
        p99 = median([p for _, p in kinds[name]])
        rows.append((name, f"{p50 * 1000:.2f}", f"{p99 * 1000:.2f}", f"{p50 / base:.1f}x"))
    dialect = "postgresql" if url.startswith("postgres") else "sqlite"
    print_table(f"broker auth, {dialect} ledger, {REQUESTS} calls a round, median of {RUNS} "
                "rounds", ("call", "p50 ms", "p99 ms", "vs baseline"), rows)


if __name__ == "__main__":
    main()
