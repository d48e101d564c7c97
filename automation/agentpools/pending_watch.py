"""Scale up on demand, not on the timer: a pass for a pool as soon as a session waits for it.

kopf's timer passes each pool every ``--interval`` (10 s): a burst of sessions would wait up
to that long before the first new pod is even asked for. The broker may run in another
process (the chart runs it in ``serve``, the operator in its own Deployment), so the shared
ledger is the signal: every ``PERIOD`` one grouped query reads, per pool, when its newest
pending session was asked for, and a pool with a newer one than last seen gets a pass now
(its AgentPool read afresh from the API server). A pass is the same locked, restart-safe
pass kopf runs, so a nudge and the timer never act on a pool at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

PERIOD = 0.25  # seconds between two looks: the bound on the added latency


class PendingWatch:
    def __init__(self, newest_pending: Callable[[], dict[str, datetime]],
                 read_pool: Callable[[str, str], dict[str, Any] | None],
                 reconcile: Callable[[dict[str, Any]], Any], namespaces: list[str],
                 log: Callable[[str], None] = lambda line: None,
                 period: float = PERIOD) -> None:
        self.newest_pending, self.read_pool, self.reconcile = newest_pending, read_pool, \
            reconcile
        self.namespaces = set(namespaces)
        self.log, self.period = log, period
        self._seen: dict[str, datetime] = {}

    def once(self) -> list[str]:
        """One look: the pools given a pass."""
        nudged = []
        for key, newest in sorted(self.newest_pending().items()):
            namespace, _, name = key.partition("/")
            if namespace not in self.namespaces or self._seen.get(key) == newest:
                continue
            self._seen[key] = newest
            pool = self.read_pool(namespace, name)
            if pool is None or pool["metadata"].get("deletionTimestamp"):
                continue  # the broker refuses its sessions (POOL_NOT_FOUND) or ends them
            self.reconcile(pool)
            nudged.append(key)
        return nudged

    def run(self, stopped: threading.Event) -> None:
        while not stopped.wait(self.period):
            try:
                self.once()
            except Exception as exc:  # a blip of the ledger or the API: the timer still runs
                self.log(f"pending-session watch: {exc}")
