"""When a VM attempt's bootstrap token must be drawn again before its stack is applied.

An attempt's token is issued when its row is written, but its VM is bought by a later ``up``
(after a back-off, a failed run, a crash). Two rules keep a VM from booting with a token that
is stale or may have been seen:

- **A retry gets a new token.** When the pool's last run failed, every attempt still waiting
  for its VM gets the next token generation: whatever the failed run wrote (a Secret, a VM's
  user data) is replaced, never reused.
- **Never an expiring token.** A token that would expire before the VM could join (its join
  window, ``NODE_APPEAR_TIMEOUT``, from now) is drawn again with a fresh issue time.

Only ``pending`` attempts (no VM yet, by the ledger) are renewed: a new generation changes
the join token in the VM's user data, so renewing a VM that exists would replace it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from automation.reconciler.decide import NODE_APPEAR_TIMEOUT

RETRY = "a retry after a failed run gets a new token"
EXPIRING = "its token would expire before the VM could join"


def renewal_reason(*, state: str, token_removed: bool, issued_at: datetime | None,
                   ttl: timedelta, now: datetime, pool_failures: int) -> str | None:
    """Why this attempt needs a new token generation before the next ``up``, or None."""
    if state != "pending" or token_removed:
        return None
    if pool_failures > 0:
        return RETRY
    if issued_at is None or issued_at + ttl < now + NODE_APPEAR_TIMEOUT:
        return EXPIRING
    return None
