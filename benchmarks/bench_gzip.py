"""What gzip saves on the API's and the dashboard's biggest answers (issue 36, "Also"), with
1,000 pools in the ledger (SQLite), served by a real `anycloud serve` on loopback.

Per route: the bytes on the wire asked plainly (``Accept-Encoding: identity``, the baseline)
and asked with ``Accept-Encoding: gzip`` (what httpx, the SDK and browsers send), and the
median wall time of each over BENCH_RUNS requests. On loopback the time shows only what
compressing costs the server (there is no link to save time on); the bytes are what a
network would carry.

    .venv/bin/python benchmarks/bench_gzip.py [--smoke]     (BENCH_RUNS=9 by default)

--smoke: 3 pools, one request each.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli, bench_cli_list
from benchmarks._table import median, ms, print_table
from benchmarks.bench_api import _address, _launch, _stop, bootstrap_admin, local_env

MARKS: tuple[str, ...] = ()
RUNS = int(os.environ.get("BENCH_RUNS", "9"))
ROUTES = (
    ("GET /v1/node-pools?pageSize=1000 (node-pool list)", "/v1/node-pools",
     {"pageSize": 1000}),
    ("GET /ui/ (the dashboard's overview)", "/ui/", None),
    ("GET /ui/fragments/pools (its live table)", "/ui/fragments/pools", None),
    ("GET /v1/openapi.json", "/v1/openapi.json", None),
)


def main() -> None:
    global RUNS
    if _cli.parse(__doc__, MARKS).smoke:
        RUNS, bench_cli_list.POOLS = 1, 3
    import httpx2

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        bench_cli_list.seed(home)
        env = local_env(home)
        server = _launch(env)  # it starts while the token is made: it reads tokens per call
        rows = []
        try:
            token = bootstrap_admin(env)
            with httpx2.Client(timeout=60,
                               headers={"Authorization": f"Bearer {token}"}) as http:
                http.base_url = _address(server)  # the client is built while serve starts
                for label, path, params in ROUTES:
                    seen: dict[str, tuple[int, float]] = {}
                    for encoding in ("identity", "gzip"):
                        sizes, walls = [], []
                        for _ in range(RUNS):
                            start = time.perf_counter()
                            resp = http.get(path, params=params,
                                            headers={"Accept-Encoding": encoding})
                            resp.raise_for_status()
                            walls.append(time.perf_counter() - start)
                            sizes.append(resp.num_bytes_downloaded)
                            got = resp.headers.get("content-encoding", "identity")
                            if got != encoding:
                                raise SystemExit(f"{path}: asked {encoding}, got {got}")
                        seen[encoding] = (int(median(sizes)), median(walls))
                    (plain, plain_s), (packed, packed_s) = seen["identity"], seen["gzip"]
                    rows.append((label, f"{plain:,}", f"{packed:,}",
                                 f"{packed / plain:.2f}x", ms(plain_s), ms(packed_s),
                                 f"{packed_s / plain_s:.2f}x"))
        finally:
            _stop(server)
    print_table(f"gzip on the wire, {bench_cli_list.POOLS} pools, serve on loopback, "
                f"median of {RUNS} request(s) each",
                ["route", "plain bytes (baseline)", "gzip bytes", "vs plain", "plain ms",
                 "gzip ms", "vs plain"], rows)


if __name__ == "__main__":
    main()
