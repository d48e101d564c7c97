"""A request-level fuzz of every route the running app mounts (``api.state.route_access``, the
broker's and the dashboard's included): bodies at the size limit and one byte over, NUL
bytes in bodies, paths and queries, deeply nested JSON, huge and negative page sizes, forged
page tokens. No answer is a 5xx, a body one byte over is a 413, and the server's memory
stays bounded while every route is sent a body far over the limit, by a caller it knows and
by one it does not.

The limit is set low (64 KiB, the least ANYCLOUD_API_MAX_BODY takes) to keep this cheap."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from automation.api.app import create_api
from automation.api.limits import ANONYMOUS_MAX_BODY
from automation.app import App
from tests.automation.api.test_api_bodies import call

LIMIT = ANONYMOUS_MAX_BODY
PARAMS = ("{ref}", "{name:path}", "{agent_id}", "{session_id}", "{namespace}", "{name}",
          "{vm_type}")
NUL = "a\u0000b"
# Fields many request bodies have, each holding a NUL.
NUL_BODY = {"name": NUL, "pool": f"default/{NUL}", "org": NUL, "project": NUL,
            "kubeconfig": NUL, "command": [NUL], "provider": NUL, "cluster": NUL,
            "credentials": NUL, "region": NUL, "vmType": NUL, "agentId": NUL,
            "chunks": [{"stream": "stdout", "data": NUL}], "secret": {"apiKey": NUL}}
DEEP = "[" * 20_000 + "]" * 20_000
FORGED_TOKENS = ("eyJrIjpbMV0sImYiOiIwIn0", "\u0000", "x" * 4000)
HAS_BODY = ("POST", "PUT", "PATCH", "DELETE")


def padded(size: int) -> bytes:
    """A JSON object of exactly ``size`` bytes."""
    shell = json.dumps({"name": ""}).encode()
    return json.dumps({"name": "x" * (size - len(shell))}).encode()


def urls(path: str) -> tuple[str, str | None]:
    """The route's path with every parameter a missing name, and with a NUL in each (None:
    the route has no parameter)."""
    plain = nul = path
    for param in PARAMS:
        plain, nul = plain.replace(param, "nothing-here"), nul.replace(param, "a%00b")
    return plain, (None if nul == plain else nul)


def requests(method: str, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """(url, httpx keyword arguments) of every case a route is tried with."""
    json_type = {"Content-Type": "application/json"}
    url, nul_url = urls(path)
    yield url, {}
    if nul_url is not None:
        yield nul_url, {}
    if method in HAS_BODY:
        yield url, {"content": padded(LIMIT), "headers": json_type}
        yield url, {"json": NUL_BODY}
        yield url, {"content": b"\x00" * 64, "headers": json_type}
        yield url, {"content": DEEP.encode(), "headers": json_type}
        return
    for size in (10**30, -1):
        yield url, {"params": {"pageSize": size}}
    for token in FORGED_TOKENS:
        yield url, {"params": {"pageToken": token, "pageSize": 1}}
    yield url, {"params": {name: NUL for name in ("cluster", "project", "org", "state",
                                                   "wait", "since", "by", "diff")}}


@pytest.fixture
def small(app: App) -> FastAPI:
    return create_api(app, limiter=None, max_body=LIMIT)


def test_no_route_answers_5xx_to_odd_requests(
        small: FastAPI, world: App, callers: dict[str, dict[str, str]]) -> None:
    table = small.state.route_access
    wrong: list[str] = []
    with TestClient(small, raise_server_exceptions=False,
                    base_url="https://testserver") as http:
        for method, path in sorted(table):
            for url, kwargs in requests(method, path):
                resp = http.request(method, url, headers={
                    **callers["admin"], **kwargs.pop("headers", {})}, **kwargs)
                if resp.status_code >= 500:
                    wrong.append(f"{method} {url} {str(kwargs)[:80]}: {resp.status_code} "
                                 f"{resp.text[:300]}")
            over = http.request(method, urls(path)[0], content=padded(LIMIT + 1),
                                headers={**callers["admin"], "Content-Type": "application/json"})
            if over.status_code != 413:
                wrong.append(f"{method} {path}: {LIMIT + 1} bytes -> {over.status_code}")
    assert not wrong, "\n".join(wrong)


FAR_OVER = 8 << 20


def far_over(size: int = FAR_OVER) -> Iterator[bytes]:
    piece = b" " * LIMIT
    return (piece for _ in range(size // LIMIT))  # the same 64 KiB again and again


def test_memory_stays_bounded_under_bodies_far_over_the_limit(
        small: FastAPI, callers: dict[str, dict[str, str]]) -> None:
    routes = sorted((m, urls(p)[0]) for m, p in small.state.route_access if m in HAS_BODY)
    call(small, "POST", "/v1/orgs", callers["admin"], far_over(LIMIT))  # warm: app, caches
    tracemalloc.start()
    try:
        statuses, peaks = set(), []
        for method, url in routes:
            for caller in ("admin", "none", "unknown"):
                before = tracemalloc.get_traced_memory()[0]
                tracemalloc.reset_peak()
                statuses.add(call(small, method, url, callers[caller], far_over()).status)
                peaks.append(tracemalloc.get_traced_memory()[1] - before)
    finally:
        tracemalloc.stop()
    # A request holds at most a limit's worth of its body (and a chunk), never the 8 MiB it
    # was sent; what a route allocates for itself (an engine's first use) stays near 2 MB.
    assert max(peaks) < FAR_OVER // 2, f"peak {max(peaks):,} bytes"
    assert max(statuses) < 500, statuses
