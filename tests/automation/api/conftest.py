"""The API over each ledger, through FastAPI's TestClient; tokens of each role."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from automation.api.app import create_api
from automation.app import App
from automation.services.tokens import create_token, revoke_token
from tests.automation.conftest import credential, ready_cluster

# A node pool as POST /v1/node-pools takes it, on ``world``'s cluster and credential.
POOL = {"name": "gpu", "credentials": "team-aws", "region": "us-east-1",
        "vmType": "m7i.large", "minVms": 1, "maxVms": 1}


@pytest.fixture
def api(app: App) -> FastAPI:
    return create_api(app, limiter=None)  # the limits have their own tests


@pytest.fixture
def http(api: FastAPI) -> Iterator[TestClient]:
    with TestClient(api, raise_server_exceptions=False) as client:
        yield client


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def callers(app: App) -> dict[str, dict[str, str]]:
    """Headers of every kind of caller: none, bad tokens, and a token of each role."""
    made = {role: create_token(app, role, role, by="test",
                               pool="default/cpu" if role == "agent" else None).token
            for role in ("viewer", "member", "admin", "agent")}
    revoked = create_token(app, "revoked", "admin", by="test").token
    revoke_token(app, "revoked", by="test")
    expired = create_token(app, "expired", "admin", by="test",
                           expires_in=timedelta(seconds=1)).token
    app.clock.advance(timedelta(seconds=2))  # type: ignore[attr-defined]
    return {
        "none": {}, "malformed": bearer("acy_short"), "not bearer": {"Authorization": "Basic x"},
        "unknown": bearer("acy_" + "B" * 43), "revoked": bearer(revoked),
        "expired": bearer(expired), **{role: bearer(tok) for role, tok in made.items()},
    }


def static_provisioner(monkeypatch: pytest.MonkeyPatch, slots: int) -> None:
    """The server's provisioner set: one static runtime of ``slots`` slots, the default."""
    monkeypatch.setenv("ANYCLOUD_PROVISIONER_SET_JSON", json.dumps({"a": {
        "type": "static", "spec": {"runtimes": [{
            "host": "a1.example", "slots": slots, "data_dir": "/data/a",
            "audience_url": "https://a1.example"}]}}}))
    monkeypatch.setenv("ANYCLOUD_DEFAULT_PROVISIONER", "a")


def kubeconfig_file(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig.yaml"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


@pytest.fixture
def world(app: App, kubeconfig: Path) -> App:
    """A ready cluster and the ``team-aws`` credential."""
    ready_cluster(app, kubeconfig)
    credential(app)
    return app
