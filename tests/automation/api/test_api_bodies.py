"""The caller is known before its body is read: a gated route answers a caller without a valid
token 401 before reading a byte of it, and a body over the limit is refused 413 before it is
read (by Content-Length) or once the bytes streamed pass the limit (chunked). The public
routes stay public; the route's gate reuses the token the front door resolved.

The app is called through ASGI directly (``call``): FastAPI's TestClient reads a streamed
body whole before the app sees it, which would hide what the server reads."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from starlette.types import Message

from automation.api.app import create_api
from automation.api.limits import ANONYMOUS_MAX_BODY, max_body_from_env
from automation.app import App
from automation.errors import InvalidInput

LIMIT = 128 << 10
CHUNK = b" " * (16 << 10)  # JSON whitespace: a body of any size that parses as far as it goes


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    chunks_read: int  # how many chunks of the body the app asked for
    problem: dict[str, Any] = field(default_factory=dict)


def call(api: FastAPI, method: str, path: str, headers: dict[str, str],
         chunks: Iterator[bytes], length: int | None = None) -> Answer:
    """One request through the app's ASGI interface, its body streamed from ``chunks``
    (chunked, or with ``length`` as its Content-Length)."""
    read = 0
    sent: list[Message] = []

    async def receive() -> dict[str, Any]:
        nonlocal read
        chunk = next(chunks, None)
        if chunk is None:
            return {"type": "http.request", "body": b"", "more_body": False}
        read += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: Message) -> None:
        sent.append(message)

    framing = [(b"content-length", str(length).encode())] if length is not None else [
        (b"transfer-encoding", b"chunked")]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(),
             "root_path": "", "query_string": b"", "client": ("192.0.2.9", 5000),
             "server": ("testserver", 80), "state": {},
             "headers": [(b"content-type", b"application/json"), *framing,
                         *((k.lower().encode(), v.encode()) for k, v in headers.items())]}
    # A loop of its own, never the thread's: asyncio.run would leave the main thread with
    # no current loop, which later tests in this process may rely on.
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(api(scope, receive, send))
    finally:
        loop.close()
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    answer = Answer(start["status"], {k.decode(): v.decode() for k, v in start["headers"]},
                    body, read)
    if answer.headers.get("content-type") == "application/problem+json":
        answer.problem = json.loads(body)
    return answer


def stream(size: int) -> Iterator[bytes]:
    while size > 0:
        yield CHUNK[:size]
        size -= len(CHUNK)


@pytest.fixture
def small(app: App) -> FastAPI:
    return create_api(app, limiter=None, max_body=LIMIT)


def test_an_unknown_caller_gets_401_before_its_body_is_read(
        small: FastAPI, callers: dict[str, dict[str, str]]) -> None:
    for caller in ("none", "malformed", "unknown", "revoked", "expired", "not bearer"):
        for length in (None, 10 << 20):
            got = call(small, "POST", "/v1/clusters", callers[caller], stream(10 << 20),
                       length)
            assert got.status == 401, (caller, got.body)
            assert got.chunks_read == 0, caller
            assert got.problem["code"] == "UNAUTHENTICATED" and got.problem["rule"]
            assert got.headers["www-authenticate"] and got.headers["anycloud-version"]
            assert got.headers["connection"] == "close"  # the rest is not read


def test_malformed_json_from_an_unknown_caller_is_401_not_422(
        http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    for caller in ("none", "unknown"):
        resp = http.post("/v1/node-pools", content=b"{not json", headers={
            **callers[caller], "Content-Type": "application/json"})
        assert resp.status_code == 401, resp.text
    resp = http.post("/v1/node-pools", content=b"{not json", headers={
        **callers["member"], "Content-Type": "application/json"})
    assert resp.status_code == 422, resp.text  # known callers learn what is wrong with it


def test_a_body_over_its_announced_limit_is_refused_413_unread(
        small: FastAPI, callers: dict[str, dict[str, str]]) -> None:
    got = call(small, "POST", "/v1/clusters", callers["admin"], stream(LIMIT + 1), LIMIT + 1)
    assert got.status == 413 and got.chunks_read == 0
    assert got.headers["content-type"] == "application/problem+json"
    assert got.problem["code"] == "PAYLOAD_TOO_LARGE" and got.problem["field"] == "body"
    assert got.problem["rule"] == "must be at most 128 KiB (ANYCLOUD_API_MAX_BODY)"
    assert got.headers["connection"] == "close" and got.headers["anycloud-version"]


def test_a_chunked_body_is_cut_off_once_past_the_limit(
        small: FastAPI, callers: dict[str, dict[str, str]]) -> None:
    got = call(small, "POST", "/v1/clusters", callers["admin"], stream(64 << 20))
    assert got.status == 413, got.body
    assert got.chunks_read == LIMIT // len(CHUNK) + 1  # the chunk that passed it, no more
    assert got.problem["code"] == "PAYLOAD_TOO_LARGE"
    assert "128 KiB" in got.problem["rule"]


def test_a_body_at_the_limit_is_read(small: FastAPI,
                                     callers: dict[str, dict[str, str]]) -> None:
    for length in (None, LIMIT):
        got = call(small, "POST", "/v1/clusters", callers["admin"], stream(LIMIT), length)
        assert got.status == 422, got.body  # read whole: whitespace is no request
        assert got.chunks_read == LIMIT // len(CHUNK)


def test_public_routes_stay_public_under_the_anonymous_limit(
        small: FastAPI, callers: dict[str, dict[str, str]]) -> None:
    with TestClient(small, base_url="https://testserver") as http:
        assert http.get("/v1/healthz").status_code == 200
        assert http.get("/v1/healthz", headers=callers["unknown"]).status_code == 200
        # The log-in form answers (its CSRF check refuses this one), whatever the header.
        for headers in ({}, callers["unknown"]):
            tried = http.post("/ui/login", data={"token": "acy_x", "csrf": "x"},
                              headers=headers)
            assert tried.status_code == 403, tried.text
    form = b"token=" + b"x" * ANONYMOUS_MAX_BODY
    for length in (None, len(form)):
        got = call(small, "POST", "/ui/login", {}, iter([form]), length)
        assert got.status == 413 and "without a valid token" in got.problem["rule"]
        assert got.chunks_read == (0 if length else 1)


def test_the_gate_reuses_the_token_the_front_door_resolved(
        api: FastAPI, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    resolve = api.state.principal_of
    seen: list[str | None] = []

    def counted(authorization: str | None) -> Any:
        seen.append(authorization)
        return resolve(authorization)

    api.state.principal_of = counted
    assert http.get("/v1/me", headers=callers["viewer"]).status_code == 200
    assert http.get("/v1/orgs", headers=callers["admin"]).status_code == 200
    assert len(seen) == 2  # once a request


@pytest.mark.parametrize("raw, size", [("", 16 << 20), ("65536", 65536), ("1MiB", 1 << 20),
                                       ("512 KiB", 512 << 10)])
def test_the_body_limit_from_the_environment(raw: str, size: int) -> None:
    assert max_body_from_env({"ANYCLOUD_API_MAX_BODY": raw} if raw else {}) == size


@pytest.mark.parametrize("raw", ["big", "1GB", "-5", "1.5MiB", "1000", "63KiB"])
def test_a_bad_body_limit_is_refused_by_name(raw: str) -> None:
    with pytest.raises(InvalidInput, match=re.escape("ANYCLOUD_API_MAX_BODY")) as found:
        max_body_from_env({"ANYCLOUD_API_MAX_BODY": raw})
    assert "at least 64KiB" in (found.value.rule or "")
