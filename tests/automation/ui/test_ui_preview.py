"""The pool page's preview: what ``GET /v1/node-pools/{ref}/preview?diff=true`` gives the
same token (the server's engine; changes nothing), rendered, and for nobody else."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from automation.app import App
from automation.models import NewNodePool
from automation.services import node_pools
from automation.services.tokens import create_token
from tests.automation.api.conftest import POOL


def test_the_preview_page_shows_what_the_api_previews_and_writes_nothing(
        world: App, api: FastAPI, browser: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")  # the server's engine
    made = node_pools.create_node_pool_reported(world, NewNodePool.model_validate(POOL))
    bearer = {"Authorization": f"Bearer {create_token(world, 'ci', 'viewer', by='t').token}"}
    before = world.ledger.query("SELECT state, updated_at FROM node_pools")

    page = browser.get(f"/ui/pools/{made.id}/preview", headers=bearer)
    api_says = browser.get(f"/v1/node-pools/{made.id}/preview", params={"diff": "true"},
                           headers=bearer).json()

    assert page.status_code == 200, page.text
    assert "mock engine (simulated: no cloud was asked)" in page.text
    create = api_says["summary"]["create"]
    assert create > 0
    assert f'<th scope="row">Create</th><td>{create}</td>' in page.text
    assert "aws:ec2/instance:Instance" in page.text  # the diff
    assert "Policy findings" in page.text
    assert world.ledger.query("SELECT state, updated_at FROM node_pools") == before
    pool_page = browser.get(f"/ui/pools/{made.id}", headers=bearer)
    assert f'href="/ui/pools/{made.id}/preview"' in pool_page.text


def test_anonymous_gets_no_preview_and_an_unknown_pool_none_either(
        world: App, browser: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")
    made = node_pools.create_node_pool_reported(world, NewNodePool.model_validate(POOL))
    resp = browser.get(f"/ui/pools/{made.id}/preview")
    assert resp.status_code == 303 and resp.headers["location"] == "/ui/login"
    assert "aws:" not in resp.text
    bearer = {"Authorization": f"Bearer {create_token(world, 'ci', 'viewer', by='t').token}"}
    assert browser.get("/ui/pools/no-such-pool/preview", headers=bearer).status_code == 404
