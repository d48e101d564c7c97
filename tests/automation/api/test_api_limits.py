"""Requests per caller: over the bucket, a 429 problem with Retry-After before any route runs;
one caller's flood leaves another's requests alone; the bucket refills with time. A valid
token is counted by its id; every caller without one (made-up tokens, failed dashboard
log-ins) by its address; the buckets kept are bounded, and forgetting one costs no sort."""

from __future__ import annotations

import secrets

import pytest
from fastapi.testclient import TestClient

from automation.api import limits
from automation.api.app import create_api
from automation.api.limits import Limiter, caller_of, from_env
from automation.app import App
from automation.auth.roles import Principal
from automation.errors import InvalidInput
from tests.automation.api.conftest import bearer
from tests.automation.conftest import snapshot


class Clock:
    now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_is_answered_429_and_others_are_served(
        app: App, callers: dict[str, dict[str, str]]) -> None:
    clock = Clock()
    with TestClient(create_api(app, Limiter(rate=1, burst=3, clock=clock))) as http:
        viewer, member = callers["viewer"], callers["member"]
        assert [http.get("/v1/me", headers=viewer).status_code for _ in range(3)] == [200] * 3
        before = snapshot(app)
        over = http.post("/v1/node-pools", json={"name": "x"}, headers=viewer)
        assert over.status_code == 429, over.text
        assert over.headers["retry-after"] == "1" and over.headers["anycloud-version"]
        assert over.headers["content-type"] == "application/problem+json"
        assert over.json()["code"] == "RESOURCE_EXHAUSTED" and "ANYCLOUD_API_RATE" in \
            over.json()["rule"]
        assert snapshot(app) == before
        assert http.get("/v1/me", headers=member).status_code == 200  # another caller
        clock.now += 1.0
        assert http.get("/v1/me", headers=viewer).status_code == 200  # refilled
        assert http.get("/v1/me", headers=viewer).status_code == 429


@pytest.mark.parametrize("raw", ["fast", "0/10", "5/0.5", "inf/10", "5/10/2"])
def test_a_bad_rate_is_refused_by_name(raw: str) -> None:
    with pytest.raises(InvalidInput, match="ANYCLOUD_API_RATE"):
        from_env({"ANYCLOUD_API_RATE": raw})


def test_the_default_and_off() -> None:
    found = from_env({})
    assert found is not None and (found.rate, found.burst) == (50, 100)
    assert from_env({"ANYCLOUD_API_RATE": "off"}) is None


def made_up() -> dict[str, str]:
    return bearer("acy_" + secrets.token_urlsafe(32))


def test_made_up_tokens_share_their_address_bucket(
        app: App, callers: dict[str, dict[str, str]]) -> None:
    with TestClient(create_api(app, Limiter(rate=1, burst=3, clock=Clock()))) as http:
        answers = [http.get("/v1/me", headers=made_up()).status_code for _ in range(5)]
        assert answers == [401, 401, 401, 429, 429]
        for headers in (callers["malformed"], callers["revoked"], callers["expired"], {}):
            assert http.get("/v1/me", headers=headers).status_code == 429
        # A valid token from the same address has a bucket of its own.
        assert http.get("/v1/me", headers=callers["viewer"]).status_code == 200


def test_a_token_is_counted_once_however_its_header_is_spelled(
        app: App, callers: dict[str, dict[str, str]]) -> None:
    token = callers["viewer"]["Authorization"].removeprefix("Bearer ")
    spellings = [f"Bearer {token}", f"bearer {token}", f"BEARER   {token} "]
    with TestClient(create_api(app, Limiter(rate=1, burst=3, clock=Clock()))) as http:
        answers = [http.get("/v1/me", headers={"Authorization": s}).status_code
                   for s in spellings + spellings[:1]]
        assert answers == [200, 200, 200, 429]


def test_failed_dashboard_log_ins_are_limited_by_address(app: App) -> None:
    with TestClient(create_api(app, Limiter(rate=1, burst=3, clock=Clock())),
                    base_url="https://testserver") as http:
        # Each try with a header of its own: a new header must not be a new bucket.
        answers = [http.post("/ui/login", data={"token": "acy_nope", "csrf": "x"},
                             headers=made_up()).status_code for _ in range(3)]
        assert 429 not in answers
        refused = http.post("/ui/login", data={"token": "acy_nope", "csrf": "x"},
                            headers=made_up())
        assert refused.status_code == 429 and "address" in refused.json()["rule"]
        assert http.get("/ui/login").status_code == 429  # the address, whatever it asks


def test_callers_are_keyed_by_token_id_else_by_address() -> None:
    who = Principal(token_id="tok-1", name="ci", role="viewer")
    assert caller_of(who, "192.0.2.1") == caller_of(who, "198.51.100.7") == "t:tok-1"
    assert caller_of(None, "192.0.2.1") == "a:192.0.2.1"
    # An IPv6 host holds a whole /64: one bucket for all of it.
    assert caller_of(None, "2001:db8::1") == caller_of(None, "2001:db8::ffff:1") \
        == "a:2001:db8::/64"
    assert caller_of(None, "2001:db8:0:1::1") != caller_of(None, "2001:db8::1")


class CountedTime(float):
    """A clock reading that counts how often it is compared (sorting by time compares)."""

    compared = 0

    def __lt__(self, other: object) -> bool:
        CountedTime.compared += 1
        return float(self) < float(other)  # type: ignore[arg-type]


def test_the_limiter_forgets_the_longest_idle_past_its_cap_without_sorting(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "_MAX_CALLERS", 1000)
    now = [0.0]
    bucket = Limiter(rate=1e-6, burst=2, clock=lambda: CountedTime(now[0]))
    for n in range(1000):
        now[0] = n
        bucket.take(f"a:{n}")
    bucket.take("a:0")  # used again: now the most recent
    bucket.take("a:0")
    assert bucket.take("a:0") > 0  # its bucket is empty
    CountedTime.compared = 0
    for n in range(1000, 1500):
        now[0] = n
        assert bucket.take(f"a:{n}") == 0
    assert len(bucket) == 1000  # bounded
    assert CountedTime.compared == 0  # no sort of the buckets per request
    assert bucket.take("a:0") > 0  # kept (used lately), still empty
    # Forgotten: full again (kept, it would hold about 1 of its 2).
    assert bucket.take("a:1") == 0 and bucket.take("a:1") == 0

