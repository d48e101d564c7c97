"""Per-pool leases on both ledgers: one holder at a time, taken over when a holder dies."""

from __future__ import annotations

import threading
from datetime import timedelta

from automation.clock import ManualClock
from automation.ledger import open_ledger
from automation.reconciler.lease import DEFAULT_TTL, Leases


def test_one_holder_then_release(ledger_url: str) -> None:
    ledger, clock = open_ledger(ledger_url), ManualClock()
    a, b = Leases(ledger, clock, "a"), Leases(ledger, clock, "b")
    assert a.acquire("np-1") and a.acquire("np-1")  # renewing is fine
    assert not b.acquire("np-1")
    assert b.acquire("np-2")  # other pools are independent
    a.release("np-1")
    assert b.acquire("np-1")
    ledger.dispose()


def test_expired_lease_is_taken_over(ledger_url: str) -> None:
    ledger, clock = open_ledger(ledger_url), ManualClock()
    dead, alive = Leases(ledger, clock, "dead"), Leases(ledger, clock, "alive")
    assert dead.acquire("np-1")
    clock.advance(DEFAULT_TTL - timedelta(seconds=1))
    assert not alive.acquire("np-1")
    clock.advance(timedelta(seconds=1))
    assert alive.acquire("np-1")
    assert not dead.acquire("np-1")  # the old holder lost it
    ledger.dispose()


def test_racing_replicas_exactly_one_wins(ledger_url: str) -> None:
    ledger, clock = open_ledger(ledger_url), ManualClock()
    for round_ in range(15):
        pool = f"np-{round_}"
        barrier = threading.Barrier(3)
        won: list[str] = []

        def take(name: str, pool: str = pool, barrier: threading.Barrier = barrier,
                 won: list[str] = won) -> None:
            leases = Leases(ledger, clock, name)
            barrier.wait()
            if leases.acquire(pool):
                won.append(name)

        threads = [threading.Thread(target=take, args=(f"r{i}",)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(won) == 1, (pool, won)
    ledger.dispose()


def test_a_lease_is_renewed_while_the_holder_works(ledger_url: str) -> None:
    """A stack operation longer than the TTL keeps its lease: without renewal another
    replica would take the pool over mid-operation."""
    ledger, clock = open_ledger(ledger_url), ManualClock()
    worker, other = Leases(ledger, clock, "worker"), Leases(ledger, clock, "other")
    assert worker.acquire("np-1")
    renewed = threading.Event()
    real_acquire = worker.acquire

    def counting(pool_id: str) -> bool:
        taken = real_acquire(pool_id)
        renewed.set()
        return taken

    worker.acquire = counting  # type: ignore[method-assign]
    with worker.renewed("np-1", every=0.01):
        clock.advance(DEFAULT_TTL - timedelta(seconds=1))
        renewed.clear()
        assert renewed.wait(5)  # a renewal after the clock moved: expiry pushed out
        clock.advance(timedelta(seconds=30))  # past the first expiry
        assert not other.acquire("np-1")
    clock.advance(DEFAULT_TTL)  # renewal stopped with the block: the lease lapses
    assert other.acquire("np-1")
    ledger.dispose()
