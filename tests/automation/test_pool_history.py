"""A pool's history (``services.pool_history``): its VM attempts, released ones included, and
its last events, newest first, bounded, and redacted as status redacts ``lastError``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from automation.app import App
from automation.errors import InvalidInput, NotFound
from automation.ledger import schema
from automation.models import NewNodePool
from automation.services import node_pools
from automation.services.pool_history import MAX_LIMIT, read_pool_history
from tests.automation.api.conftest import POOL, world  # noqa: F401

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
# What an engine or the Kubernetes client writes: a URL, and the API server's ip:port.
LEAKY = ("cannot reach https://k3s-abc.invalid:6443: "
         "dial tcp 203.0.113.10:6443: connection refused")


def _at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def seed_history(app: App) -> str:
    """The pool ``gpu`` whose first VM never became Ready and was replaced: ``at-1``
    released, ``at-2`` (its replacement) running and joined, ``at-3`` pending; four events."""
    pool = node_pools.create_node_pool_reported(app, NewNodePool.model_validate(POOL)).id
    attempts = [
        dict(id="at-1", state="released", created_at=_at(0), vm_created_at=_at(1),
             released_at=_at(30), last_error="Node NotReady for 10 minutes"),
        dict(id="at-2", state="running", replaces_attempt_id="at-1", created_at=_at(20),
             vm_created_at=_at(21), token_removed_at=_at(24)),
        dict(id="at-3", state="pending", created_at=_at(40)),
    ]
    events = [("attempt_created", "VM attempt at-1", 0),
              ("attempt_releasing", "VM attempt at-1: Node NotReady for 10 minutes", 20),
              ("attempt_released", "VM of at-1 confirmed released", 30),
              ("pool_failed", LEAKY, 41)]
    with app.ledger.write() as conn:
        for a in attempts:
            conn.execute(schema.vm_attempts.insert().values(
                pool_id=pool, token_generation=0, gpu_ready_seen=False, engine="mock",
                updated_at=a["created_at"], **a))
        for kind, message, minutes in events:
            conn.execute(schema.events.insert().values(
                at=_at(minutes), subject_kind="node_pool", subject_id=pool, kind=kind,
                message=message))
        # Another pool's event is not this pool's history.
        conn.execute(schema.events.insert().values(
            at=_at(50), subject_kind="node_pool", subject_id="np-other", kind="pool_ready",
            message="someone else"))
    return pool


def test_attempts_newest_first_released_included_with_their_links(world: App) -> None:  # noqa: F811
    pool = seed_history(world)
    history = read_pool_history(world.ledger, "gpu")
    assert (history.pool.id, history.pool.name) == (pool, "gpu")
    assert [(a.id, a.state.value) for a in history.attempts] == [
        ("at-3", "pending"), ("at-2", "running"), ("at-1", "released")]
    new, replacement, first = history.attempts
    assert (replacement.replaces, first.replaced_by, new.replaced_by) == ("at-1", "at-2", None)
    assert (first.released_at, first.reason) == (_at(30), "Node NotReady for 10 minutes")
    assert (replacement.joined_at, replacement.vm_created_at) == (_at(24), _at(21))
    assert first.joined_at is None and new.vm_created_at is None


def test_events_newest_first_only_the_pools(world: App) -> None:  # noqa: F811
    pool = seed_history(world)
    history = read_pool_history(world.ledger, pool)  # by id as well as by name
    assert [e.kind for e in history.events] == [
        "pool_failed", "attempt_released", "attempt_releasing", "attempt_created",
        "created"]  # the pool's own, written by create
    assert history.events[-2].at == _at(0)


def test_event_messages_are_redacted_like_last_error(world: App) -> None:  # noqa: F811
    seed_history(world)
    shown = read_pool_history(world.ledger, "gpu").events[0].message
    assert shown is not None
    assert "k3s-abc" not in shown and "203.0.113.10" not in shown and "6443" not in shown
    # The cluster's own API server is named; the rest says what failed.
    assert shown == "cannot reach <endpoint> dial tcp <api-server>: connection refused"


def test_the_limit_bounds_both_lists(world: App) -> None:  # noqa: F811
    seed_history(world)
    two = read_pool_history(world.ledger, "gpu", limit=2)
    assert [a.id for a in two.attempts] == ["at-3", "at-2"]
    assert [e.kind for e in two.events] == ["pool_failed", "attempt_released"]
    assert len(read_pool_history(world.ledger, "gpu", limit=MAX_LIMIT).attempts) == 3


@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1])
def test_a_limit_out_of_range_is_refused_naming_field_value_and_rule(
        world: App, limit: int) -> None:  # noqa: F811
    seed_history(world)
    with pytest.raises(InvalidInput) as refused:
        read_pool_history(world.ledger, "gpu", limit=limit)
    assert (refused.value.field, refused.value.value) == ("limit", limit)
    assert refused.value.rule == "must be between 1 and 500"


def test_an_unknown_pool_is_not_found_as_status_says(world: App) -> None:  # noqa: F811
    with pytest.raises(NotFound) as missing:
        read_pool_history(world.ledger, "nope")
    assert (missing.value.field, missing.value.value) == ("node_pool", "nope")


def test_the_json_is_camel_case(world: App) -> None:  # noqa: F811
    seed_history(world)
    out = read_pool_history(world.ledger, "gpu").model_dump(mode="json")
    assert out.keys() == {"pool", "attempts", "events"}
    assert out["attempts"][1].keys() == {"id", "state", "replaces", "replacedBy", "createdAt",
                                         "vmCreatedAt", "joinedAt", "releasedAt", "reason"}
    assert out["events"][0].keys() == {"at", "kind", "message"}
