"""The mass-failure brake: stop replacing and buying VMs for a cluster when many of its VMs
fail at once (the cause is then the cluster or the network, not the VMs).

Pure, like ``decide``: no I/O, no clock. The reconciler computes it once per pass per
cluster from the pass's ledger snapshot, and ``node-pool status`` from the same ledger rows.

Definitions (the notions and timeouts are ``decide``'s, none new):

- A **live VM** is an attempt in pending, creating or running of a pool that is not being
  deleted. A cluster's VMs are the live VMs of all of its pools.
- A live VM is **failing** when ``decide`` would replace it: its Node, as the reconciler
  last recorded it, has been NotReady for ``NOT_READY_TIMEOUT`` (15 minutes, from
  ``not_ready_since``), or it has no Node ``NODE_APPEAR_TIMEOUT`` (10 minutes) after the
  provider confirmed the VM (never joined). It fails *since* its Node went NotReady, or
  since ``vm_created_at + NODE_APPEAR_TIMEOUT``. Every other live VM (starting, a Node
  NotReady for less than 15 minutes as every Node is right after joining, Ready, waiting
  for GPUs) is healthy. Failures count in the same window: the VMs failing at the time of
  the pass, whatever made each one fail.
- A cluster is **braked** when ``failing >= min_failing`` (default 3) **and**
  ``failing / total > fraction`` (default 0.40): exactly 40 % is not braked.
  ANYCLOUD_BRAKE_MIN and ANYCLOUD_BRAKE_FRACTION (``automation.settings.BrakeLimits``).
- In a braked cluster, a pool with at least one failing VM of its own is **held**
  (``Held: cluster-wide failure — <evidence>``): ``decide`` releases nothing for
  replacement and buys nothing for it (no replacements, no scale-up); scale-down, deletion,
  token drops, labels and ingress go on. A pool whose own VMs are all healthy is never held.
  The brake lifts by itself: the first pass that finds the cluster under the threshold (its
  Nodes recovered) decides normally.

**The cap.** ``cap(total)`` is the most failing VMs a cluster of ``total`` VMs can have
without being braked: ``max(f <= total : not braked(f, total))``, i.e.
``max(min_failing - 1, floor(fraction * total))`` capped at ``total``. ``decide`` replaces
only failing VMs, so while a cluster is not braked the replacements started in one pass
across its pools never exceed ``cap(total)``; once braked, they are zero (held pools replace
nothing, the others have nothing failing). A burst of failures can never buy more than the
cap at once.

The reconciler evaluates the brake at the start of its pass, over the Node states the
previous passes recorded (``not_ready_since``): exactly what ``decide`` replaces on. The
one gap: a VM crossing its 10 or 15 minutes between the pass's start and its pool's turn
in that same pass is replaced without being counted (it is counted from the next pass).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from automation.reconciler.decide import NODE_APPEAR_TIMEOUT, NOT_READY_TIMEOUT
from automation.settings import BrakeLimits

HELD_REASON = "cluster-wide failure"
_LIVE = frozenset(("pending", "creating", "running"))


# One VM as the brake reads it: (attempt state, node_state, not_ready_since, vm_created_at).
VmFacts = tuple[str, str | None, datetime | None, datetime | None]


@dataclass(frozen=True)
class PoolHealth:
    """One pool's tally: its live VMs, how many fail, the earliest failure."""

    pool_id: str
    total: int
    failing: int = 0
    since: datetime | None = None


def failing_since(state: str, node_state: str | None, not_ready_since: datetime | None,
                  vm_created_at: datetime | None, now: datetime) -> datetime | None:
    """When a VM started failing (NotReady for 15 minutes, or no Node after its join
    window), or None when it is healthy or not live."""
    if state not in _LIVE:
        return None
    if node_state == "NotReady":
        if not_ready_since is not None and now - not_ready_since >= NOT_READY_TIMEOUT:
            return not_ready_since
        return None
    if node_state is None and vm_created_at is not None:
        due = vm_created_at + NODE_APPEAR_TIMEOUT
        if now >= due:
            return due
    return None


def pool_health(pool_id: str, vms: Iterable[VmFacts], now: datetime) -> PoolHealth:
    """A pool's tally: ``failing_since`` over its VMs, inlined (cut-offs computed once: this
    runs over every VM of every pool each pass)."""
    ready_cut, join_cut = now - NOT_READY_TIMEOUT, now - NODE_APPEAR_TIMEOUT
    total = failing = 0
    since: datetime | None = None
    for state, node_state, not_ready_since, created in vms:
        if state not in _LIVE:
            continue
        total += 1
        if node_state == "Ready":
            continue
        if node_state == "NotReady":
            if not_ready_since is None or not_ready_since > ready_cut:
                continue
            at = not_ready_since
        elif node_state is None and created is not None and created <= join_cut:
            at = created + NODE_APPEAR_TIMEOUT
        else:
            continue
        failing += 1
        if since is None or at < since:
            since = at
    return PoolHealth(pool_id, total, failing, since)


def braked(failing: int, total: int, limits: BrakeLimits) -> bool:
    return failing >= limits.min_failing and failing > limits.fraction * total


def cap(total: int, limits: BrakeLimits) -> int:
    """The most failing VMs (so replacements in one pass) a cluster of ``total`` VMs may
    have without being braked."""
    return max((f for f in range(total + 1) if not braked(f, total, limits)), default=0)


def describe(failing: int, total: int, pools: int, since: datetime) -> str:
    return (f"{failing} of {total} VMs across {pools} pool{'s' if pools != 1 else ''} "
            f"NotReady or never joined; since {since.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}")


@dataclass(frozen=True)
class Brake:
    """A braked cluster: its tally, the evidence shown, and the pools held."""

    cluster_id: str
    failing: int
    total: int
    pools: int  # pools with live VMs in the cluster
    since: datetime  # the earliest failure counted
    held_pools: frozenset[str]  # the pools with failing VMs of their own
    evidence: str

    def held(self, pool_id: str) -> str | None:
        """The hold ``decide`` gets for a pool (``PoolView.held``), None when not held."""
        return self.evidence if pool_id in self.held_pools else None


def evaluate(clusters: Mapping[str, Iterable[PoolHealth]],
             limits: BrakeLimits) -> dict[str, Brake]:
    """The braked clusters (cluster id → Brake) among ``clusters`` (cluster id → the
    tallies of its pools); a cluster missing from the answer is not braked."""
    out: dict[str, Brake] = {}
    for cluster_id, tallies in clusters.items():
        total = failing = pools = 0
        sick: list[str] = []
        since: datetime | None = None
        for t in tallies:
            if not t.total:
                continue
            total += t.total
            pools += 1
            if t.failing and t.since is not None:
                failing += t.failing
                sick.append(t.pool_id)
                if since is None or t.since < since:
                    since = t.since
        if since is not None and braked(failing, total, limits):
            out[cluster_id] = Brake(cluster_id, failing, total, pools, since,
                                    frozenset(sick), describe(failing, total, pools, since))
    return out
