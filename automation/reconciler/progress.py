"""No silent stall: a pool whose passes keep acting and change nothing gets an error.

A pass that acts (applies the stack, removes Nodes, waits for a release) and leaves the
pool's state and every attempt's state as they were made no progress. One such pass is
normal (a VM takes a minute to terminate); many in a row mean the pool waits for something
that will not happen by itself: a VM the engine's state no longer holds, so no ``up``
deletes it, or a step skipped every pass. After ``STALL_PASSES`` such passes over at least
``STALL_AFTER``, and when nothing else is already reported, the pool's last error says what
it waits for and what a person can do (``NO_PROGRESS``). The first pass that changes
anything clears it. Pure: the reconciler stores the ``Progress`` on the pool's row.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

NO_PROGRESS = "NO_PROGRESS"
STALL_PASSES = 10
STALL_AFTER = timedelta(minutes=10)


@dataclass(frozen=True)
class Progress:
    mark: str | None  # ``mark`` of the pool as its acting passes last changed it
    since: datetime | None  # when it last changed
    passes: int = 0  # acting passes since, that changed nothing


def mark(state: str, network_removed: bool, attempts: Iterable[tuple[str, str]]) -> str:
    """What a pass that makes progress changes: the pool's state, its network, and each
    attempt (id, state)."""
    body = json.dumps([state, network_removed, sorted(attempts)])
    return hashlib.sha256(body.encode()).hexdigest()


def step(before: Progress, now_mark: str, now: datetime, *, acting: bool) -> Progress:
    """The progress after a pass. A pass with nothing to do is converged, not stalled."""
    if not acting and before.mark == now_mark and before.passes == 0 and before.since:
        return before  # converged and unchanged: nothing to write
    if not acting or before.mark != now_mark:
        return Progress(now_mark, now, 0)
    return Progress(now_mark, before.since or now, before.passes + 1)


def stalled(progress: Progress, now: datetime) -> bool:
    return (progress.passes >= STALL_PASSES and progress.since is not None
            and now - progress.since >= STALL_AFTER)


def describe(pool_id: str, progress: Progress, releasing: list[str], starting: list[str],
             repeated: list[str]) -> str:
    """The error of a stalled pool: how long, what it waits for, what to do.
    ``releasing``/``starting``: attempt ids; ``repeated``: the actions each pass repeats."""
    since = f"{progress.since:%Y-%m-%d %H:%M:%S}Z" if progress.since else "?"
    waits: list[str] = []
    if releasing:
        waits.append(f"the release of VM attempt(s) {', '.join(releasing)}, whose VM(s) the "
                     "provider still reports")
    if starting:
        waits.append(f"VM attempt(s) {', '.join(starting)} to start")
    counted = Counter(repeated)
    actions = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(counted.items()))
    message = (f"no progress in {progress.passes} passes since {since}: "
               + (f"waiting for {'; and for '.join(waits)}" if waits else "waiting")
               + (f"; each pass repeats {actions}" if actions else "") + ". ")
    if releasing:
        message += (
            "If the pool's stack state was lost or restored from an older backup, the engine "
            "no longer holds these VMs and no update deletes them: run `anycloud node-pool "
            f"adopt {pool_id}` (it finds them by their attempt tag, and the next pass "
            "releases them). Otherwise check the VMs in the provider's console.")
    else:
        message += ("Check the pool's events (`anycloud node-pool history "
                    f"{pool_id}`) and the reconciler's log for the step that repeats.")
    return message
