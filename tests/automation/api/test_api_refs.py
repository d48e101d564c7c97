"""A reference to a record (a body field naming an org, a cluster, a project) that holds a
NUL byte names nothing: 404 on both ledgers, never a 500 from PostgreSQL, whose text cannot
hold one (schemathesis found it on ``POST /v1/projects``)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from automation.app import App
from tests.automation.conftest import snapshot


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/projects", {"name": "web", "org": "ac\x00me"}),
    ("/v1/node-pools", {"name": "cpu", "cluster": "pr\x00od", "credentials": "team",
                        "region": "us-east-1", "vmType": "m7i.large", "minVms": 1,
                        "maxVms": 1}),
    ("/v1/deployments", {"name": "api", "project": "w\x00eb"}),
    ("/v1/clusters/pr\x00od/move", {"org": "acme"}),
])
def test_a_ref_with_a_nul_byte_names_nothing(app: App, http: TestClient, path: str,
                                             body: dict[str, Any],
                                             callers: dict[str, dict[str, str]]) -> None:
    before = snapshot(app)
    answer = http.post(path.replace("\x00", "%00"), json=body, headers=callers["admin"])
    assert answer.status_code in (400, 404), answer.text
    assert snapshot(app) == before
