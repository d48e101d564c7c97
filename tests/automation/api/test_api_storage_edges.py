"""Values at the edges of what each ledger can store, sent where the API takes a number or
free text, on both ledgers: each is refused with a 400 naming the field, and nothing is
written. SQLite stores integers up to 2**63 - 1 and any text; PostgreSQL's ``integer`` stops
at 2**31 - 1 and its text cannot hold a NUL byte. So a value one store takes and the other
fails on (a 500) is caught here on both; schemathesis runs its cases on PostgreSQL, the
stricter of the two, alone (tests/automation/api/test_api_schemathesis.py)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from automation.app import App
from tests.automation.api.conftest import POOL
from tests.automation.conftest import snapshot

PAST_INT4, PAST_INT8 = 2**31, 2**63

EDGES = [
    pytest.param("/v1/node-pools", {**POOL, "minVms": PAST_INT4, "maxVms": PAST_INT4},
                 "--min-vms", id="vms past int4"),
    pytest.param("/v1/node-pools", {**POOL, "minVms": PAST_INT8, "maxVms": PAST_INT8},
                 "--min-vms", id="vms past int8"),
    pytest.param("/v1/deployments", {"name": "x", "project": "web", "slots": PAST_INT4},
                 "--slots", id="slots past int4"),
    pytest.param("/v1/deployments", {"name": "x", "project": "web", "slots": PAST_INT8},
                 "--slots", id="slots past int8"),
    pytest.param("/v1/deployments", {"name": "x", "project": "web", "cpu": "1\x00"},
                 "--cpu", id="cpu with NUL"),
    pytest.param("/v1/deployments/api/token", {"ttlSeconds": PAST_INT8}, "ttlSeconds",
                 id="ttl past int8"),
    pytest.param("/v1/deployments/api/token", {"ttlSeconds": -PAST_INT8}, "ttlSeconds",
                 id="ttl below -int8"),
    pytest.param("/v1/sessions", {"pool": "default/cpu", "command": ["echo", "a\x00"]},
                 "command", id="command with NUL"),
]


@pytest.mark.parametrize(("path", "body", "field"), EDGES)
def test_a_value_past_what_a_ledger_stores_is_refused_alike(
        app: App, world: App, http: TestClient, callers: dict[str, dict[str, str]],
        path: str, body: dict[str, Any], field: str) -> None:
    admin = callers["admin"]
    assert http.post("/v1/orgs", json={"name": "acme"}, headers=admin).is_success
    assert http.post("/v1/projects", json={"name": "web", "org": "acme"},
                     headers=admin).is_success
    assert http.post("/v1/deployments", json={"name": "api", "project": "web"},
                     headers=admin).is_success
    before = snapshot(app)
    answer = http.post(path, json=body, headers=admin)
    assert answer.status_code == 400, answer.text
    assert answer.json()["field"] == field
    assert snapshot(app) == before


def test_the_openapi_document_gives_the_bounds_the_service_applies() -> None:
    """A client generated from the document (the SDK) knows the bounds before it sends: the
    document's numbers are the constants the service's checks use, not a copy."""
    import json

    from automation.models import MAX_SLOTS, MAX_VMS
    from tools.sdk.generate import openapi_document

    schemas = json.loads(openapi_document())["components"]["schemas"]
    pool, deployment = schemas["NewNodePool"]["properties"], schemas["NewDeployment"]["properties"]
    for field in ("minVms", "maxVms"):
        assert (pool[field]["minimum"], pool[field]["maximum"]) == (1, MAX_VMS)
    slots = next(s for s in deployment["slots"]["anyOf"] if s.get("type") == "integer")
    assert (slots["minimum"], slots["maximum"]) == (1, MAX_SLOTS)
