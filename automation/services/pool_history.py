"""``node-pool history``: a pool's VM attempts (released ones included) and its last events,
newest first.

One query per table (the pool, its attempts, its events), each bounded by ``limit``. Texts
are redacted as status redacts ``lastError``: the pool's cluster and credential values first,
with their labels (``pool_status.hidden_values``), then the models' ``ShownText``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from automation.catalog.overlay import utc
from automation.errors import InvalidInput, NotFound
from automation.ledger.db import Ledger
from automation.models import PoolEvent, PoolHistory, PoolRef, VmAttemptView
from automation.redact import redact
from automation.services.pool_status import POOL_REF_SQL, hidden_values, ref_params

DEFAULT_LIMIT = 50
MAX_LIMIT = 500

# The pool (by id or live name) with what its texts must not show.
_POOL_SQL = f"""
SELECT p.id, p.name, c.server_url AS cluster_server, c.kubeconfig_path AS cluster_kubeconfig,
       cr.reference AS credential_reference
FROM node_pools p
JOIN clusters c ON c.id = p.cluster_id
JOIN credentials cr ON cr.id = p.credential_id
WHERE p.id IN ({POOL_REF_SQL})
"""
# replaced_by: the attempt that names this one as the one it replaces (same pool: indexed).
_ATTEMPTS_SQL = """
SELECT a.id, a.state, a.replaces_attempt_id, a.created_at, a.vm_created_at,
       a.token_removed_at, a.released_at, a.last_error,
       (SELECT MIN(r.id) FROM vm_attempts r
        WHERE r.pool_id = a.pool_id AND r.replaces_attempt_id = a.id) AS replaced_by
FROM vm_attempts a
WHERE a.pool_id = :pool
ORDER BY a.created_at DESC, a.id DESC
LIMIT :limit
"""
_EVENTS_SQL = """
SELECT at, kind, message FROM events
WHERE subject_id = :pool AND subject_kind = 'node_pool'
ORDER BY id DESC
LIMIT :limit
"""


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput("limit", limit, f"must be between 1 and {MAX_LIMIT}")
    return limit


def _pool_row(ledger: Ledger, ref: str) -> dict[str, Any]:
    """The pool ``GET /v1/node-pools/{ref}`` would show, refused the same way."""
    rows = ledger.query(_POOL_SQL, ref_params(ref))
    if not rows:
        raise NotFound("node pool", ref, field="node_pool")
    if len(rows) > 1:
        raise InvalidInput(
            "node_pool", ref, "names node pools on several clusters: give the node pool id"
        )
    return rows[0]


def _maybe_utc(value: Any) -> datetime | None:
    return None if value is None else utc(value)


def _attempt(r: dict[str, Any], hide: dict[str, str]) -> VmAttemptView:
    return VmAttemptView(
        id=r["id"], state=r["state"], replaces=r["replaces_attempt_id"],
        replaced_by=r["replaced_by"], created_at=utc(r["created_at"]),
        vm_created_at=_maybe_utc(r["vm_created_at"]),
        joined_at=_maybe_utc(r["token_removed_at"]),  # removed once the Node exists
        released_at=_maybe_utc(r["released_at"]), reason=redact(r["last_error"], hide))


def read_pool_history(ledger: Ledger, ref: str, limit: int = DEFAULT_LIMIT) -> PoolHistory:
    """The pool's newest ``limit`` attempts and its newest ``limit`` events."""
    params = {"limit": check_limit(limit)}
    pool = _pool_row(ledger, ref)
    hide = hidden_values(pool)
    attempts = ledger.query(_ATTEMPTS_SQL, {**params, "pool": pool["id"]})
    events = ledger.query(_EVENTS_SQL, {**params, "pool": pool["id"]})
    return PoolHistory(
        pool=PoolRef(id=pool["id"], name=pool["name"]),
        attempts=[_attempt(r, hide) for r in attempts],
        events=[PoolEvent(at=utc(e["at"]), kind=e["kind"], message=redact(e["message"], hide))
                for e in events])
