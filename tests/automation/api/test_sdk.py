"""The generated SDK against a real server on loopback: typed models (nested objects of the
node pool summary), pages followed, errors as typed exceptions, retries under one key; the
generated models keep unknown fields and take enum values a newer server adds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from anycloud_sdk import (
    Client,
    Conflict,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    Unauthenticated,
    models,
)

from automation.api.app import create_api
from automation.app import App
from automation.services.tokens import create_token
from automation.serving import ServerThread
from tests.automation.conftest import credential, ready_cluster


@pytest.fixture
def server(app: App, kubeconfig: Path) -> Iterator[tuple[str, App]]:
    ready_cluster(app, kubeconfig)
    credential(app)
    thread = ServerThread(create_api(app, limiter=None), "127.0.0.1:0")
    yield thread.url, app
    thread.stop()


def test_the_readme_example(server: tuple[str, App]) -> None:
    url, app = server
    token = create_token(app, "sdk", "member", by="test").token
    with Client(url, token) as api:
        made = api.node_pools.create("gpu", credentials="team-aws", region="us-east-1",
                                     vm_type="m7i.large", vms=2)
        summary = api.node_pools.get(made.id)
        assert isinstance(summary, models.NodePoolStatus)
        assert summary.ingress is not None and summary.ingress.release is None
        assert summary.counts.ready == 0 and made.cost.vms == 2 and made.zone_chosen
        assert [p.name for p in api.node_pools.list()] == ["gpu"]
        assert api.me().role == "member"
        report = api.cost(by="provider", since="2020-01-01")
        assert isinstance(report, models.CostReport) and report.by == "provider"
        assert report.total_usd == 0 and report.lines == []  # no VM confirmed yet
        daily = api.cost_daily(days=7)
        assert isinstance(daily, models.DailyCost) and len(daily.days) == 7 and not daily.pools
        plan = api.node_pools.plan("gpu")
        assert plan.pool == made.id and plan.cost.vms == 2 and plan.resources
        assert api.node_pools.policy("gpu").stack == plan.stack
        with pytest.raises(PermissionDenied):
            api.node_pools.unlock("gpu")  # an admin's


def test_previews_and_policy_with_the_servers_engine(server: tuple[str, App],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    url, app = server
    monkeypatch.setenv("ANYCLOUD_ENGINE", "mock")  # the server's engine
    viewer = create_token(app, "ci", "viewer", by="test").token
    admin = create_token(app, "root", "admin", by="test").token
    with Client(url, admin) as root:
        made = root.node_pools.create("gpu", credentials="team-aws", region="us-east-1",
                                      vm_type="m7i.large", vms=2)
    with Client(url, viewer) as ci:  # a viewer's token is enough for what CI runs
        one = ci.node_pools.preview("gpu", diff=True)
        assert isinstance(one, models.PoolPreview) and one.pool == made.id
        assert one.engine == "mock" and one.summary.create > 0 and one.cost.vms == 2
        assert "aws:ec2/instance:Instance" in one.diff
        assert [p.pool for p in ci.preview()] == [made.id]
        assert [r.pool for r in ci.policy()] == [made.id]
        with pytest.raises(PermissionDenied):
            ci.node_pools.adopt("gpu")
        h100 = ci.catalog(gpu="H100", provider="aws", minGpus=8)
        assert h100 and all(e.gpus >= 8 for e in h100) and h100[0].price_source is not None
        m7i = ci.catalog_type("m7i.large")
        assert m7i.vcpus == 2 and any(o.region == "us-east-1" for o in m7i.offerings)
    with Client(url, admin) as root:
        addons = root.clusters.unlock_addons("prod")
        assert isinstance(addons, models.EngineUnlock) and addons.engine == "mock"
        with pytest.raises(NotFound):
            root.clusters.preview_addons("no-such-cluster")


def test_lists_follow_pages(server: tuple[str, App]) -> None:
    url, app = server
    with Client(url, create_token(app, "sdk", "member", by="test").token) as api:
        for n in range(3):
            api.node_pools.create(f"p{n}", credentials="team-aws", region="us-east-1",
                                  vm_type="m7i.large", vms=1)
        assert [p.name for p in api.node_pools.list(page_size=1)] == ["p0", "p1", "p2"]
        # raw: the same pools across the same pages, as the server's JSON (no models)
        raw = list(api.node_pools.list(page_size=1, raw=True))
        assert [type(p) for p in raw] == [dict] * 3
        assert [p["name"] for p in raw] == ["p0", "p1", "p2"] and "vmType" in raw[0]
        assert [p.model_dump(mode="json", by_alias=True)["id"]
                for p in api.node_pools.list(page_size=2)] == [p["id"] for p in raw]


def test_errors_are_typed_and_name_field_and_rule(server: tuple[str, App]) -> None:
    url, app = server
    member = create_token(app, "m", "member", by="test").token
    viewer = create_token(app, "v", "viewer", by="test").token
    with Client(url, member) as api:
        with pytest.raises(NotFound) as missing:
            api.node_pools.get("nothing")
        assert (missing.value.code, missing.value.field) == ("NOT_FOUND", "node_pool")
        api.node_pools.create("gpu", credentials="team-aws", region="us-east-1",
                              vm_type="m7i.large", vms=1)
        with pytest.raises(Conflict) as taken:
            api.node_pools.create("gpu", credentials="team-aws", region="us-east-1",
                                  vm_type="m7i.large", vms=1)
        assert taken.value.field == "name" and taken.value.rule
    with Client(url, viewer) as api, pytest.raises(PermissionDenied):
        api.tokens.create("x", "member")
    with Client(url, "acy_" + "n" * 43) as api, pytest.raises(Unauthenticated):
        api.me()


def test_a_create_retried_after_a_lost_answer_creates_once(server: tuple[str, App],
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """The connection drops after the server created the pool: the retry carries the same
    Idempotency-Key and gets the first answer."""
    url, app = server
    api = Client(url, create_token(app, "sdk", "member", by="test").token)
    real = api._http.request
    calls: list[str] = []

    def flaky(method: str, path: str, **kw: object) -> httpx2.Response:
        resp = real(method, path, **kw)  # type: ignore[arg-type]
        calls.append(str(kw["headers"]))
        if len(calls) == 1:
            raise httpx2.ReadError("connection reset after the server answered")
        return resp

    monkeypatch.setattr(api._http, "request", flaky)
    monkeypatch.setattr("anycloud_sdk.client.time.sleep", lambda _: None)
    made = api.node_pools.create("gpu", credentials="team-aws", region="us-east-1",
                                 vm_type="m7i.large", vms=1)
    assert made.name == "gpu" and len(calls) == 2 and calls[0] == calls[1]
    monkeypatch.undo()
    assert [p.name for p in api.node_pools.list()] == ["gpu"]
    api.close()


def test_models_keep_unknown_fields_and_open_enums() -> None:
    doc = {"id": "np-1", "name": "x", "cluster": "c", "credentials": "k", "provider": "aws",
           "region": "r", "zone": None, "vmType": "t", "vms": 1, "state": "hibernating",
           "lastError": None, "counts": {"ready": 0, "starting": 0, "draining": 0},
           "hostsService": False, "createdAt": "2026-12-03T00:00:00Z",
           "updatedAt": "2026-12-03T00:00:00Z", "fromTheFuture": {"a": 1}}
    pool = models.NodePoolStatus.model_validate(doc)
    assert pool.state.root == "hibernating"
    assert pool.model_dump(by_alias=True)["fromTheFuture"] == {"a": 1}


def test_credentials_with_a_sealed_secret(server: tuple[str, App]) -> None:
    import os

    from pydantic import SecretStr

    from automation.sealing import SealingKey

    url, app = server
    app.sealing = SealingKey(os.urandom(32))
    secret = models.SecretMaterial(access_key_id=SecretStr("AKIAIOSFODNN7EXAMPLE"),
                                   secret_access_key=SecretStr("s" * 40))
    with Client(url, create_token(app, "sdk", "admin", by="test").token) as api:
        made = api.credentials.create("sealed", "aws", secret=secret)
        assert made.secret is not None and made.secret.fields == {"accessKeyId": "AKIA…MPLE"}
        again = api.credentials.rotate("sealed", models.SecretMaterial(
            access_key_id=SecretStr("AKIAIOSFODNN7EXAMPLE"), secret_access_key=SecretStr("t" * 40)))
        assert again.secret is not None and again.secret.fingerprint != made.secret.fingerprint
        assert [c.name for c in api.credentials.list()] == ["sealed", "team-aws"]
        with pytest.raises(Conflict) as in_use:
            api.credentials.rotate("team-aws", secret)
        assert in_use.value.code == "NO_SEALED_SECRET"
        assert api.credentials.get("sealed").secret == again.secret
        etag = api.credentials.etag("sealed")
        api.credentials.rotate("sealed", secret, if_match=etag)
        with pytest.raises(PreconditionFailed):
            api.credentials.delete("sealed", if_match=etag)  # it was rotated since
        assert api.credentials.delete("sealed", if_match=api.credentials.etag("sealed")
                                      ).state == "deleted"


@pytest.mark.usefixtures("memory_runtime_dir")
def test_clusters_if_match_and_a_429_retried(server: tuple[str, App], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from anycloud_sdk import PreconditionFailed
    from anycloud_sdk import client as sdk_client

    from automation.sealing import SealingKey
    from tests.automation.api.test_api_clusters import kubeconfig

    url, app = server
    app.sealing = SealingKey(os.urandom(32))
    with Client(url, create_token(app, "sdk", "admin", by="test").token) as api:
        made = api.clusters.register("edge", kubeconfig(), offline=True,
                                     kubernetes_version="v1.36.2+k3s1")
        assert made.sealed_kubeconfig is not None and made.kubeconfig_path is None
        assert {c.name for c in api.clusters.list()} == {"prod", "edge"}
        pool = api.node_pools.create("gpu", credentials="team-aws", region="us-east-1",
                                     vm_type="m7i.large", vms=1, cluster="prod")
        etag = api.node_pools.etag(pool.id)
        with pytest.raises(PreconditionFailed):
            api.node_pools.delete(pool.id, if_match='"stale"')
        assert api.node_pools.delete(pool.id, if_match=etag).state.root == "deleting"
        # A 429 is waited out and retried, even for a DELETE.
        seen: list[int] = []
        real = api._http.request

        def throttled(method: str, path: str, **kw: object) -> httpx2.Response:
            seen.append(1)
            if len(seen) == 1:
                return httpx2.Response(429, headers={"Retry-After": "0"}, json={
                    "type": "t", "title": "t", "status": 429, "detail": "slow down",
                    "code": "RESOURCE_EXHAUSTED"})
            return real(method, path, **kw)  # type: ignore[arg-type]

        monkeypatch.setattr(api._http, "request", throttled)
        monkeypatch.setattr(sdk_client.time, "sleep", lambda _: None)
        with pytest.raises(PreconditionFailed):  # after the 429, the stale If-Match
            api.clusters.delete("edge", if_match='"stale"')
        assert len(seen) == 2
        assert api.clusters.delete("edge", if_match=api.clusters.etag("edge")
                                   ).state.root == "deleted"
