"""The hosted API with 1,000 pools (issue 20, "Measure"), on loopback:

1. ``GET /v1/node-pools?pageSize=1000`` and one pool's ``GET /v1/node-pools/{id}``: p50/p99
   latency, beside the same service call in-process in the same run (the baseline; goal:
   status p50 within 2x of in-process, the list of 1,000 under 100 ms p50);
2. requests per second for that status with 1 and 4 concurrent clients, against one server
   process and against ``--api-workers 4`` (four processes on the one address);
3. the SDK's ``Client.node_pools.list()`` of every pool (pages of 1,000, models built) and
   with ``raw=True`` (the server's JSON, no models), beside the raw GET of the same page;
4. ``GET /v1/catalog`` (every type, ~1 MB of JSON) and the catalog listing in-process as the
   server keeps it (remembered until a refresh, ``Catalog.listing``), beside the listing
   computed afresh, as every request did before (the baseline).

The server: ``anycloud serve --no-control-loop --api-listen 127.0.0.1:0`` (one uvicorn worker
process; and with ``--api-workers 4`` for the throughput table) over a SQLite ledger seeded
with BENCH_POOLS pools of two VMs (default 1000).

    .venv/bin/python benchmarks/bench_api.py [--smoke]   (BENCH_RUNS=5, BENCH_REQUESTS=200)

--smoke: 3 pools, 5 requests of each call (no warm-up call), one run of each throughput
case, and ``--api-workers 2`` instead of 4 (the same path: N worker processes on the
parent's socket; two fewer cold imports of the app). The worker server is started beside
the first one instead of after the latency table (their figures mean nothing in a smoke
run). Cold CLI start-up, embedded and remote: bench_start_up.py.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, bench_cli_list
from benchmarks._table import latency, median, print_table

MARKS = ("slow",)
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
REQUESTS = int(os.environ.get("BENCH_REQUESTS", "200"))
ANYCLOUD = str(Path(sys.executable).with_name("anycloud"))
WORKERS = 4  # --api-workers of the throughput table
# How long a request may wait for a cold worker (an import, not what is measured).
WARM_TIMEOUT = 120.0


def _throughput(make: Callable[[], Callable[[], object]], clients: int, n: int) -> float:
    """Requests per second with ``clients`` threads making ``n`` requests in all."""
    each = max(1, n // clients)
    calls = [make() for _ in range(clients)]
    threads = [threading.Thread(target=lambda c=c: [c() for _ in range(each)]) for c in calls]
    began = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return each * clients / (time.perf_counter() - began)


def local_env(home: Path) -> dict[str, str]:
    """anycloud's environment over the ledger in ``home``: embedded mode (no database, API
    URL or token from the caller's shell; a CLI config of its own), and the per-token rate
    limit off (the benchmarks measure serving, not the limiter)."""
    env = {**os.environ, "ANYCLOUD_HOME": str(home), "ANYCLOUD_CLI_CONFIG":
           str(home / "cli.json"), "ANYCLOUD_API_RATE": "off"}
    for name in ("ANYCLOUD_DATABASE_URL", "ANYCLOUD_API_URL", "ANYCLOUD_TOKEN"):
        env.pop(name, None)
    return env


def bootstrap_admin(env: dict[str, str]) -> str:
    """An admin token made on the ledger of ``env`` (ANYCLOUD_HOME's), as ``token create
    --bootstrap`` makes it (the same service call, in this process: no cold CLI start)."""
    from automation.app import App
    from automation.ledger import open_ledger
    from automation.services.tokens import create_token

    home = Path(env["ANYCLOUD_HOME"])
    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    try:
        return create_token(App(ledger=ledger, home=home), "bench", "admin", by="bench",
                            bootstrap=True).token
    finally:
        ledger.dispose()


def _launch(env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    """``serve --no-control-loop --api-listen 127.0.0.1:0`` started (``_address`` waits)."""
    return subprocess.Popen([ANYCLOUD, "serve", "--no-control-loop", "--api-listen",
                             "127.0.0.1:0", *extra], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _address(server: subprocess.Popen[str]) -> str:
    """The base URL a ``_launch``ed server printed once its socket listens."""
    assert server.stderr is not None
    line = server.stderr.readline()
    if "listening on " not in line:
        server.kill()
        raise SystemExit(f"serve did not start: {line}{server.stderr.read()[-2000:]}")
    return line.split("listening on ")[1].split()[0].removesuffix("/v1")


def _stop(*servers: subprocess.Popen[str]) -> None:
    """SIGTERM to each server, then wait for them all (they shut down side by side)."""
    for server in servers:
        server.send_signal(signal.SIGTERM)
    for server in servers:
        server.wait(timeout=30)


def main() -> None:
    global RUNS, REQUESTS, WORKERS
    smoke = _cli.parse(__doc__, MARKS).smoke
    if smoke:
        RUNS, REQUESTS, WORKERS = 1, 5, 2
        bench_cli_list.POOLS = 3
    import httpx2
    from anycloud_sdk import Client

    from automation.catalog.overlay import LedgerOverlay
    from automation.catalog.store import ListFilter, load_catalog
    from automation.ledger import open_ledger
    from automation.services.ingress_status import pool_status_with_ingress
    from automation.services.pool_status import list_node_pools

    pools = bench_cli_list.POOLS
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        pool = bench_cli_list.seed(home)
        env = local_env(home)
        server = _launch(env)  # it starts while the token is made: it reads tokens per call
        workers: subprocess.Popen[str] | None = None
        if smoke:  # beside it, not after the latency table: smoke figures mean nothing
            workers = _launch(env, "--api-workers", str(WORKERS))
        try:
            token = bootstrap_admin(env)
            url = _address(server)
            headers = {"Authorization": f"Bearer {token}"}
            # One TLS context for every client (they speak plain HTTP): building one per
            # client loads the CA bundle each time, before the clock starts but not free.
            tls = ssl.create_default_context()
            client = httpx2.Client(base_url=url, headers=headers, timeout=WARM_TIMEOUT,
                                   verify=tls)
            ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
            sdk = Client(url, token)

            def api_get(path: str, params: dict[str, object] | None = None
                        ) -> Callable[[], object]:
                def call() -> object:
                    resp = client.get(path, params=params)
                    resp.raise_for_status()
                    return resp
                return call

            def status_client(base: str) -> Callable[[], Callable[[], object]]:
                def make() -> Callable[[], object]:
                    own = httpx2.Client(base_url=base, headers=headers, timeout=WARM_TIMEOUT,
                                        verify=tls)
                    return lambda: own.get(f"/v1/node-pools/{pool}").raise_for_status()
                return make

            rows = []
            cases = [
                (f"list {pools} in-process (baseline)", lambda: list_node_pools(ledger)),
                (f"GET /v1/node-pools pageSize={min(pools, 1000)}",
                 api_get("/v1/node-pools", {"pageSize": 1000})),
                (f"SDK node_pools.list(page_size=1000), {pools} pools",
                 lambda: list(sdk.node_pools.list(page_size=1000))),
                (f"SDK node_pools.list(page_size=1000, raw=True), {pools} pools",
                 lambda: list(sdk.node_pools.list(page_size=1000, raw=True))),
                ("status in-process (baseline)",
                 lambda: pool_status_with_ingress(ledger, pool)),
                ("GET /v1/node-pools/{id}", api_get(f"/v1/node-pools/{pool}")),
                # As a request reads the catalog: the shipped file with the ledger's refreshes.
                ("catalog listing computed afresh (baseline)", lambda: load_catalog(
                    ).with_overlay(LedgerOverlay(ledger))._listing(ListFilter())),
                ("catalog listing, remembered", lambda: load_catalog().with_overlay(
                    LedgerOverlay(ledger)).listing(ListFilter())),
                ("GET /v1/catalog (every type)", api_get("/v1/catalog")),
            ]
            figures = {}
            for name, call in cases:
                if not smoke:
                    call()  # warm: imports, first connection, SQLite page cache
                figures[name] = latency(call, max(5, REQUESTS // (4 if "list" in name
                                                                   else 1)))
            for i, n in ((0, 4), (4, 2), (6, 3)):
                base = figures[cases[i][0]][0]
                for name, _ in cases[i:i + n]:
                    p50, p99 = figures[name]
                    ratio = p50 / base
                    rows.append((name, f"{p50 * 1000:.1f}", f"{p99 * 1000:.1f}",
                                 f"{ratio:.1f}x" if ratio >= 0.1 else f"{ratio:.3f}x"))
            print_table(f"API latency, {pools} pools, loopback, one server process, rate limit "
                        "off (ms)",
                        ("call", "p50", "p99", "vs in-process"), rows)
            if workers is None:
                workers = _launch(env, "--api-workers", str(WORKERS))
            many = _address(workers)
            # The workers import the app after the socket is bound, each as it takes its
            # first request: on a loaded machine that outlasts httpx's 5 s default.
            httpx2.get(f"{many}/v1/healthz", timeout=WARM_TIMEOUT,
                       verify=tls).raise_for_status()
            if not smoke:
                _throughput(status_client(many), 4, 40)  # warm every worker
            rates = []
            for n in (1, 4):
                one = median([_throughput(status_client(url), n, REQUESTS)
                              for _ in range(RUNS)])
                four = median([_throughput(status_client(many), n, REQUESTS)
                               for _ in range(RUNS)])
                rates += [(f"{n} client(s)", "1 process (baseline)", f"{one:.0f}", "1.0x"),
                          (f"{n} client(s)", f"--api-workers {WORKERS}", f"{four:.0f}",
                           f"{four / one:.1f}x")]
            print_table(f"GET /v1/node-pools/{{id}}, requests per second, median of {RUNS} "
                        f"runs of {REQUESTS} requests ({os.cpu_count()} cores; the clients are "
                        "threads of this process)",
                        ("clients", "server", "req/s", "vs 1 process"), rates)
            client.close()
            sdk.close()
            ledger.dispose()
        finally:
            _stop(server, *([workers] if workers is not None else []))


if __name__ == "__main__":
    main()
