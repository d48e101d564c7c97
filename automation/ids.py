"""Identifiers: a short kind prefix, then a time-ordered lowercase base-36 body.

Time ordering makes "lowest attempt id" mean "oldest attempt"; lowercase alphanumerics keep
ids valid as VM names, Kubernetes names and cloud tags on every provider.
"""

from __future__ import annotations

import secrets
import time

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz"


def _base36(n: int, width: int) -> str:
    out = []
    for _ in range(width):
        n, r = divmod(n, 36)
        out.append(_ALPHABET[r])
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    """``<prefix>-`` + 9 chars of milliseconds (good until year 5188) + 6 random chars."""
    millis = time.time_ns() // 1_000_000
    return f"{prefix}-{_base36(millis, 9)}{_base36(secrets.randbelow(36**6), 6)}"
