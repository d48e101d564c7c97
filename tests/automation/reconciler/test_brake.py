"""The mass-failure brake (issue 23): the pure brake, decide() with a held pool, and a
property over random failure patterns across the pools of a cluster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click
import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from automation.errors import InvalidInput
from automation.ledger import schema
from automation.reconciler import brake as b
from automation.reconciler.decide import (
    NODE_APPEAR_TIMEOUT,
    NOT_READY_TIMEOUT,
    AttemptView,
    NewAttempt,
    NodeView,
    PoolView,
    Release,
    decide,
    stack_digest,
)
from automation.reconciler.reconcile import Reconciler
from automation.services import pool_status
from automation.settings import BrakeLimits
from tests.automation.reconciler.conftest import Rig

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)
LIMITS = BrakeLimits()


def vms(pool: str, healthy: int, failing: int, since: datetime = T0) -> list[b.PoolHealth]:
    return [b.PoolHealth(pool, healthy + failing, failing, since if failing else None)]


# --- the pure brake ------------------------------------------------------------------------

def test_failing_is_notready_for_15_minutes_or_no_node_after_the_join_window() -> None:
    now = T0 + 20 * M
    assert b.failing_since("running", "NotReady", T0 + 5 * M, T0, now) == T0 + 5 * M
    # NotReady for less than 15 minutes (as every Node is right after joining): starting.
    assert b.failing_since("running", "NotReady", T0 + 6 * M, T0, now) is None
    assert b.failing_since("running", "NotReady", None, T0, now) is None
    assert b.failing_since("running", None, None, T0, now) == T0 + NODE_APPEAR_TIMEOUT
    # Inside the join window, Ready, waiting for GPUs, not yet confirmed, released: healthy.
    assert b.failing_since("running", None, None, now - 9 * M, now) is None
    assert b.failing_since("running", "Ready", None, T0, now) is None
    assert b.failing_since("running", "NoDevices", None, T0, now) is None
    assert b.failing_since("pending", None, None, None, now) is None
    assert b.failing_since("releasing", "NotReady", T0, T0, now) is None


def test_braked_above_the_fraction_with_at_least_three() -> None:
    # 5 of 10 failing (50 % > 40 %): braked; both pools with failing VMs are held.
    found = b.evaluate({"c1": vms("p1", 3, 3) + vms("p2", 2, 2, T0 - M)}, LIMITS)
    brake = found["c1"]
    assert (brake.failing, brake.total, brake.pools) == (5, 10, 2)
    assert brake.held_pools == {"p1", "p2"} and brake.since == T0 - M
    assert brake.evidence == ("5 of 10 VMs across 2 pools NotReady or never joined; since "
                              "2026-06-01T11:59:00Z")


def test_exactly_at_the_fraction_is_not_braked() -> None:
    assert b.evaluate({"c1": vms("p1", 6, 4)}, LIMITS) == {}  # 40 % exactly
    assert "c1" in b.evaluate({"c1": vms("p1", 5, 5)}, LIMITS)


def test_fewer_than_the_minimum_never_brakes() -> None:
    assert b.evaluate({"c1": vms("p1", 0, 2)}, LIMITS) == {}  # 100 % but only 2
    assert "c1" in b.evaluate({"c1": vms("p1", 0, 3)}, LIMITS)
    assert b.evaluate({"c1": vms("p1", 0, 3)}, BrakeLimits(min_failing=4)) == {}


def test_a_healthy_pool_of_a_braked_cluster_is_not_held() -> None:
    found = b.evaluate({"c1": vms("sick", 0, 4) + vms("fine", 2, 0)}, LIMITS)
    assert found["c1"].held("sick") and found["c1"].held("fine") is None


def test_clusters_are_independent() -> None:
    found = b.evaluate({"c1": vms("p1", 1, 4), "c2": vms("p2", 9, 1), "c3": []}, LIMITS)
    assert set(found) == {"c1"}


def test_the_cap() -> None:
    assert b.cap(10, LIMITS) == 4 and b.cap(3, LIMITS) == 2 and b.cap(100, LIMITS) == 40
    assert b.cap(0, LIMITS) == 0 and b.cap(2, LIMITS) == 2


def test_limits_from_the_environment() -> None:
    assert BrakeLimits.from_env({}) == BrakeLimits(0.40, 3)
    assert BrakeLimits.from_env({"ANYCLOUD_BRAKE_FRACTION": "0.25",
                                 "ANYCLOUD_BRAKE_MIN": "5"}) == BrakeLimits(0.25, 5)
    for env in ({"ANYCLOUD_BRAKE_FRACTION": "1"}, {"ANYCLOUD_BRAKE_FRACTION": "x"},
                {"ANYCLOUD_BRAKE_MIN": "0"}, {"ANYCLOUD_BRAKE_MIN": "2.5"}):
        with pytest.raises(InvalidInput):
            BrakeLimits.from_env(env)


# --- decide() with a held pool -------------------------------------------------------------

def _attempt(i: int, **kw: object) -> AttemptView:
    base: dict[str, object] = dict(id=f"at-{i}", state="running", node_name=f"anycloud-at-{i}",
                                   vm_created_at=T0, token_present=False)
    base.update(kw)
    return AttemptView(**base)  # type: ignore[arg-type]


def _node(i: int, ready: bool = True, pool_id: str = "np-1") -> NodeView:
    return NodeView(name=f"anycloud-at-{i}", pool_label=pool_id, attempt_label=f"at-{i}",
                    ready=ready)


def test_a_held_pool_replaces_nothing() -> None:
    now = T0 + 30 * M
    notready = _attempt(1, not_ready_since=T0, node_state="NotReady")
    never = _attempt(2)  # no Node for 30 minutes
    view = PoolView(id="np-1", state="provisioning", vm_count=2, gpus=0)
    free = decide(view, [notready, never], [_node(1, ready=False)], now)
    assert len(free.of(NewAttempt)) == 2 and len(free.of(Release)) == 2
    held = decide(PoolView(id="np-1", state="provisioning", vm_count=2, gpus=0,
                           held="3 of 4 VMs …"), [notready, never], [_node(1, ready=False)],
                  now)
    assert held.of(NewAttempt) == [] and held.of(Release) == []
    assert held.replacements_in_row == 0 and held.state == "provisioning"
    assert held.counts.starting == 2


def test_a_held_pool_buys_nothing_but_still_scales_down_and_deletes() -> None:
    now = T0 + 30 * M
    up = decide(PoolView(id="np-1", state="ready", vm_count=3, gpus=0, held="…"),
                [_attempt(1)], [_node(1)], now)
    assert up.of(NewAttempt) == []
    down = decide(PoolView(id="np-1", state="ready", vm_count=1, gpus=0, held="…"),
                  [_attempt(1), _attempt(2, not_ready_since=T0, node_state="NotReady")],
                  [_node(1), _node(2, ready=False)], now)
    assert [r.attempt_id for r in down.of(Release)] == ["at-2"]
    assert down.of(NewAttempt) == []
    gone = decide(PoolView(id="np-1", state="deleting", vm_count=1, gpus=0, held="…"),
                  [_attempt(1)], [_node(1, ready=False)], now)
    assert [r.attempt_id for r in gone.of(Release)] == ["at-1"]


# --- the property --------------------------------------------------------------------------

# A VM's pattern: healthy (Ready), starting (no Node, inside its window), NotReady for a
# while (short of or past the 15 minutes), or never joined (past its 10 minutes).
PATTERNS = ("ready", "starting", "notready-new", "notready-old", "never-joined")


def _world(pools: list[list[str]], now: datetime) -> list[tuple[PoolView, list[AttemptView],
                                                                list[NodeView]]]:
    out = []
    for p, patterns in enumerate(pools):
        pool_id = f"np-{p}"
        attempts, nodes = [], []
        for i, pattern in enumerate(patterns):
            aid = f"at-{p}-{i}"
            created = now - (2 * M if pattern == "starting" else 30 * M)
            since = {"notready-new": now - M, "notready-old": now - NOT_READY_TIMEOUT}.get(
                pattern)
            state = {"ready": "Ready", "notready-new": "NotReady",
                     "notready-old": "NotReady"}.get(pattern)
            attempts.append(AttemptView(id=aid, state="running", node_name=f"n-{aid}",
                                        vm_created_at=created, token_present=False,
                                        not_ready_since=since, node_state=state))
            if state is not None:
                nodes.append(NodeView(name=f"n-{aid}", pool_label=pool_id, attempt_label=aid,
                                      ready=state == "Ready"))
        view = PoolView(id=pool_id, state="provisioning", vm_count=len(patterns), gpus=0,
                        applied_digest=stack_digest(False, attempts))
        out.append((view, attempts, nodes))
    return out


@settings(max_examples=300, deadline=None)
@given(pools=st.lists(st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=6),
                      min_size=1, max_size=6),
       fraction=st.sampled_from([0.0, 0.25, 0.4, 0.5, 0.9]),
       least=st.integers(min_value=1, max_value=5))
def test_property_never_holds_a_healthy_pool_and_never_exceeds_the_cap(
        pools: list[list[str]], fraction: float, least: int) -> None:
    now = T0 + 60 * M
    limits = BrakeLimits(fraction, least)
    world = _world(pools, now)
    health = [b.pool_health(view.id, [(a.state, a.node_state, a.not_ready_since,
                                        a.vm_created_at) for a in attempts], now)
              for view, attempts, _ in world]
    for tally, (_, attempts, _) in zip(health, world, strict=True):  # the same notion
        sinces = [b.failing_since(a.state, a.node_state, a.not_ready_since, a.vm_created_at,
                                  now) for a in attempts]
        assert tally.failing == len([x for x in sinces if x is not None])
        assert tally.since == min((x for x in sinces if x is not None), default=None)
    total = sum(t.total for t in health)
    brake = b.evaluate({"c1": health}, limits).get("c1")
    replacements = 0
    for (view, attempts, nodes), patterns in zip(world, pools, strict=True):
        held = brake.held(view.id) if brake else None
        own_healthy = all(x in ("ready", "starting", "notready-new") for x in patterns)
        if own_healthy:
            assert held is None, "held a pool whose own VMs are healthy"
        decision = decide(PoolView(**{**view.__dict__, "held": held}), attempts, nodes, now)
        replacements += len([x for x in decision.of(NewAttempt) if x.replaces])
        if held:
            assert decision.of(NewAttempt) == []
    assert replacements <= b.cap(total, limits)
    if brake is not None:
        assert replacements == 0


# --- the reconciler on the simulators ------------------------------------------------------

def _rows(rig: Rig, pool: str) -> list[dict]:  # type: ignore[type-arg]
    with rig.app.ledger.read() as conn:
        return [dict(r) for r in conn.execute(sa.select(schema.vm_attempts).where(
            schema.vm_attempts.c.pool_id == pool).order_by(schema.vm_attempts.c.id)).mappings()]


def _events(rig: Rig, kind: str) -> list[dict]:  # type: ignore[type-arg]
    with rig.app.ledger.read() as conn:
        return [dict(r) for r in conn.execute(sa.select(schema.events).where(
            schema.events.c.kind == kind).order_by(schema.events.c.id)).mappings()]


def _status(rig: Rig, pool: str):  # type: ignore[no-untyped-def]
    return pool_status.node_pool_status(rig.app.ledger, pool, now=rig.app.clock.now())


def test_many_nodes_notready_hold_the_pools_then_they_resume(rig: Rig) -> None:
    a, c, fine = rig.pool("a", count=3), rig.pool("c", count=2), rig.pool("fine", count=2)
    rig.passes(6, step=M)
    assert all(_status(rig, p).state == "ready" for p in (a, c, fine))
    sick = [r["node_name"] for r in _rows(rig, a)] + [_rows(rig, c)[0]["node_name"]]
    for name in sick:  # 4 of 7 VMs (57 %) NotReady at once: the cluster, not the VMs
        rig.world.cluster.set_node_ready(name, False)
    bought = len(rig.world.cloud.journal)
    rig.passes(14, step=M)
    assert _status(rig, a).held is None and not _events(rig, "pool_held")  # not yet 15 min
    rig.passes(26, step=M)  # 40 minutes: well past the 15-minute NotReady limit
    assert len(rig.world.cloud.journal) == bought  # nothing released, nothing bought
    assert [r["state"] for p in (a, c) for r in _rows(rig, p)] == ["running"] * 5
    assert len(_rows(rig, fine)) == 2
    for p in (a, c):
        held = _status(rig, p).held
        assert held is not None and held.reason == "cluster-wide failure"
        assert held.evidence.startswith("4 of 7 VMs across 3 pools NotReady or never joined")
    assert _status(rig, fine).held is None  # its own VMs are healthy
    assert sorted(e["subject_id"] for e in _events(rig, "pool_held")) == sorted([a, c])
    # One pool reconciled alone, by a reconciler that starts afresh: the brake still counts
    # the whole cluster, and the hold already recorded is not recorded again.
    fresh = Reconciler(rig.app, rig.reconciler.ports)
    outcome = fresh.reconcile_pool(c)  # alone: 1 of its 2 VMs failing, under the minimum
    assert "NewAttempt" not in outcome.actions and "Release" not in outcome.actions
    assert len(_events(rig, "pool_held")) == 2
    assert any("Held: cluster-wide failure — 4 of 7 VMs" in m for _, m in rig.log)

    for name in sick:  # the Nodes recover
        rig.world.cluster.set_node_ready(name, True)
    rig.passes(3, step=M)
    assert sorted(e["subject_id"] for e in _events(rig, "pool_resumed")) == sorted([a, c])
    assert len(_events(rig, "pool_held")) == 2  # recorded once, not every pass
    assert all(_status(rig, p).held is None and _status(rig, p).state == "ready"
               for p in (a, c, fine))
    assert [r["state"] for p in (a, c) for r in _rows(rig, p)] == ["running"] * 5


def test_replacement_resumes_when_the_failures_fall_under_the_threshold(rig: Rig) -> None:
    a, b_ = rig.pool("a", count=3), rig.pool("b", count=3)
    rig.passes(6, step=M)
    names = [r["node_name"] for r in _rows(rig, a)]
    for name in names:  # 3 of 6 (50 %): braked
        rig.world.cluster.set_node_ready(name, False)
    rig.passes(20, step=M)
    assert [r["state"] for r in _rows(rig, a)] == ["running"] * 3
    for name in names[1:]:  # 1 of 6 left NotReady: under the threshold, replaced as usual
        rig.world.cluster.set_node_ready(name, True)
    rig.passes(2, step=M)
    rows = _rows(rig, a)
    assert rows[0]["state"] in ("releasing", "released")
    assert [r["replaces_attempt_id"] for r in rows[3:]] == [rows[0]["id"]]
    assert _status(rig, a).held is None and _status(rig, b_).held is None


def test_status_text_and_json_show_the_hold(rig: Rig) -> None:
    from automation.cli.node_pool import _show

    a = rig.pool("a", count=3)
    rig.passes(6, step=M)
    for r in _rows(rig, a):
        rig.world.cluster.set_node_ready(r["node_name"], False)
    rig.passes(17, step=M)
    s = _status(rig, a)
    body = s.model_dump(mode="json", by_alias=True)
    assert body["held"]["reason"] == "cluster-wide failure"
    assert body["held"]["evidence"].startswith("3 of 3 VMs across 1 pool NotReady")
    assert body["held"]["since"]
    (listed,) = pool_status.list_node_pools(rig.app.ledger, now=rig.app.clock.now())
    assert listed.held == s.held  # `node-pool list --json` carries the same hold
    out = CliRunner().invoke(click.command()(lambda: _show(s)))
    assert "Held: cluster-wide failure — 3 of 3 VMs across 1 pool NotReady" in out.output
    # A pool not held shows null and no Held line.
    for r in _rows(rig, a):
        rig.world.cluster.set_node_ready(r["node_name"], True)
    rig.passes(1)
    s = _status(rig, a)
    assert s.model_dump(mode="json", by_alias=True)["held"] is None
    assert "Held" not in CliRunner().invoke(click.command()(lambda: _show(s))).output
