"""How often a CLI process runs Python's cyclic garbage collector.

Most commands live for a fraction of a second: with the default thresholds the collector runs
dozens of times over the imports and a 1,000-pool listing and frees nothing worth it (~15 ms
of ~170 for ``node-pool list --json``; ``benchmarks/bench_start_up.py``). So the ``anycloud``
script starts with a high first threshold (cycles are still collected, only less often), and
a command that runs until stopped (serve, operator, broker, agent) puts the defaults back
first.

On the way out, the interpreter's last collection walks every object still alive (the
modules, SQLAlchemy's and pydantic's caches): ~65 ms of a 1,000-pool ``list --json``'s ~290.
``exiting`` freezes them first, so that walk is skipped and the OS reclaims the memory as it
would anyway. Nothing else changes: atexit handlers, open files and stdio are flushed and
closed as before.
"""

from __future__ import annotations

import gc

_DEFAULTS = gc.get_threshold()


def short_lived() -> None:
    gc.set_threshold(100_000, 50, 100)


def long_running() -> None:
    gc.set_threshold(*_DEFAULTS)


def exiting() -> None:
    gc.freeze()
