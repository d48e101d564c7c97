"""The decision step, rule by rule (the node-pool seed's lifecycle sentences) and by property."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from automation.reconciler.decide import (
    ACCELERATOR_LABEL,
    ADDONS_FAILED,
    LIVE,
    POOL_FAILED,
    ApplyStack,
    AttemptView,
    DeleteNamespace,
    DestroyStack,
    DropToken,
    LabelNode,
    NewAttempt,
    NodeView,
    PoolView,
    Release,
    RemoveNode,
    backoff_after,
    decide,
)

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)
S = timedelta(seconds=1)


def pool(**kw: object) -> PoolView:
    base: dict[str, object] = dict(id="np-1", state="provisioning", vm_count=1, gpus=0)
    base.update(kw)
    return PoolView(**base)  # type: ignore[arg-type]


def attempt(i: int = 1, **kw: object) -> AttemptView:
    base: dict[str, object] = dict(id=f"at-{i}", state="running", node_name=f"anycloud-at-{i}",
                                   vm_created_at=T0)
    base.update(kw)
    return AttemptView(**base)  # type: ignore[arg-type]


def node(i: int = 1, *, ready: bool = True, gpus: int = 0, pool_id: str = "np-1",
         labels: frozenset[tuple[str, str]] = frozenset()) -> NodeView:
    return NodeView(name=f"anycloud-at-{i}", pool_label=pool_id, attempt_label=f"at-{i}",
                    ready=ready, gpus=gpus, labels=labels)


GPU_LABEL = frozenset({(ACCELERATOR_LABEL, "nvidia")})


# --- provision -------------------------------------------------------------------------------

def test_new_pool_gets_one_attempt_per_vm_and_an_apply() -> None:
    d = decide(pool(state="pending", vm_count=3), [], [], T0)
    assert d.of(NewAttempt) == [NewAttempt()] * 3 and d.of(ApplyStack) == [ApplyStack()]
    assert d.state == "provisioning"


def test_pending_attempt_left_by_a_crash_is_applied_again_not_duplicated() -> None:
    d = decide(pool(), [attempt(state="pending", vm_created_at=None)], [], T0)
    assert d.of(NewAttempt) == [] and d.of(ApplyStack) == [ApplyStack()]


# --- tokens ----------------------------------------------------------------------------------

def test_token_dropped_as_soon_as_the_node_exists_before_ready() -> None:
    d = decide(pool(), [attempt()], [node(ready=False)], T0 + M)
    assert d.of(DropToken) == [DropToken("at-1")]
    assert d.attempts["at-1"].token_present is False
    again = decide(pool(), [d.attempts["at-1"]], [node(ready=False)], T0 + 2 * M)
    assert again.of(DropToken) == []  # not recreated, not dropped twice


def test_no_token_dropped_while_no_node() -> None:
    assert decide(pool(), [attempt()], [], T0 + M).of(DropToken) == []


# --- ready -----------------------------------------------------------------------------------

def test_ready_when_every_vm_node_is_ready() -> None:
    d = decide(pool(vm_count=2), [attempt(1), attempt(2)], [node(1), node(2, ready=False)], T0)
    assert d.state == "provisioning" and (d.counts.ready, d.counts.starting) == (1, 1)
    d = decide(pool(vm_count=2), [attempt(1), attempt(2)], [node(1), node(2)], T0)
    assert d.state == "ready" and d.counts.ready == 2 and d.actions[:1] != [ApplyStack()]


# --- replace ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("elapsed", "replaced"), [(10 * M - S, False), (10 * M, True)])
def test_node_never_appears_boundary(elapsed: timedelta, replaced: bool) -> None:
    d = decide(pool(), [attempt()], [], T0 + elapsed)
    assert bool(d.of(Release)) is replaced
    if replaced:
        assert d.of(NewAttempt) == [NewAttempt(replaces="at-1")]
        assert d.counts.draining == 1 and d.replacements_in_row == 1


@pytest.mark.parametrize(("elapsed", "replaced"), [(15 * M - S, False), (15 * M, True)])
def test_not_ready_boundary(elapsed: timedelta, replaced: bool) -> None:
    first = decide(pool(), [attempt()], [node(ready=False)], T0)
    seen = first.attempts["at-1"]
    assert seen.not_ready_since == T0
    d = decide(pool(), [seen], [node(ready=False)], T0 + elapsed)
    assert bool(d.of(Release)) is replaced


def test_not_ready_timer_restarts_after_ready() -> None:
    a = attempt(not_ready_since=T0)
    back = decide(pool(), [a], [node(ready=True)], T0 + 14 * M).attempts["at-1"]
    assert back.not_ready_since is None
    d = decide(pool(), [back], [node(ready=False)], T0 + 20 * M)
    assert d.of(Release) == [] and d.attempts["at-1"].not_ready_since == T0 + 20 * M


def test_at_most_three_replacements_in_a_row_then_parked() -> None:
    d = decide(pool(replacements_in_row=3), [attempt()], [], T0 + 10 * M)
    assert d.state == "failed" and d.of(Release) == [] and d.of(NewAttempt) == []
    assert "3 replacements in a row" in (d.last_error or "")
    assert "join preconditions" in (d.last_error or "")
    assert decide(pool(replacements_in_row=2), [attempt()], [], T0 + 10 * M).of(Release)


def test_replacement_recovers_only_when_the_replacement_itself_is_ready() -> None:
    old_ok = decide(pool(replacements_in_row=2), [attempt(1)], [node(1)], T0)
    assert old_ok.replacements_in_row == 2  # an original VM being Ready does not reset it
    new = attempt(2, replaces="at-1")
    assert decide(pool(replacements_in_row=2), [new], [node(2, ready=False)], T0
                  ).replacements_in_row == 2
    assert decide(pool(replacements_in_row=2), [new], [node(2)], T0).replacements_in_row == 0


# --- back off and park -----------------------------------------------------------------------

def test_backoff_doubles_from_one_minute_to_thirty() -> None:
    assert [backoff_after(n) for n in range(1, 8)] == [
        M, 2 * M, 4 * M, 8 * M, 16 * M, 30 * M, 30 * M
    ]


@pytest.mark.parametrize(("now", "acts"), [(T0 + 2 * M - S, False), (T0 + 2 * M, True)])
def test_backoff_boundary(now: datetime, acts: bool) -> None:
    d = decide(pool(state="pending", backoff_until=T0 + 2 * M), [], [], now)
    assert bool(d.of(NewAttempt)) is acts and bool(d.of(ApplyStack)) is acts


def test_parked_pool_provisions_nothing() -> None:
    d = decide(pool(state="failed", vm_count=3), [attempt()], [], T0 + 60 * M)
    assert d.state == "failed"
    assert not d.of(NewAttempt) and not d.of(Release) and not d.of(ApplyStack)


# --- foreign and stale Nodes -----------------------------------------------------------------

def test_foreign_node_by_label_fails_the_pool_and_is_not_counted() -> None:
    intruder = NodeView(name="someone-else", pool_label="np-1", attempt_label=None, ready=True)
    d = decide(pool(), [attempt()], [node(), intruder], T0)
    assert d.state == "failed" and "someone-else" in (d.last_error or "")
    assert d.counts.ready == 1


def test_foreign_node_by_issued_name_fails_the_pool() -> None:
    impostor = NodeView(name="anycloud-at-1", pool_label=None, attempt_label=None, ready=True)
    d = decide(pool(), [attempt()], [impostor], T0)
    assert d.state == "failed" and d.counts.ready == 0


def test_other_pools_nodes_are_ignored() -> None:
    d = decide(pool(), [attempt()], [node(), node(9, pool_id="np-2")], T0)
    assert d.state == "ready"


def test_node_of_a_released_vm_is_removed() -> None:
    d = decide(pool(vm_count=1), [attempt(1, state="released"), attempt(2)], [node(1), node(2)],
               T0)
    assert d.of(RemoveNode) == [RemoveNode("anycloud-at-1", "its VM (at-1) was released")]
    assert d.state == "ready"


# --- GPUs ------------------------------------------------------------------------------------

def test_gpu_ready_needs_exact_allocatable_count() -> None:
    gp = pool(gpus=4)
    assert decide(gp, [attempt()], [node(gpus=4, labels=GPU_LABEL)], T0).state == "ready"


@pytest.mark.parametrize(("elapsed", "failed"), [(10 * M - S, False), (10 * M, True)])
def test_zero_devices_grace_from_vm_creation(elapsed: timedelta, failed: bool) -> None:
    d = decide(pool(gpus=4, addons_state="DaemonSet 0/1 ready"), [attempt()],
               [node(gpus=0, labels=GPU_LABEL)], T0 + elapsed)
    assert (d.state == "failed") is failed
    assert d.counts.starting == 1 and d.counts.ready == 0
    if failed:
        assert "anycloud-nvidia-device-plugin" in (d.last_error or "")
        assert "DaemonSet 0/1 ready" in (d.last_error or "")


def test_zero_devices_on_a_node_that_had_them_counts_from_that_pass() -> None:
    gp = pool(gpus=4)
    had = decide(gp, [attempt()], [node(gpus=4, labels=GPU_LABEL)], T0).attempts["at-1"]
    assert had.gpu_ready_seen
    lost = decide(gp, [had], [node(gpus=0, labels=GPU_LABEL)], T0 + 60 * M)
    assert lost.state == "provisioning"
    seen = lost.attempts["at-1"]
    assert seen.gpu_missing_since == T0 + 60 * M
    assert decide(gp, [seen], [node(gpus=0, labels=GPU_LABEL)], T0 + 70 * M - S).state != "failed"
    assert decide(gp, [seen], [node(gpus=0, labels=GPU_LABEL)], T0 + 70 * M).state == "failed"


def test_device_count_mismatch_fails_and_is_never_counted() -> None:
    d = decide(pool(gpus=8), [attempt()], [node(gpus=4, labels=GPU_LABEL)], T0)
    assert d.state == "failed" and "device-count mismatch" in (d.last_error or "")
    assert d.counts.ready == 0 and d.counts.starting == 0


def test_gpu_node_without_accelerator_label_gets_it() -> None:
    d = decide(pool(gpus=1), [attempt()], [node(gpus=1)], T0)
    assert d.of(LabelNode) == [LabelNode("anycloud-at-1", ACCELERATOR_LABEL, "nvidia")]
    assert decide(pool(gpus=0), [attempt()], [node()], T0).of(LabelNode) == []


FOREIGN = "RuntimeClass nvidia is not ours: kubectl delete runtimeclass nvidia"


def test_addon_failure_fails_the_pool_buys_nothing_and_never_touches_deletion() -> None:
    d = decide(pool(gpus=1, addons_diagnostic=FOREIGN), [], [], T0)
    assert d.state == "failed" and not d.of(NewAttempt)
    assert d.last_error == FOREIGN and d.error_code == ADDONS_FAILED
    gone = decide(pool(state="deleting", gpus=1, addons_diagnostic="x"), [attempt()], [], T0)
    assert gone.of(Release) == [Release("at-1", "node pool deleting")]


def test_addon_failure_never_blocks_replacing_existing_vms() -> None:
    """A VM whose Node stayed NotReady 15 minutes is replaced while the add-ons are broken;
    the pool's missing VMs are not bought meanwhile."""
    stuck = attempt(1, not_ready_since=T0 - 15 * M, gpu_ready_seen=True)
    d = decide(pool(gpus=1, vm_count=2, addons_diagnostic=FOREIGN,
                    state="failed", last_error_code=ADDONS_FAILED),
               [stuck], [node(1, ready=False, gpus=1, labels=GPU_LABEL)], T0)
    assert d.of(Release) == [Release("at-1", "its Node stayed NotReady for 15 minutes")]
    assert d.of(NewAttempt) == [NewAttempt(replaces="at-1")]  # not the second VM
    assert d.of(ApplyStack) and d.state == "failed" and d.error_code == ADDONS_FAILED


def test_an_addon_failure_clears_once_the_check_passes() -> None:
    failed = pool(gpus=1, state="failed", last_error_code=ADDONS_FAILED)
    d = decide(failed, [attempt(gpu_ready_seen=True)], [node(gpus=1, labels=GPU_LABEL)], T0)
    assert (d.state, d.last_error, d.error_code) == ("ready", None, None)


def test_a_pool_failed_for_another_reason_stays_parked() -> None:
    parked = pool(gpus=1, state="failed", last_error_code=POOL_FAILED)
    stuck = attempt(1, not_ready_since=T0 - 15 * M)
    d = decide(parked, [stuck], [node(1, ready=False, gpus=1, labels=GPU_LABEL)], T0)
    assert d.state == "failed" and not d.of(Release) and not d.of(NewAttempt)


# --- delete ----------------------------------------------------------------------------------

def test_delete_waits_while_referenced() -> None:
    d = decide(pool(state="deleting", referenced=True), [attempt()], [node()], T0)
    assert d.actions == [] and d.state == "deleting"


def test_delete_sequence() -> None:
    p = pool(state="deleting")
    d = decide(p, [attempt(1), attempt(2, state="releasing")], [node(1)], T0)
    assert d.actions == [DeleteNamespace(), DropToken("at-1"),
                         RemoveNode("anycloud-at-1", "node pool deleting"),
                         Release("at-1", "node pool deleting"), ApplyStack()]
    # Provider has not confirmed at-2: still deleting, network stays.
    d = decide(p, [attempt(1, state="released"), attempt(2, state="releasing")], [], T0)
    assert d.state == "deleting" and not d.of(DestroyStack)
    d = decide(p, [attempt(1, state="released"), attempt(2, state="released")], [], T0)
    assert d.of(DestroyStack) == [DestroyStack()] and d.state == "deleting"
    done = decide(pool(state="deleting", network_removed=True), [attempt(state="released")], [],
                  T0)
    assert done.state == "deleted"


@pytest.mark.parametrize("state", ["provisioning", "failed", "deleting"])
def test_a_token_goes_as_soon_as_its_node_exists_in_every_pool_state(state: str) -> None:
    d = decide(pool(state=state), [attempt(1)], [node(1, ready=False)], T0)
    assert d.of(DropToken) == [DropToken("at-1")]
    backing_off = decide(pool(backoff_until=T0 + M), [attempt(1)], [node(1)], T0)
    assert backing_off.of(DropToken) == [DropToken("at-1")]
    assert not backing_off.of(ApplyStack)  # the Secret is deleted on the cluster directly
    gone = decide(pool(state=state), [attempt(1, token_present=False)], [node(1)], T0)
    assert gone.of(DropToken) == []


# --- properties ------------------------------------------------------------------------------

STATES = ["pending", "creating", "running", "releasing", "released"]


@st.composite
def worlds(draw):  # type: ignore[no-untyped-def]
    n = draw(st.integers(0, 6))
    gpus = draw(st.sampled_from([0, 1, 4, 8]))
    attempts = []
    nodes = []
    for i in range(n):
        state = draw(st.sampled_from(STATES))
        created = T0 - draw(st.integers(0, 40)) * M if state != "pending" else None
        attempts.append(attempt(
            i, state=state, vm_created_at=created, token_present=draw(st.booleans()),
            replaces=draw(st.sampled_from([None, f"at-{i - 1}"])),
            not_ready_since=draw(st.sampled_from([None, T0 - 20 * M, T0 - M])),
            gpu_ready_seen=draw(st.booleans()),
        ))
        if draw(st.booleans()):
            nodes.append(node(i, ready=draw(st.booleans()), gpus=draw(st.sampled_from([0, gpus])),
                              labels=GPU_LABEL if draw(st.booleans()) else frozenset()))
    if draw(st.booleans()):
        nodes.append(NodeView(name=f"stranger-{n}", pool_label="np-1", attempt_label=None,
                              ready=True))
    p = pool(
        state=draw(st.sampled_from(["pending", "provisioning", "ready", "failed", "deleting"])),
        vm_count=draw(st.integers(1, 5)), gpus=gpus,
        replacements_in_row=draw(st.integers(0, 4)),
        backoff_until=draw(st.sampled_from([None, T0 - M, T0 + M])),
        referenced=draw(st.booleans()),
        network_removed=draw(st.booleans()),
    )
    return p, attempts, nodes


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_never_more_live_attempts_than_the_count(world) -> None:  # type: ignore[no-untyped-def]
    p, attempts, nodes = world
    d = decide(p, attempts, nodes, T0)
    live = {a.id for a in attempts if a.state in LIVE}
    released = {r.attempt_id for r in d.of(Release)}
    assert released <= live
    after = len(live - released) + len(d.of(NewAttempt))
    # Replacements swap one live attempt for another; new attempts only fill up to the count.
    if d.of(NewAttempt):
        assert after <= p.vm_count
    assert len([n for n in d.of(NewAttempt) if n.replaces is not None]) <= len(released)


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_never_a_token_for_an_attempt_whose_node_exists(world) -> None:  # type: ignore[no-untyped-def]
    p, attempts, nodes = world
    if p.state == "deleting":
        return
    d = decide(p, attempts, nodes, T0)
    dropped = {x.attempt_id for x in d.of(DropToken)}
    for a in attempts:
        has_node = any(n.name == a.node_name and n.attempt_label == a.id
                       and n.pool_label == p.id for n in nodes)
        if a.state in LIVE and has_node:
            assert not a.token_present or a.id in dropped
            assert not d.attempts.get(a.id, a).token_present


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_parked_pools_never_act(world) -> None:  # type: ignore[no-untyped-def]
    p, attempts, nodes = world
    if p.state != "failed":
        return
    d = decide(p, attempts, nodes, T0)
    assert not d.of(NewAttempt) and not d.of(Release) and not d.of(ApplyStack)
    assert not d.of(DestroyStack) and d.state == "failed"


@settings(max_examples=400, deadline=None)
@given(worlds())
def test_delete_never_proceeds_with_references(world) -> None:  # type: ignore[no-untyped-def]
    p, attempts, nodes = world
    if p.state != "deleting" or not p.referenced:
        return
    d = decide(p, attempts, nodes, T0)
    assert d.actions == [] and d.state == "deleting"


@settings(max_examples=300, deadline=None)
@given(worlds())
def test_decide_is_pure(world) -> None:  # type: ignore[no-untyped-def]
    p, attempts, nodes = world
    assert decide(p, attempts, nodes, T0) == decide(p, list(attempts), list(nodes), T0)


# --- ingress entry ---------------------------------------------------------------------------

ENTRY = "anycloud.sh/ingress-entry"


def svc_pool(**kw: object) -> PoolView:
    return pool(**{"vm_count": 3, "hosts_service": True, **kw})


def ready3() -> tuple[list[AttemptView], list[NodeView]]:
    return ([attempt(i, node_state="Ready") for i in (1, 2, 3)], [node(i) for i in (1, 2, 3)])


def test_entry_is_the_ready_vm_with_the_lowest_attempt_id() -> None:
    attempts, nodes = ready3()
    d = decide(svc_pool(), attempts, nodes, T0)
    assert d.ingress_entry == "at-1"
    assert d.of(LabelNode) == [LabelNode("anycloud-at-1", ENTRY, "np-1")]
    again = decide(svc_pool(ingress_entry="at-1"), attempts,
                   [node(1, labels=frozenset({(ENTRY, "np-1")})), node(2), node(3)], T0)
    assert again.ingress_entry == "at-1" and again.of(LabelNode) == []


def test_pools_without_a_service_elect_nothing() -> None:
    attempts, nodes = ready3()
    d = decide(pool(vm_count=3), attempts, nodes, T0)
    assert d.ingress_entry is None and d.of(LabelNode) == []


@pytest.mark.parametrize(("elapsed", "moved"), [(2 * M - S, False), (2 * M, True)])
def test_entry_moves_after_two_minutes_not_ready(elapsed: timedelta, moved: bool) -> None:
    attempts = [attempt(1, not_ready_since=T0, node_state="NotReady"),
                attempt(2, node_state="Ready"), attempt(3, node_state="Ready")]
    nodes = [node(1, ready=False, labels=frozenset({(ENTRY, "np-1")})), node(2), node(3)]
    d = decide(svc_pool(ingress_entry="at-1"), attempts, nodes, T0 + elapsed)
    assert d.ingress_entry == ("at-2" if moved else "at-1")
    if moved:
        assert d.of(LabelNode) == [LabelNode("anycloud-at-1", ENTRY, None),
                                   LabelNode("anycloud-at-2", ENTRY, "np-1")]


def test_entry_stays_without_a_ready_replacement() -> None:
    attempts = [attempt(1, not_ready_since=T0, node_state="NotReady"),
                attempt(2, not_ready_since=T0, node_state="NotReady")]
    nodes = [node(1, ready=False), node(2, ready=False)]
    d = decide(svc_pool(vm_count=2, ingress_entry="at-1"), attempts, nodes, T0 + 10 * M)
    assert d.ingress_entry == "at-1"


def test_a_replaced_entry_hands_over() -> None:
    attempts = [attempt(1, node_state="NotReady", not_ready_since=T0 - 20 * M),
                attempt(2, node_state="Ready"), attempt(3, node_state="Ready")]
    nodes = [node(1, ready=False), node(2), node(3)]
    d = decide(svc_pool(ingress_entry="at-1"), attempts, nodes, T0)
    assert Release("at-1", "its Node stayed NotReady for 15 minutes") in d.actions
    assert d.ingress_entry == "at-2"


def test_a_surplus_releases_the_newest_vm_without_a_node_first() -> None:
    attempts = [attempt(1), attempt(2), attempt(3)]
    d = decide(pool(vm_count=1), attempts, [node(1)], T0)
    assert [r.attempt_id for r in d.of(Release)] == ["at-3", "at-2"]
    d = decide(pool(vm_count=2), attempts, [node(3)], T0)
    assert [r.attempt_id for r in d.of(Release)] == ["at-2"]
