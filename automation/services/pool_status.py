"""The read side of node pools: ``list`` and ``status``.

Plain SQL through ``Ledger.query`` (no SQLAlchemy import) because these are the commands
people and scripts run most; 1,000 pools must list in well under 300 ms. Each pool's cost is
its billed VMs x the list price, read one offering row per distinct (cloud, type, region)
from the catalog file (``services.cost.lookup_prices``), never by loading the catalog.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from automation.errors import InvalidInput, NotFound
from automation.ids import looks_like_id
from automation.ledger.db import Ledger
from automation.models import (
    Cost,
    DriftChange,
    DriftReport,
    NodePoolStatus,
    PoolHold,
    VmCounts,
    drift_source,
)
from automation.recorded_engines import RecordedEngine
from automation.redact import HIDDEN, cluster_values, known_values, redact
from automation.services.cost import PriceKey, lookup_prices, rate
from automation.settings import BrakeLimits

# Ready: running with a Ready Node (for GPU types: advertising the catalog's count). Starting:
# not yet running, or running without such a Node (a wrong GPU count is never counted).
# Draining: being released. Released attempts are history and not read at all.
_STATUS_SQL = """
SELECT p.id, p.cluster_id, p.name, p.provider, p.region, p.zone, p.vm_type, p.max_vms, p.state,
       p.last_error, p.last_error_code, p.hosts_service, p.created_at, p.updated_at,
       c.name AS cluster, cr.name AS credentials, c.server_url AS cluster_server,
       c.kubeconfig_path AS cluster_kubeconfig, cr.reference AS credential_reference,
       COALESCE(a.ready, 0) AS ready, COALESCE(a.starting, 0) AS starting,
       COALESCE(a.draining, 0) AS draining, COALESCE(a.billed, 0) AS billed,
       COALESCE(a.simulated, 0) AS simulated, COALESCE(a.standin, 0) AS standin,
       COALESCE(a.engine_run, 0) AS engine_run,
       e.public_ip AS ingress_entry_ip,
       dr.checked_at AS drift_checked_at, dr.engine AS drift_engine,
       dr.changes AS drift_changes, dr.error AS drift_error,
       dr.error_code AS drift_error_code, dr.seconds AS drift_seconds
FROM node_pools p
JOIN clusters c ON c.id = p.cluster_id
JOIN credentials cr ON cr.id = p.credential_id
LEFT JOIN (
    SELECT pool_id,
           SUM(CASE WHEN state = 'running' AND node_state = 'Ready' THEN 1 ELSE 0 END) AS ready,
           SUM(CASE WHEN state IN ('pending', 'creating')
                      OR (state = 'running'
                          AND COALESCE(node_state, '') NOT IN ('Ready', 'Mismatch'))
                    THEN 1 ELSE 0 END) AS starting,
           SUM(CASE WHEN state = 'releasing' THEN 1 ELSE 0 END) AS draining,
           -- billed: the provider confirmed the VM and it is not released yet (services.cost);
           -- the mock engine and the stand-in cloud bought nothing
           SUM(CASE WHEN vm_created_at IS NOT NULL
                     AND COALESCE(engine, '') NOT IN ('mock', 'standin')
                    THEN 1 ELSE 0 END) AS billed,
           SUM(CASE WHEN engine = 'mock' THEN 1 ELSE 0 END) AS simulated,
           SUM(CASE WHEN engine = 'standin' THEN 1 ELSE 0 END) AS standin,
           SUM(CASE WHEN engine = 'pulumi' THEN 1 ELSE 0 END) AS engine_run
    FROM vm_attempts
    WHERE state <> 'released' {attempts}
    GROUP BY pool_id
) a ON a.pool_id = p.id
LEFT JOIN vm_attempts e ON e.id = p.ingress_entry_attempt_id
LEFT JOIN pool_drift dr ON dr.pool_id = p.id
"""
_LIVE = "p.state <> 'deleted'"
# What the mass-failure brake counts: the live VMs of the pools not being deleted (the
# reconciler's snapshot reads the same), of the clusters shown. Every VM is counted, but
# only those without a Ready Node are read one by one (the others cannot be failing).
_BRAKE_FROM = """
FROM vm_attempts a JOIN node_pools p ON p.id = a.pool_id
WHERE a.state IN ('pending', 'creating', 'running')
  AND p.state IN ('pending', 'provisioning', 'ready', 'failed') {clusters}
"""
_BRAKE_TOTALS_SQL = "SELECT a.pool_id, p.cluster_id, COUNT(*) AS total" + _BRAKE_FROM + (
    "GROUP BY a.pool_id, p.cluster_id")
_BRAKE_ROWS_SQL = ("SELECT a.pool_id, a.state, a.node_state, a.not_ready_since, a.vm_created_at"
                   + _BRAKE_FROM + "AND (a.node_state IS NULL OR a.node_state = 'NotReady')")
# A pool's id, or the live pools of that name (on several clusters, several); the pool's
# history (services.pool_history) resolves its ref the same way.
POOL_REF_SQL = ("SELECT id FROM node_pools WHERE id = :ref UNION "
            "SELECT id FROM node_pools WHERE state <> 'deleted' AND name = :name")


def ref_params(ref: str) -> dict[str, str | None]:
    """The parameters of a look-up by id (``:ref``) or name (``:name``): an id-shaped ref
    matches ids only (NULL matches no name), as ``ledger.records.by_ref`` does."""
    return {"ref": ref, "name": None if looks_like_id(ref) else ref}


def _utc(value: Any) -> datetime:
    """SQLite gives text, PostgreSQL a naive datetime; both are UTC (see schema.UTCDateTime)."""
    stamp = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return stamp.replace(tzinfo=UTC)


def hidden_values(r: dict[str, Any]) -> dict[str, str]:
    """What this pool's status must not show, each with the label shown instead: its
    cluster's API server and kubeconfig path, and its credential's reference values."""
    return {**dict.fromkeys(known_values(r["credential_reference"]), HIDDEN),
            **cluster_values(r["cluster_server"], r["cluster_kubeconfig"])}


def _maybe_utc(value: Any) -> datetime | None:
    return None if value is None else _utc(value)


def _holds(ledger: Ledger, cluster_ids: set[str] | None,
           now: datetime | None) -> dict[str, PoolHold]:
    """Pool id → its hold, by the reconciler's pure brake over the same ledger rows (``now``:
    the wall clock unless given; the simulators pass theirs)."""
    now = now or datetime.now(UTC)
    params: dict[str, Any] = {}
    clusters = ""
    if cluster_ids is not None:
        if not cluster_ids:
            return {}
        params = {f"c{i}": c for i, c in enumerate(sorted(cluster_ids))}
        clusters = f"AND p.cluster_id IN ({', '.join(f':{k}' for k in params)})"
    by_pool: dict[str, list[brake.VmFacts]] = {}
    for r in ledger.query(_BRAKE_ROWS_SQL.format(clusters=clusters), params):
        by_pool.setdefault(r["pool_id"], []).append((
            r["state"], r["node_state"], _maybe_utc(r["not_ready_since"]),
            _maybe_utc(r["vm_created_at"])))
    if not by_pool:
        return {}  # nothing failing: no cluster braked
    # Imported here: a healthy fleet's list and status do not pay for the reconciler's
    # modules (~15 ms of a command's start-up).
    from automation.reconciler import brake

    by_cluster: dict[str, list[brake.PoolHealth]] = {}
    for t in ledger.query(_BRAKE_TOTALS_SQL.format(clusters=clusters), params):
        sick = brake.pool_health(t["pool_id"], by_pool.get(t["pool_id"], ()), now)
        by_cluster.setdefault(t["cluster_id"], []).append(
            brake.PoolHealth(t["pool_id"], t["total"], sick.failing, sick.since))
    holds: dict[str, PoolHold] = {}
    for found in brake.evaluate(by_cluster, BrakeLimits.from_env()).values():
        hold = PoolHold(reason=brake.HELD_REASON, evidence=found.evidence, since=found.since)
        holds.update(dict.fromkeys(found.held_pools, hold))
    return holds


def _price_key(r: dict[str, Any]) -> PriceKey:
    return (r["provider"], r["vm_type"], r["region"])


class _Rates:
    """Each pool's rate from the prices looked up for the pools shown; pools of one type,
    region and VM count share one (frozen) Cost instead of computing it a thousand times."""

    def __init__(self, rows: list[dict[str, Any]], ledger: Ledger) -> None:
        # The ledger for live refreshes of the catalog: one cheap query when there are none.
        self._prices = lookup_prices((_price_key(r) for r in rows), ledger=ledger)
        self._rates: dict[tuple[PriceKey, int], Cost] = {}

    def of(self, r: dict[str, Any]) -> Cost:
        key = (_price_key(r), int(r["billed"]))
        if key not in self._rates:
            self._rates[key] = rate(self._prices[key[0]], key[1])
        return self._rates[key]


def _engine_of(r: dict[str, Any]) -> RecordedEngine | None:
    """Who runs the pool's live VMs, as their attempts recorded it (a label, not a choice)."""
    if r["simulated"]:
        return "mock"
    if r["standin"]:
        return "standin"
    return "pulumi" if r["engine_run"] else None


def _drift(r: dict[str, Any]) -> DriftReport | None:
    """The pool's last drift check, its error redacted like the last error."""
    if r["drift_checked_at"] is None:
        return None
    raw = r["drift_changes"]  # SQLite gives the JSON text, PostgreSQL the parsed value
    changes = json.loads(raw) if isinstance(raw, str) else (raw or [])
    return DriftReport(
        checked_at=_utc(r["drift_checked_at"]), engine=r["drift_engine"],
        source=drift_source(r["drift_engine"]),
        changes=[DriftChange.model_validate(c) for c in changes],
        error=redact(r["drift_error"], hidden_values(r)), error_code=r["drift_error_code"],
        seconds=r["drift_seconds"])


def _to_status(r: dict[str, Any], rates: _Rates,
               holds: dict[str, PoolHold] | None = None) -> NodePoolStatus:
    return NodePoolStatus(
        id=r["id"], name=r["name"], cluster=r["cluster"], credentials=r["credentials"],
        provider=r["provider"], region=r["region"], zone=r["zone"], vm_type=r["vm_type"],
        vms=r["max_vms"], state=r["state"],
        # The cluster's own values first, with their labels; the model redacts the rest.
        # (What to hide is worked out only when there is an error to redact: 1,000 pools.)
        last_error=redact(r["last_error"], hidden_values(r)) if r["last_error"] else
        r["last_error"],
        last_error_code=r["last_error_code"],
        counts=VmCounts(ready=r["ready"], starting=r["starting"], draining=r["draining"]),
        hosts_service=bool(r["hosts_service"]), ingress_entry_ip=r["ingress_entry_ip"],
        cost=rates.of(r),
        engine=_engine_of(r),
        drift=_drift(r),
        held=(holds or {}).get(r["id"]) if r["state"] not in ("deleting", "deleted") else None,
        created_at=_utc(r["created_at"]), updated_at=_utc(r["updated_at"]),
    )


def list_node_pools(ledger: Ledger, cluster: str | None = None,
                    now: datetime | None = None) -> list[NodePoolStatus]:
    where, params = _LIVE, {}
    if cluster is not None:
        found = ledger.query(
            "SELECT id FROM clusters WHERE state <> 'deleted' AND (id = :ref OR name = :name)",
            ref_params(cluster),
        )
        if not found:
            raise NotFound("cluster", cluster, field="--cluster")
        where, params = f"{_LIVE} AND p.cluster_id = :cluster", {"cluster": found[0]["id"]}
    rows = ledger.query(
        f"{_STATUS_SQL.format(attempts='')} WHERE {where} ORDER BY c.name, p.name", params)
    rates = _Rates(rows, ledger)
    holds = _holds(ledger, None if cluster is None else {params["cluster"]}, now)
    return [_to_status(r, rates, holds) for r in rows]


def node_pool_status(ledger: Ledger, ref: str, now: datetime | None = None) -> NodePoolStatus:
    """By id (any state, deleted included) or by name among live pools."""
    # The pools first, by index; then their attempts only (summing every pool's attempts to
    # read one pool's was most of the time of `node-pool status` with 1,000 pools).
    ids = {f"id{i}": r["id"] for i, r in enumerate(ledger.query(POOL_REF_SQL, ref_params(ref)))}
    if not ids:
        raise NotFound("node pool", ref, field="node_pool")
    listed = ", ".join(f":{k}" for k in ids)
    rows = ledger.query(f"{_STATUS_SQL.format(attempts=f'AND pool_id IN ({listed})')} "
                        f"WHERE p.id IN ({listed})", ids)
    if not rows:
        raise NotFound("node pool", ref, field="node_pool")
    if len(rows) > 1:
        raise InvalidInput(
            "node_pool", ref, "names node pools on several clusters: give the node pool id"
        )
    return _to_status(rows[0], _Rates(rows, ledger), _holds(ledger, {rows[0]["cluster_id"]}, now))
