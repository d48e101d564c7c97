"""``anycloud catalog refresh`` end to end: boto3 against moto's server and the recorded Price
List page on loopback, the ledger on SQLite and PostgreSQL, and what uses the refresh after."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from automation.app import App
from automation.catalog.store import load_catalog
from automation.ledger import schema
from automation.services import catalog_refresh as refresh_run
from tests.automation.catalog.refresh.aws_servers import (
    PricingServer,
    aws_env,
    moto_server,
    pricing_server,
)
from tests.automation.conftest import credential, ok_json, ready_cluster, snapshot

SOURCE = "aws Price List API via credential team-aws"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def pricing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
            moto_url: str) -> Iterator[PricingServer]:
    with pricing_server() as server:
        aws_env(monkeypatch, tmp_path, moto_url, server.url)
        yield server


def test_refresh_stores_reports_and_is_used(app: App, run: Any, pricing: PricingServer,
                                            kubeconfig: Path, in_each_mode: str) -> None:
    credential(app)
    out = ok_json(run("catalog", "refresh", "--credentials", "team-aws",
                      "--region", "us-east-1", "--json"))
    assert out["provider"] == "aws" and out["credential"] == "team-aws"
    assert "aws pricing:GetProducts" in out["sources"]
    [region] = out["regions"]
    assert region["region"] == "us-east-1" and region["prices"] == 3
    assert region["types"] == region["offerings"] > 100
    # moto's offerings are the shipped catalog's own source (same moto version): no type is
    # new and none gone; the prices are the Price List's, not libcloud's.
    assert region["newTypes"] == [] and region["goneOfferings"] == []
    shipped = load_catalog().offering("m5.xlarge", "us-east-1")
    assert shipped is not None
    assert {"vmType": "m5.xlarge", "oldUsdHour": shipped.price_usd_hour,
            "newUsdHour": 0.201} in region["priceChanges"]
    assert region["comparedWith"] == "the shipped catalog"

    shown = ok_json(run("catalog", "show", "m5.xlarge", "--json"))
    us = next(o for o in shown["offerings"] if o["region"] == "us-east-1")
    assert us["priceUsdHour"] == 0.201 and us["priceSourceId"] == f"{out['id']}/prices"
    sources = {s["id"]: s for s in shown["sources"]}
    assert sources[f"{out['id']}/prices"]["name"] == SOURCE
    assert sources[f"{out['id']}/zones"]["asOf"] == out["fetchedAt"]
    assert shown["specSourceId"] == f"{out['id']}/specs"
    human = run("catalog", "show", "m5.xlarge").stdout
    assert f"[{out['id']}/prices]" in human and f"[{out['id']}/specs]" in human
    listed = ok_json(run("catalog", "list", "--provider", "aws", "--region", "us-east-1",
                         "--json"))
    m5 = next(x for x in listed if x["vmType"] == "m5.xlarge")
    assert m5["priceUsdHour"] == 0.201 and m5["priceSource"]["name"] == SOURCE

    ready_cluster(app, kubeconfig)
    created = ok_json(run("node-pool", "create", "web", "--credentials", "team-aws",
                          "--region", "us-east-1", "--vm-type", "m5.xlarge",
                          "--min-vms", "2", "--max-vms", "2", "--json"))
    assert created["cost"]["hourlyUsd"] == 0.402 and created["cost"]["source"] == SOURCE
    assert created["cost"]["asOf"] == out["fetchedAt"]

    again = ok_json(run("catalog", "refresh", "--credentials", "team-aws", "--json"))
    [region] = again["regions"]  # default: the regions with live pools
    assert region["region"] == "us-east-1" and region["priceChanges"] == []
    assert region["comparedWith"].startswith("the aws refresh of ")
    history = ok_json(run("catalog", "refreshes", "--json"))
    assert [h["id"] for h in history] == [again["id"], out["id"]]
    assert history[1]["regions"] == ["us-east-1"]
    assert history[1]["counts"]["us-east-1"]["prices"] == 3

    shown = run("catalog", "refresh", "--credentials", "team-aws", "--region", "eu-west-1")
    assert shown.exit_code == 0 and "eu-west-1" in shown.stdout
    assert "the shipped catalog" in shown.stdout and "m5.xlarge" in shown.stdout


def test_a_failed_refresh_stores_nothing_and_says_why(app: App, run: Any,
                                                      pricing: PricingServer) -> None:
    credential(app)
    pricing.fail = (400, {"__type": "InvalidParameterException",
                          "message": "Input filter regionCode is invalid"})
    before = snapshot(app)
    result = run("catalog", "refresh", "--credentials", "team-aws", "--region", "eu-west-1")
    assert result.exit_code == 1 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "pricing:GetProducts in eu-west-1" in lines[0]
    assert "InvalidParameterException" in lines[0] and "stored nothing" in lines[0]
    assert snapshot(app) == before
    as_json = ok_json(run("catalog", "refreshes", "--json"))
    assert as_json == []


def test_bad_input_is_refused_before_any_call(app: App, run: Any,
                                              pricing: PricingServer) -> None:
    credential(app)
    result = run("catalog", "refresh", "--credentials", "team-aws", "--region", "mars-1")
    assert result.exit_code == 2 and "--region 'mars-1'" in result.stderr
    result = run("catalog", "refresh", "--credentials", "nobody")
    assert result.exit_code != 0 and "nobody" in result.stderr
    assert pricing.requests == []


def test_default_regions_are_those_with_live_pools_else_all(app: App,
                                                            kubeconfig: Path) -> None:
    cloud = load_catalog().provider("aws")
    assert cloud is not None
    assert refresh_run.default_regions(app, "aws") == tuple(sorted(cloud.regions))
    cluster_id = ready_cluster(app, kubeconfig)
    cred_id = credential(app)
    now = datetime(2026, 12, 1, tzinfo=UTC)
    org = app.ledger.query("SELECT org_id FROM clusters")[0]["org_id"]
    with app.ledger.write() as conn:
        for i, (region, state) in enumerate([("eu-west-1", "ready"), ("us-west-2", "deleted"),
                                             ("eu-west-1", "pending")]):
            conn.execute(schema.node_pools.insert().values(
                id=f"np-{i}", name=f"p{i}", cluster_id=cluster_id, credential_id=cred_id,
                org_id=org, provider="aws", region=region, zone=None, vm_type="m5.xlarge",
                min_vms=1, max_vms=1, state=state, hosts_service=False, consecutive_failures=0,
                created_at=now, updated_at=now))
    assert refresh_run.default_regions(app, "aws") == ("eu-west-1",)


@pytest.mark.parametrize(("provider", "region", "vm_type"), [
    ("gcp", "us-central1", "n2-standard-4"), ("azure", "eastus2", "Standard_D4s_v5")])
def test_other_clouds_dispatch_to_their_fetcher(app: App, run: Any,
                                                monkeypatch: pytest.MonkeyPatch,
                                                provider: str, region: str,
                                                vm_type: str) -> None:
    """The command calls automation.catalog.refresh.<cloud>.fetch (their own tests run them
    against recorded answers; here the fetcher is replaced to check the wiring only)."""
    import importlib

    from automation.catalog.refresh.model import FetchedOffering, FetchedType, Snapshot

    module = importlib.import_module(f"automation.catalog.refresh.{provider}")
    asked: list[tuple[str, tuple[str, ...], Any]] = []

    def fetch(cred: Any, regions: tuple[str, ...], now: datetime, *,
              secret: Any = None) -> Snapshot:
        asked.append((cred.name, regions, secret))
        return Snapshot(provider=provider, regions=regions, types=(
            FetchedType(name=vm_type, arch="x86_64", vcpus=4, memory_gib=16.0),),
            offerings=(FetchedOffering(vm_type, region, None, 0.5),),
            sources=(f"{provider} test",), fetched_at=now)

    monkeypatch.setattr(module, "fetch", fetch)
    credential(app, f"team-{provider}", provider)
    out = ok_json(run("catalog", "refresh", "--credentials", f"team-{provider}",
                      "--region", region, "--json"))
    assert asked == [(f"team-{provider}", (region,), None)]  # a reference: no secret of ours
    [changes] = out["regions"]
    assert changes["offerings"] == 1 and changes["prices"] == 1
    assert len(changes["goneOfferings"]) > 10  # the shipped region offered many more
    shown = ok_json(run("catalog", "show", vm_type, "--json"))
    there = next(o for o in shown["offerings"] if o["region"] == region)
    assert there["priceUsdHour"] == 0.5


SEALED_KEY = "AKIASEALEDKEY0000001"
SEALED_SECRET = ("SealedSecret" * 4)[:40]
SERVER_KEY = "AKIASERVERSOWNKEY001"


def test_a_sealed_credential_reads_the_cloud_with_its_own_keys(
        app: App, pricing: PricingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A credential whose access key the server holds sealed: the refresh signs with that
    key, never with the server's own identity (here in AWS_ACCESS_KEY_ID)."""
    import os

    from pydantic import SecretStr

    from automation.catalog.refresh import aws
    from automation.models import SecretMaterial
    from automation.sealing import SealingKey
    from automation.services import credentials

    app.sealing = SealingKey(os.urandom(32))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", SERVER_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-servers-own-secret")
    made = credentials.new_credential(app, credentials.NewCredential(
        "sealed-aws", "aws", secret=SecretMaterial(access_key_id=SecretStr(SEALED_KEY),
                                                   secret_access_key=SecretStr(SEALED_SECRET))))
    done = refresh_run.refresh(app, "sealed-aws", ("us-east-1",))
    assert done.credential == "sealed-aws" and done.regions[0].prices == 3
    assert pricing.signed_by and set(pricing.signed_by) == {SEALED_KEY}
    # The whole key pair is the credential's: the session the fetcher signs with holds both.
    keys = aws.session(made, refresh_run.secret_of(app, made)).get_credentials()
    assert keys is not None and (keys.access_key, keys.secret_key) == (SEALED_KEY, SEALED_SECRET)


def test_a_sealed_credential_without_the_key_stores_nothing(
        app: App, pricing: PricingServer) -> None:
    import os

    from pydantic import SecretStr

    from automation.models import SecretMaterial
    from automation.sealing import SealingKey, SealingKeyMissing
    from automation.services import credentials

    app.sealing = SealingKey(os.urandom(32))
    credentials.new_credential(app, credentials.NewCredential(
        "sealed-aws", "aws", secret=SecretMaterial(access_key_id=SecretStr(SEALED_KEY),
                                                   secret_access_key=SecretStr(SEALED_SECRET))))
    app.sealing = None
    before = snapshot(app)
    with pytest.raises(SealingKeyMissing):
        refresh_run.refresh(app, "sealed-aws", ("us-east-1",))
    assert pricing.signed_by == [] and snapshot(app) == before
