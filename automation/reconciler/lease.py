"""Per-pool leases: two control-plane replicas never act on the same pool at once.

A lease is a row (pool id, holder, expiry) written in a serialised transaction (row lock on
PostgreSQL, BEGIN IMMEDIATE on SQLite). A holder renews it while it works; a holder that
died stops renewing and its lease is taken over once it expires.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import sqlalchemy as sa

from automation.clock import Clock
from automation.ledger import schema
from automation.ledger.db import Ledger

DEFAULT_TTL = timedelta(minutes=2)
leases = schema.leases


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Leases:
    def __init__(self, ledger: Ledger, clock: Clock, holder: str | None = None,
                 ttl: timedelta = DEFAULT_TTL) -> None:
        self.ledger, self.clock, self.ttl = ledger, clock, ttl
        self.holder = holder or holder_id()

    def acquire(self, pool_id: str) -> bool:
        """Take or renew the pool's lease; False while another live holder has it."""
        now = self.clock.now()
        with self.ledger.write() as conn:
            row = conn.execute(
                sa.select(leases).where(leases.c.pool_id == pool_id).with_for_update()
            ).mappings().first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(leases.insert().values(
                            pool_id=pool_id, holder=self.holder, expires_at=now + self.ttl))
                except sa.exc.IntegrityError:  # another replica inserted it first
                    return False
                return True
            if row["holder"] != self.holder and row["expires_at"] > now:
                return False
            conn.execute(leases.update().where(leases.c.pool_id == pool_id)
                         .values(holder=self.holder, expires_at=now + self.ttl))
            return True

    @contextmanager
    def renewed(self, pool_id: str, every: float | None = None) -> Iterator[None]:
        """Keep renewing the pool's lease (every third of its TTL, in real seconds) while the
        block runs: a stack operation can outlast the TTL (an Azure VM takes ~150 s), and a
        lease that lapsed mid-operation would let another replica act on the pool."""
        interval = every if every is not None else self.ttl.total_seconds() / 3
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(interval):
                try:
                    self.acquire(pool_id)
                except Exception:  # the ledger blinked: the next tick retries
                    continue

        thread = threading.Thread(target=renew, name=f"lease-{pool_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def release(self, pool_id: str) -> None:
        with self.ledger.write() as conn:
            conn.execute(leases.delete().where(leases.c.pool_id == pool_id,
                                               leases.c.holder == self.holder))
