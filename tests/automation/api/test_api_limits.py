"""Requests per caller: over the bucket, a 429 problem with Retry-After before any route runs;
one caller's flood leaves another's requests alone; the bucket refills with time."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from automation.api.app import create_api
from automation.api.limits import Limiter, from_env
from automation.app import App
from automation.errors import InvalidInput
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
