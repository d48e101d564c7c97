"""A forged ``pageToken`` is a 400 naming the parameter, on every list the app mounts: a key
of another length or of other types than the list's own is refused before it is compared
(comparing it raised TypeError: a 500, a logged traceback and a dropped connection)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from automation.api.paging import Page, page_of
from automation.app import App
from automation.errors import InvalidInput
from tests.automation.api.conftest import POOL
from tests.automation.api.test_api_deployments import running  # noqa: F401 (a fixture)


def forged(token: str, key: Any) -> str:
    """``token`` with its key replaced (its filters' digest kept, so only the key is wrong)."""
    data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw = json.dumps({"k": key, "f": data["f"]}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def forgeries(token: str) -> list[str]:
    key = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))["k"]
    return [forged(token, k) for k in (
        [1] * len(key), [None] * len(key), [[x] for x in key], [{"a": 1}, *key[1:]],
        key[:-1], [*key, "zzz"], [], "[" * 5000 + "]" * 5000)] + [
        base64.urlsafe_b64encode(b"[" * 3000).decode(), "\x00", "%%%", "é"]


def list_routes(api: FastAPI) -> list[str]:
    """Every GET route of the app that takes a ``pageToken``, without path parameters."""
    return sorted(r.path for r in api.routes if isinstance(r, APIRoute)
                  and "GET" in (r.methods or ())
                  and "{" not in r.path
                  and any(p.alias == "pageToken" for p in r.dependant.query_params))


def test_a_forged_page_token_is_400_on_every_list(
        api: FastAPI, http: TestClient, world: App, running: dict[str, str],  # noqa: F811
        callers: dict[str, dict[str, str]]) -> None:
    admin = callers["admin"]
    for name in ("gpu", "cpu"):
        assert http.post("/v1/node-pools", json=POOL | {"name": name},
                         headers=admin).status_code == 201
    assert http.post("/v1/deployments", json={"name": "worker", "project": "web"},
                     headers=admin).status_code == 201
    assert http.post("/v1/projects", json={"name": "docs", "org": "acme"},
                     headers=admin).status_code == 201
    tried, wrong = set(), []
    for path in list_routes(api):
        first = http.get(path, params={"pageSize": 1}, headers=admin)
        assert first.status_code == 200, (path, first.text)
        token = first.json()["nextPageToken"]
        if token is None:  # one item: no second page to forge
            continue
        tried.add(path)
        assert http.get(path, params={"pageToken": token}, headers=admin).status_code == 200
        for fake in forgeries(token):
            resp = http.get(path, params={"pageToken": fake}, headers=admin)
            body = resp.json()
            if resp.status_code != 400 or body.get("field") != "pageToken" or \
                    not body.get("rule"):
                wrong.append(f"{path} {fake[:40]!r}: {resp.status_code} {resp.text[:200]}")
    assert {"/v1/node-pools", "/v1/orgs", "/v1/deployments", "/v1/tokens",
            "/v1/projects"} <= tried
    assert not wrong, "\n".join(wrong)


class Names(Page[str]):
    pass


@pytest.mark.parametrize("key", [[1, 2], ["a"], ["a", "b", "c"], [["a"], "b"], [None, "b"],
                                 ["a", 2.5], [True, "b"]])
def test_a_key_of_another_shape_is_refused_by_page_of(key: list[Any]) -> None:
    items = ["b", "a", "c"]
    token = page_of(Names, items, lambda s: (s, s.upper()), page_size=1, page_token=None,
                    filters={}).next_page_token
    assert token is not None
    with pytest.raises(InvalidInput, match="pageToken") as refused:
        page_of(Names, items, lambda s: (s, s.upper()), page_size=1,
                page_token=forged(token, key), filters={})
    assert refused.value.rule == "must be a nextPageToken this API gave"
