"""Seed a ledger with many pools using a given tree's own code: a "before" tree refuses a
ledger migrated by newer code, so each tree seeds its own (columns it lacks are left out)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_SEED = """
import json, sys
from datetime import UTC, datetime
from automation.ledger import open_ledger, schema

url, spec = sys.argv[1], json.loads(sys.argv[2])
keys, pools, vms = spec["offerings"], spec["pools"], spec["vmsPerPool"]
ledger = open_ledger(url)
now = datetime.now(UTC)

def fit(table, rows):
    cols = set(table.c.keys())
    return [{k: v for k, v in r.items() if k in cols} for r in rows]

with ledger.write() as conn:
    if "orgs" in schema.metadata.tables:  # an older commit's schema may have none
        conn.execute(schema.orgs.insert().values(id="org-bench", name="default",
                                                 created_at=now, updated_at=now))
    conn.execute(schema.clusters.insert(), fit(schema.clusters, [dict(org_id="org-bench",
        id="cl-bench", name="bench", state="ready", server_url="https://203.0.113.1:6443",
        ca_sha256="0" * 64, kubernetes_version="v1.36.2+k3s1", created_at=now,
        updated_at=now)]))
    conn.execute(schema.credentials.insert(), fit(schema.credentials, [dict(
        id=f"cr-{p}", name=p, org_id="org-bench", provider=p, reference={"profile": "x"},
        state="active", created_at=now) for p in sorted({k[0] for k in keys})]))
    chosen = [keys[i % len(keys)] for i in range(pools)]
    conn.execute(schema.node_pools.insert(), fit(schema.node_pools, [dict(
        id=f"np-{i:06d}", name=f"pool-{i:04d}", cluster_id="cl-bench", org_id="org-bench",
        credential_id=f"cr-{provider}", provider=provider, region=region, zone=None,
        vm_type=vm_type, min_vms=vms, max_vms=vms, state="ready", hosts_service=False,
        consecutive_failures=0, created_at=now, updated_at=now)
        for i, (provider, vm_type, region) in enumerate(chosen)]))
    conn.execute(schema.vm_attempts.insert(), fit(schema.vm_attempts, [dict(
        id=f"at-{i:06d}-{j}", pool_id=f"np-{i:06d}", state="running", node_state="Ready",
        token_generation=0, created_at=now, updated_at=now, vm_created_at=now)
        for i in range(pools) for j in range(vms)]))
ledger.dispose()
"""


def seed(tree: Path, home: Path, offerings: list[tuple[str, str, str]], pools: int,
         vms_per_pool: int) -> None:
    """A ledger at ``home/anycloud.db`` with ``pools`` ready pools of ``vms_per_pool`` running
    VMs each, over ``offerings`` in turn, written by ``tree``'s own schema."""
    home.mkdir(parents=True, exist_ok=True)
    spec = {"offerings": offerings, "pools": pools, "vmsPerPool": vms_per_pool}
    subprocess.run([sys.executable, "-c", _SEED, f"sqlite:///{home / 'anycloud.db'}",
                    json.dumps(spec)], cwd=tree, check=True, capture_output=True)
