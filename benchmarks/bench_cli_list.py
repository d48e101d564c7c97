"""`node-pool list --json` and `status --json` with 1,000 pools in the ledger.

Prints the median wall time of several runs of each command as a real subprocess, beside
`python -c pass` and the bare CLI start-up measured in the same run. Goal: median <= 300 ms.

    .venv/bin/python benchmarks/bench_cli_list.py [--smoke]     (BENCH_RUNS=9 by default)

--smoke: 3 pools, one run of each command, no warm-up run.
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import median, ms, print_table, time_command

POOLS = 1000
VMS_PER_POOL = 2
RUNS = int(os.environ.get("BENCH_RUNS", "9"))
WARMUP = True


def seed(home: Path) -> str:
    """POOLS (1,000) pools with two VM attempts each, written in bulk straight into the ledger."""
    from automation.ledger import open_ledger, schema

    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    now = datetime.now(UTC)
    with ledger.write() as conn:
        conn.execute(schema.orgs.insert().values(id="org-bench", name="default",
                                                 created_at=now, updated_at=now))
        conn.execute(schema.clusters.insert().values(
            org_id="org-bench", id="cl-bench", name="bench", state="ready", server_url="https://203.0.113.1:6443",
            ca_sha256="0" * 64, kubernetes_version="v1.36.2+k3s1", created_at=now, updated_at=now,
        ))
        conn.execute(schema.credentials.insert().values(
            id="cr-bench", name="bench", org_id="org-bench", provider="aws",
            reference={"profile": "x"}, state="active", created_at=now,
        ))
        conn.execute(schema.node_pools.insert(), [dict(
            id=f"np-{i:06d}", name=f"pool-{i:04d}", cluster_id="cl-bench", org_id="org-bench",
            credential_id="cr-bench", provider="aws", region="us-east-1", zone="us-east-1a",
            vm_type="m7i.large", min_vms=VMS_PER_POOL, max_vms=VMS_PER_POOL, state="ready",
            hosts_service=False, consecutive_failures=0, created_at=now, updated_at=now,
        ) for i in range(POOLS)])
        conn.execute(schema.vm_attempts.insert(), [dict(
            id=f"at-{i:06d}-{j}", pool_id=f"np-{i:06d}", state="running", node_state="Ready",
            token_generation=0, created_at=now, updated_at=now,
        ) for i in range(POOLS) for j in range(VMS_PER_POOL)])
    ledger.dispose()
    return f"np-{POOLS // 2:06d}"


def main() -> None:
    global RUNS, POOLS, WARMUP
    if _cli.parse(__doc__).smoke:
        RUNS, POOLS, WARMUP = 1, 3, False
    anycloud = str(Path(sys.executable).with_name("anycloud"))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        pool = seed(home)
        env = {**os.environ, "ANYCLOUD_HOME": str(home)}
        env.pop("ANYCLOUD_DATABASE_URL", None)
        cases = [
            ("python -c pass (baseline)", [sys.executable, "-c", "pass"]),
            ("anycloud --help", [anycloud, "--help"]),
            (f"node-pool list --json ({POOLS} pools)", [anycloud, "node-pool", "list", "--json"]),
            ("node-pool status --json", [anycloud, "node-pool", "status", pool, "--json"]),
        ]
        results = [(name, time_command(args, RUNS, env, WARMUP)) for name, args in cases]
    base = median(results[0][1])
    rows = [(name, ms(median(t)), ms(min(t)), ms(max(t)), f"{median(t) / base:.1f}x",
             "yes" if i < 2 or median(t) <= 0.300 else "NO")
            for i, (name, t) in enumerate(results)]
    print_table(f"CLI wall time, {RUNS} runs each (ms)",
                ["command", "median", "min", "max", "vs baseline", "<= 300 ms"], rows)


if __name__ == "__main__":
    main()
