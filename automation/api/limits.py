"""Requests per caller: a token bucket per bearer token (or, without one, per client address),
in this process. Over the limit the answer is 429 with ``Retry-After`` (RFC 6585), before any
route, token lookup or ledger read runs: one caller's loop cannot starve the others or the
ledger. Replicas each keep their own buckets (a caller's limit is per replica).

``ANYCLOUD_API_RATE``: ``<per second>/<burst>``, default ``50/100``; ``off`` disables it."""

from __future__ import annotations

import hashlib
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from automation.errors import InvalidInput

ENV = "ANYCLOUD_API_RATE"
DEFAULT = "50/100"
_MAX_CALLERS = 10_000  # buckets kept; the fullest (idlest) are dropped beyond it


@dataclass
class Limiter:
    rate: float  # tokens added per second
    burst: float  # bucket size
    clock: Callable[[], float] = time.monotonic
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # level, at
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, caller: str) -> float:
        """0 when the request may go; else the seconds until it may."""
        now = self.clock()
        with self._lock:
            level, at = self._buckets.get(caller, (self.burst, now))
            level = min(self.burst, level + (now - at) * self.rate)
            if level >= 1:
                self._buckets[caller] = (level - 1, now)
                self._forget_idle()
                return 0.0
            self._buckets[caller] = (level, now)
            return (1 - level) / self.rate

    def _forget_idle(self) -> None:
        if len(self._buckets) > _MAX_CALLERS:
            for caller, _ in sorted(self._buckets.items(), key=lambda kv: kv[1][1])[
                    :len(self._buckets) - _MAX_CALLERS]:
                del self._buckets[caller]


def caller_of(headers: Mapping[str, str], client: str | None) -> str:
    """Whose bucket: the bearer token's digest (never the token), else the address."""
    authorization = headers.get("authorization")
    if authorization:
        return "t:" + hashlib.sha256(authorization.encode()).hexdigest()[:32]
    return "a:" + (client or "?")


def from_env(environ: Mapping[str, str]) -> Limiter | None:
    raw = environ.get(ENV, DEFAULT).strip()
    if raw == "off":
        return None
    rule = "must be <requests per second>/<burst> (e.g. 50/100), or off"
    try:
        rate_text, burst_text = raw.split("/")
        rate, burst = float(rate_text), float(burst_text)
    except ValueError:
        raise InvalidInput(ENV, raw, rule) from None
    if not (rate > 0 and burst >= 1 and math.isfinite(rate) and math.isfinite(burst)):
        raise InvalidInput(ENV, raw, rule)
    return Limiter(rate, burst)
