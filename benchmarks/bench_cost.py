"""`node-pool list --json` with 1,000 pools, before and after each pool shows its cost.

"Before" is the code of the commit before cost per pool (the parent of the commit that added
automation/services/cost.py), unpacked with ``git archive`` into a temporary directory; "after"
is this checkout. Both run as real subprocesses over the same ledger: 1,000 pools with two
billed VMs each, over DISTINCT (cloud, type, region) offerings (1 = every pool the same type,
1,000 = every pool a different one: one price lookup each, the worst case). Issue 10 asks that
list is no slower.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._table import median, ms, print_table, time_command

ROOT = Path(__file__).resolve().parent.parent
POOLS = 1000
VMS_PER_POOL = 2
RUNS = int(os.environ.get("BENCH_RUNS", "5"))
_CLI = "import sys; from automation.cli import cli; sys.exit(cli())"


def offerings(n: int) -> list[tuple[str, str, str]]:
    """``n`` priced (provider, type, region) offerings of the catalog, spread over clouds."""
    import sqlite3

    from automation.catalog import CATALOG_FILE, data_dir

    con = sqlite3.connect(f"file:{data_dir() / CATALOG_FILE}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT t.provider, t.name, r.region FROM offerings o JOIN vm_types t ON t.id = o.type_id "
        "JOIN regions r ON r.id = o.region_id WHERE o.price_usd_hour IS NOT NULL "
        "AND t.arch = 'x86_64' ORDER BY (o.type_id * 7919 + o.region_id) % 104729 LIMIT ?",
        (n,)).fetchall()
    con.close()
    return [(str(p), str(t), str(r)) for p, t, r in rows]


def seed(home: Path, distinct: int) -> None:
    from automation.ledger import open_ledger, schema

    keys = offerings(distinct)
    ledger = open_ledger(f"sqlite:///{home / 'anycloud.db'}")
    now = datetime.now(UTC)
    with ledger.write() as conn:
        conn.execute(schema.clusters.insert().values(
            id="cl-bench", name="bench", state="ready", server_url="https://203.0.113.1:6443",
            ca_sha256="0" * 64, kubernetes_version="v1.36.2+k3s1", created_at=now, updated_at=now,
        ))
        conn.execute(schema.credentials.insert(), [dict(
            id=f"cr-{p}", name=p, provider=p, reference={"profile": "x"}, state="active",
            created_at=now) for p in sorted({k[0] for k in keys})])
        pools = [(i, keys[i % len(keys)]) for i in range(POOLS)]
        conn.execute(schema.node_pools.insert(), [dict(
            id=f"np-{i:06d}", name=f"pool-{i:04d}", cluster_id="cl-bench",
            credential_id=f"cr-{provider}", provider=provider, region=region, zone=None,
            vm_type=vm_type, min_vms=VMS_PER_POOL, max_vms=VMS_PER_POOL, state="ready",
            hosts_service=False, consecutive_failures=0, created_at=now, updated_at=now,
        ) for i, (provider, vm_type, region) in pools])
        conn.execute(schema.vm_attempts.insert(), [dict(
            id=f"at-{i:06d}-{j}", pool_id=f"np-{i:06d}", state="running", node_state="Ready",
            token_generation=0, created_at=now, updated_at=now, vm_created_at=now,
        ) for i in range(POOLS) for j in range(VMS_PER_POOL)])
    ledger.dispose()


def unpack_before(into: Path) -> str:
    """The tree of the commit before cost per pool; returns its short id."""
    added = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%H", "--",
         "automation/services/cost.py"], check=True, capture_output=True, text=True,
    ).stdout.split()[-1]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", f"{added}^"], check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return added[:9] + "^"


def _env(home: Path, code: Path) -> dict[str, str]:
    env = {**os.environ, "ANYCLOUD_HOME": str(home), "PYTHONPATH": str(code)}
    env.pop("ANYCLOUD_DATABASE_URL", None)
    return env


def _check_code(env: dict[str, str], code: Path, has_cost: bool) -> None:
    """The subprocess runs the tree it is meant to (an editable install must not win)."""
    out = subprocess.run([sys.executable, "-c", _CLI, "node-pool", "list", "--json"], env=env,
                         check=True, capture_output=True, text=True).stdout
    assert ('"cost"' in out) == has_cost, f"{code}: wrong tree on the path"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # python -c puts the working directory first on sys.path
        before = Path(tmp) / "before"
        commit = unpack_before(before)
        results: list[tuple[str, list[float]]] = [
            ("python -c pass", time_command([sys.executable, "-c", "pass"], RUNS)),
        ]
        for distinct in (1, 50, POOLS):
            home = Path(tmp) / f"home-{distinct}"
            home.mkdir()
            seed(home, distinct)
            for label, code, has_cost in (("before", before, False), ("after", ROOT, True)):
                env = _env(home, code)
                _check_code(env, code, has_cost)
                args = [sys.executable, "-c", _CLI, "node-pool", "list", "--json"]
                results.append((f"{label}: {distinct} distinct offerings",
                                time_command(args, RUNS, env)))
    rows = []
    for i, (name, times) in enumerate(results):
        ratio = "-" if i == 0 or name.startswith("before") else (
            f"{median(times) / median(results[i - 1][1]):.2f}x")
        rows.append((name, ms(median(times)), ms(min(times)), ms(max(times)), ratio))
    print_table(f"node-pool list --json, {POOLS} pools x {VMS_PER_POOL} billed VMs, {RUNS} runs "
                f"each (ms); before = {commit}",
                ["case", "median", "min", "max", "after / before"], rows)


if __name__ == "__main__":
    main()
