"""Credentials through the API: the secret is sealed under the server's key, never answered,
never echoed in an error, never in the ledger in plaintext; rotate replaces it, delete drops
it; every rule refuses with the field and changes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from automation.app import App
from automation.sealing import SealingKey
from tests.automation.conftest import credential, ready_cluster, snapshot

AWS_SECRET = ("NeverOnDisk" * 4)[:40]
GCP_KEY = json.dumps({
    "type": "service_account", "project_id": "my-project", "private_key_id": "k-1234",
    "private_key": "-----BEGIN PRIVATE KEY-----\nNeverOnDiskGcpKey\n-----END PRIVATE KEY-----\n",
    "client_email": "deployer@my-project.iam.gserviceaccount.com"})
AZURE_SECRET = "NeverOnDiskAzure~Secret"
PLAINTEXTS = ("NeverOnDisk",)  # a part of every secret above

AWS = {"name": "team-aws", "provider": "aws",
       "secret": {"accessKeyId": "AKIAIOSFODNN7EXAMPLE", "secretAccessKey": AWS_SECRET}}
GCP = {"name": "team-gcp", "provider": "gcp", "project": "my-project",
       "secret": {"serviceAccountJson": GCP_KEY}}
AZURE = {"name": "team-azure", "provider": "azure",
         "subscriptionId": "00000000-0000-0000-0000-000000000001",
         "tenantId": "00000000-0000-0000-0000-000000000002",
         "clientId": "00000000-0000-0000-0000-000000000003",
         "secret": {"clientSecret": AZURE_SECRET}}


@pytest.fixture
def keyed(app: App) -> App:
    app.sealing = SealingKey(os.urandom(32))
    return app


def no_plaintext(*texts: Any) -> None:
    for text in texts:
        for secret in PLAINTEXTS:
            assert secret not in str(text), f"a secret leaked into: {str(text)[:300]}"


@pytest.mark.parametrize("body", [AWS, GCP, AZURE], ids=["aws", "gcp", "azure"])
def test_a_secret_is_sealed_and_never_answered(keyed: App, http: TestClient, body: Any,
                                               callers: dict[str, dict[str, str]]) -> None:
    made = http.post("/v1/credentials", json=body, headers=callers["admin"])
    assert made.status_code == 201, made.text
    cred = made.json()
    assert cred["secret"]["fingerprint"].startswith("hmac-sha256:")
    assert cred["secret"]["storedAt"] and cred["secret"]["rotatedAt"] is None
    listed = http.get("/v1/credentials", headers=callers["viewer"]).json()["items"]
    assert [c["secret"] for c in listed] == [cred["secret"]]
    no_plaintext(made.text, listed, snapshot(keyed))
    if body is AWS:
        assert cred["secret"]["fields"] == {"accessKeyId": "AKIA…MPLE"}
        assert cred["reference"] == {}
    if body is GCP:
        assert cred["secret"]["fields"] == {
            "clientEmail": "deployer@my-project.iam.gserviceaccount.com", "privateKeyId": "k-1234"}
        assert cred["reference"] == {"project": "my-project"}
    if body is AZURE:
        assert "clientSecretEnv" not in cred["reference"]


BAD = [
    ({**AWS, "secret": {"accessKeyId": "AKIA123", "secretAccessKey": AWS_SECRET}},
     "secret.accessKeyId", "IAM access key id"),
    ({**AWS, "secret": {"accessKeyId": "AKIAIOSFODNN7EXAMPLE",
                        "secretAccessKey": "NeverOnDisk"}},
     "secret.secretAccessKey", "40 of"),
    ({**AWS, "secret": {"accessKeyId": "ASIAIOSFODNN7EXAMPLE", "secretAccessKey": AWS_SECRET}},
     "secret.sessionToken", "temporary"),
    ({**AWS, "secret": {"secretAccessKey": AWS_SECRET}}, "secret.accessKeyId", "required"),
    ({**AWS, "secret": {"clientSecret": AZURE_SECRET}}, "secret.clientSecret",
     "does not apply to --provider aws"),
    ({**AWS, "profile": "team"}, "profile", "file on the client's machine"),
    ({**GCP, "keyFile": "/etc/key.json"}, "keyFile", "file on the client's machine"),
    ({**GCP, "secret": {"serviceAccountJson": "NeverOnDisk{"}}, "secret.serviceAccountJson",
     "key file's JSON"),
    ({**GCP, "secret": {"serviceAccountJson": json.dumps({"type": "authorized_user",
                                                          "refresh_token": "NeverOnDisk"})}},
     "secret.serviceAccountJson", "service_account"),
    ({**GCP, "project": "NO"}, "--project", "GCP project id"),
    ({**AZURE, "secret": {"clientSecret": "NeverOnDisk has spaces"}}, "secret.clientSecret",
     "printable"),
    ({**AZURE, "tenantId": "nope"}, "--tenant-id", "UUID"),
]


@pytest.mark.parametrize(("body", "field", "rule"), BAD, ids=[f"{b[1]}:{b[2]}" for b in BAD])
def test_bad_material_is_refused_by_name_without_showing_it(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]], body: Any,
        field: str, rule: str) -> None:
    before = snapshot(keyed)
    resp = http.post("/v1/credentials", json=body, headers=callers["admin"])
    assert resp.status_code == 400, resp.text
    problem = resp.json()
    assert problem["field"] == field and rule in problem["rule"], problem
    no_plaintext(resp.text)
    assert snapshot(keyed) == before


def test_a_malformed_secret_is_a_422_that_does_not_echo_it(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    body = {**AWS, "secret": {"accessKeyId": "AKIAIOSFODNN7EXAMPLE",
                              "secretAccessKey": ["NeverOnDisk"], "extra": "NeverOnDisk"}}
    resp = http.post("/v1/credentials", json=body, headers=callers["admin"])
    assert resp.status_code == 422, resp.text
    assert {p["field"] for p in resp.json()["problems"]} == {"secret.secretAccessKey",
                                                            "secret.extra"}
    no_plaintext(resp.text)


def test_without_a_server_key_a_secret_is_refused_and_nothing_is_written(
        app: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    app.sealing = None
    before = snapshot(app)
    for headers in ({}, {"Idempotency-Key": "k1"}):
        resp = http.post("/v1/credentials", json=AWS, headers=callers["admin"] | headers)
        assert resp.status_code == 409, resp.text
        assert resp.json()["code"] == "SEALING_KEY_MISSING"
        assert snapshot(app) == before
    # Ids alone (the server's own identity assumes the role) need no key.
    role = {"name": "by-role", "provider": "aws",
            "roleArn": "arn:aws:iam::123456789012:role/deployer"}
    made = http.post("/v1/credentials", json=role, headers=callers["admin"])
    assert made.status_code == 201 and made.json()["secret"] is None


def test_rotate_replaces_the_secret_and_delete_drops_it(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    admin = callers["admin"]
    first = http.post("/v1/credentials", json=AWS, headers=admin).json()
    sealed_before = snapshot(keyed)["sealed_secrets"]
    new = {"accessKeyId": "AKIAIOSFODNN7EXAMPL2", "secretAccessKey": AWS_SECRET[::-1]}
    rotated = http.post("/v1/credentials/team-aws/rotate", json={"secret": new}, headers=admin)
    assert rotated.status_code == 200, rotated.text
    after = rotated.json()["secret"]
    assert after["fingerprint"] != first["secret"]["fingerprint"]
    assert after["rotatedAt"] and after["fields"] == {"accessKeyId": "AKIA…MPL2"}
    (row,) = snapshot(keyed)["sealed_secrets"]
    assert row not in sealed_before  # the old ciphertext is gone, not kept beside
    no_plaintext(rotated.text, snapshot(keyed))
    # Wrong material for the provider, or a member: refused, nothing changed.
    before = snapshot(keyed)
    assert http.post("/v1/credentials/team-aws/rotate", json={"secret": {"apiKey": "x" * 9}},
                     headers=admin).status_code == 400
    assert http.post("/v1/credentials/team-aws/rotate", json={"secret": new},
                     headers=callers["member"]).status_code == 403
    assert snapshot(keyed) == before
    gone = http.delete("/v1/credentials/team-aws", headers=admin)
    assert gone.status_code == 200, gone.text
    assert snapshot(keyed)["sealed_secrets"] == []


def test_a_reference_is_not_rotated_here(keyed: App, http: TestClient,
                                         callers: dict[str, dict[str, str]]) -> None:
    credential(keyed)  # a profile reference, as embedded mode stores it
    resp = http.post("/v1/credentials/team-aws/rotate",
                     json={"secret": AWS["secret"]}, headers=callers["admin"])
    assert resp.status_code == 409 and resp.json()["code"] == "NO_SEALED_SECRET", resp.text
    assert "profile=team" in resp.json()["detail"]


def test_delete_is_refused_while_a_pool_uses_it(keyed: App, kubeconfig: Path,
                                                http: TestClient,
                                                callers: dict[str, dict[str, str]]) -> None:
    ready_cluster(keyed, kubeconfig)
    http.post("/v1/credentials", json=AWS, headers=callers["admin"])
    pool = {"name": "gpu", "credentials": "team-aws", "region": "us-east-1",
            "vmType": "m7i.large", "minVms": 1, "maxVms": 1}
    assert http.post("/v1/node-pools", json=pool, headers=callers["member"]).status_code == 201
    before = snapshot(keyed)
    resp = http.delete("/v1/credentials/team-aws", headers=callers["admin"])
    assert resp.status_code == 409 and resp.json()["code"] == "CREDENTIAL_IN_USE"
    assert snapshot(keyed) == before


def test_a_retry_with_the_same_key_creates_once_and_another_secret_is_not_the_same_body(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    headers = callers["admin"] | {"Idempotency-Key": "cred-1"}
    first = http.post("/v1/credentials", json=AWS, headers=headers)
    again = http.post("/v1/credentials", json=AWS, headers=headers)
    assert again.status_code == 201 and again.headers["idempotency-replayed"] == "true"
    assert again.json() == first.json()
    other = {**AWS, "secret": {**AWS["secret"], "secretAccessKey": AWS_SECRET[::-1]}}
    reused = http.post("/v1/credentials", json=other, headers=headers)
    assert reused.status_code == 422 and reused.json()["code"] == "IDEMPOTENCY_KEY_REUSED"
    # The stored digest is keyed: not the bare SHA-256 of the body.
    no_plaintext(snapshot(keyed))
    import hashlib

    bare = hashlib.sha256(json.dumps(AWS, sort_keys=True).encode()).hexdigest()
    assert bare not in str(snapshot(keyed)["idempotency_keys"])


def test_if_match_rotates_and_deletes_only_the_version_that_was_read(
        keyed: App, http: TestClient, callers: dict[str, dict[str, str]]) -> None:
    """Two admins: one read the credential, the other rotated it since; the first one's
    If-Match is stale, so its rotate and its delete change nothing (412)."""
    admin = callers["admin"]
    assert http.post("/v1/credentials", json=AWS, headers=admin).status_code == 201
    read = http.get("/v1/credentials/team-aws", headers=callers["viewer"])
    assert read.status_code == 200 and read.json()["name"] == "team-aws"
    no_plaintext(read.text)
    etag = read.headers["etag"]
    new = {"accessKeyId": "AKIAIOSFODNN7EXAMPL2", "secretAccessKey": AWS_SECRET[::-1]}
    assert http.post("/v1/credentials/team-aws/rotate", json={"secret": new},
                     headers=admin | {"If-Match": etag}).status_code == 200
    before = snapshot(keyed)
    for stale in (http.post("/v1/credentials/team-aws/rotate", json={"secret": new},
                            headers=admin | {"If-Match": etag}),
                  http.delete("/v1/credentials/team-aws", headers=admin | {"If-Match": etag})):
        assert stale.status_code == 412, stale.text
        assert stale.json()["code"] == "PRECONDITION_FAILED"
    assert snapshot(keyed) == before
    fresh = http.get("/v1/credentials/team-aws", headers=admin).headers["etag"]
    assert fresh != etag
    gone = http.delete("/v1/credentials/team-aws", headers=admin | {"If-Match": fresh})
    assert gone.status_code == 200 and gone.json()["state"] == "deleted"
    assert http.get("/v1/credentials/team-aws", headers=admin).status_code == 404
