"""``GET /v1/catalog/refreshes`` by tenant (issue 52, item 6): a token scoped to an org sees
the refreshes made with its org's credentials, never another org's credential name or
regions; an unscoped token or an admin sees them all."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi.testclient import TestClient

from automation.app import App
from automation.catalog.refresh.model import FetchedOffering, FetchedType, Snapshot
from automation.catalog.refresh.store import write_snapshot
from automation.services import credentials, projects
from automation.services.tokens import create_token
from tests.automation.api.conftest import bearer

# Each org's credential and the region it refreshed: nothing of one may reach the other.
REFRESHED = {"alpha": ("alpha-secret-aws", "eu-west-3"), "beta": ("beta-aws", "us-west-2")}


def _refresh(app: App, org: str) -> str:
    name, region = REFRESHED[org]
    cred = credentials.new_credential(app, credentials.NewCredential(
        name, "aws", {"profile": "team"}, org=org))
    return write_snapshot(app.ledger, Snapshot(
        provider="aws", regions=(region,),
        types=(FetchedType(name="m5.xlarge", arch="x86_64", vcpus=4, memory_gib=16.0),),
        offerings=(FetchedOffering("m5.xlarge", region, None, 0.2),),
        sources=("aws test",), fetched_at=datetime(2026, 12, 1, tzinfo=UTC)), cred.id)


def test_a_scoped_token_sees_its_orgs_refreshes_only(app: App, http: TestClient,
                                                     callers: dict[str, dict[str, str]]
                                                     ) -> None:
    made = {}
    for org in REFRESHED:
        projects.create_org(app, org)
        made[org] = _refresh(app, org)
    for org, other in (("alpha", "beta"), ("beta", "alpha")):
        for role in ("viewer", "member"):
            token = bearer(create_token(app, f"{org}-{role}", role, by="test", org=org).token)
            answer = http.get("/v1/catalog/refreshes", headers=token)
            assert answer.status_code == 200, answer.text
            assert [r["id"] for r in answer.json()] == [made[org]]
            assert [r["credential"] for r in answer.json()] == [REFRESHED[org][0]]
            for leaked in (made[other], *REFRESHED[other]):
                assert leaked not in answer.text
    for caller in ("viewer", "admin"):  # unscoped: every org's
        answer = http.get("/v1/catalog/refreshes", headers=callers[caller])
        assert {r["id"] for r in answer.json()} == set(made.values())
