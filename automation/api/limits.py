"""What one caller may send: requests per caller, and the size of a request's body.

Requests: a token bucket per caller, in this process. A caller with a valid token is counted
by that token (its id: two headers naming one token share a bucket); one without (no token,
a made-up, revoked or expired one, a dashboard log-in) by its client address (an IPv6 client
by its /64, which one host usually holds whole). Over the limit the answer is 429 with
``Retry-After`` (RFC 6585), before any route runs: one caller's loop cannot starve the
others. Replicas each keep their own buckets (a caller's limit is per replica).

``ANYCLOUD_API_RATE``: ``<per second>/<burst>``, default ``50/100``; ``off`` disables it.

Bodies: ``ANYCLOUD_API_MAX_BODY`` bytes at most (``KiB``/``MiB`` suffixes; default 16 MiB,
the largest legitimate body being an agent's post of output: 1 Mi characters, up to 12 bytes
each once JSON-escaped), and 64 KiB from a caller without a valid token (the dashboard's
log-in form is the only body such a caller may send). A larger body is refused with 413
before it is read: by its ``Content-Length``, or, sent chunked, once the bytes received pass
the limit."""

from __future__ import annotations

import ipaddress
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from starlette.types import Message, Receive

from automation.auth.roles import Principal
from automation.errors import InvalidInput

ENV = "ANYCLOUD_API_RATE"
DEFAULT = "50/100"
_MAX_CALLERS = 10_000  # buckets kept; the longest idle is dropped beyond it
MAX_BODY_ENV = "ANYCLOUD_API_MAX_BODY"
DEFAULT_MAX_BODY = 16 << 20
ANONYMOUS_MAX_BODY = 64 << 10
_SIZE = re.compile(r"(\d{1,12})\s*(KiB|MiB)?")
_UNITS = {None: 1, "KiB": 1 << 10, "MiB": 1 << 20}


@dataclass
class Limiter:
    rate: float  # tokens added per second
    burst: float  # bucket size
    clock: Callable[[], float] = time.monotonic
    # level, at; least recently used first, so the one to forget is found at once
    _buckets: OrderedDict[str, tuple[float, float]] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def take(self, caller: str) -> float:
        """0 when the request may go; else the seconds until it may."""
        now = self.clock()
        with self._lock:
            level, at = self._buckets.pop(caller, (self.burst, now))
            level = min(self.burst, level + (now - at) * self.rate)
            allowed = level >= 1
            self._buckets[caller] = (level - 1 if allowed else level, now)
            if len(self._buckets) > _MAX_CALLERS:
                self._buckets.popitem(last=False)  # a dropped bucket comes back full
            return 0.0 if allowed else (1 - level) / self.rate

    def __len__(self) -> int:
        return len(self._buckets)


def caller_of(who: Principal | None, client: str | None) -> str:
    """Whose bucket: the token's id for a caller it authenticated, else the address."""
    if who is not None:
        return "t:" + who.token_id
    return "a:" + _network_of(client or "?")


def _network_of(client: str) -> str:
    try:
        address = ipaddress.ip_address(client)
    except ValueError:
        return client  # not an IP (a test client, a Unix socket)
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


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


def max_body_from_env(environ: Mapping[str, str]) -> int:
    raw = environ.get(MAX_BODY_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_BODY
    rule = ("must be a size in bytes, KiB or MiB (e.g. 16MiB), at least 64KiB: a kubeconfig "
            "or an agent's output must fit")
    found = _SIZE.fullmatch(raw)
    if found is None:
        raise InvalidInput(MAX_BODY_ENV, raw, rule)
    size = int(found[1]) * _UNITS[found[2]]
    if size < ANONYMOUS_MAX_BODY:
        raise InvalidInput(MAX_BODY_ENV, raw, rule)
    return size


class BodyTooLarge(Exception):
    """The bytes received passed the body's limit (raised into the app reading it)."""


def counted(receive: Receive, limit: int, over: Callable[[], None]) -> Receive:
    """``receive`` that counts the body's bytes as they come: past ``limit`` it calls ``over``
    and raises BodyTooLarge instead of handing them on."""
    seen = 0

    async def receive_counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                over()
                raise BodyTooLarge
        return message

    return receive_counted


def size_text(size: int) -> str:
    """``size`` bytes as the operator would write it (16 MiB, 64 KiB, 1000 bytes)."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} bytes"
