"""The AWS fetcher with the real boto3 client: EC2 and STS against moto's server on loopback,
the Price List API against a loopback server replaying a recorded page (moto has none)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from automation.catalog.refresh import aws, aws_families
from automation.catalog.refresh.model import RefreshError
from automation.models import Credential
from tests.automation.catalog.refresh.aws_servers import (
    PRICES,
    PROFILE_KEY,
    RECORDED,
    PricingServer,
    aws_env,
    compute_item,
    free_port,
    moto_server,
    pricing_server,
)

NOW = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def cred(**reference: str) -> Credential:
    return Credential(id="cr-1", name="team-aws", provider="aws", org_id="org-1",
                      reference=reference or {"profile": "team"}, state="active", created_at=NOW)


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    with moto_server() as url:
        yield url


@pytest.fixture
def pricing() -> Iterator[PricingServer]:
    with pricing_server() as server:
        yield server


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, moto_url: str,
        pricing: PricingServer) -> PricingServer:
    aws_env(monkeypatch, tmp_path, moto_url, pricing.url)
    return pricing


def _moto_zones(region: str) -> dict[str, set[str]]:
    """What moto's server answers for the region's zone offerings (its own resource file)."""
    import moto

    path = (Path(moto.__file__).parent / "ec2" / "resources" / "instance_type_offerings"
            / "availability-zone" / f"{region}.json.gz")
    zones: dict[str, set[str]] = {}
    for row in json.loads(gzip.decompress(path.read_bytes())):
        zones.setdefault(row["InstanceType"], set()).add(row["Location"])
    return zones


def test_fetch_reads_types_zones_and_prices(env: PricingServer) -> None:
    snap = aws.fetch(cred(), ("us-east-1", "eu-west-1"), NOW)
    assert snap.provider == "aws" and snap.regions == ("us-east-1", "eu-west-1")
    assert snap.fetched_at == NOW and "aws pricing:GetProducts" in snap.sources
    types = {t.name: t for t in snap.types}
    m5 = types["m5.xlarge"]
    assert (m5.arch, m5.vcpus, m5.memory_gib, m5.gpus, m5.family) == (
        "x86_64", 4, 16.0, 0, "general-purpose")
    g5 = types["g5.xlarge"]
    assert (g5.family, g5.gpus, g5.gpu_model) == ("gpu", 1, "NVIDIA A10G")
    assert types["c5.large"].family == "compute-optimised"
    assert types["m6g.large"].arch == "arm64"  # kept (listed), refused by validation
    assert "r5.large" not in types and "i3.large" not in types  # outside the families
    offered = {(o.region, o.vm_type): o for o in snap.offerings}
    expected_zones = _moto_zones("us-east-1")
    assert set(offered["us-east-1", "m5.xlarge"].zones or ()) == expected_zones["m5.xlarge"]
    assert {name for region, name in offered if region == "us-east-1"} == {
        name for name in expected_zones if name in types}
    # Prices: the served ones, per region; a type with none served has none.
    for (vm_type, region), usd in PRICES.items():
        assert offered[region, vm_type].price_usd_hour == pytest.approx(float(usd))
    assert offered["eu-west-1", "c5.large"].price_usd_hour is None
    # One paginated query per region, with the shared Linux on-demand filters.
    regions_asked = [{f["Field"]: f["Value"] for f in r["Filters"]}["regionCode"]
                     for r in env.requests]
    assert regions_asked.count("us-east-1") == 2 and regions_asked.count("eu-west-1") == 1
    first = {f["Field"]: f["Value"] for f in env.requests[0]["Filters"]}
    assert first == {"regionCode": "us-east-1", "operatingSystem": "Linux", "tenancy": "Shared",
                     "preInstalledSw": "NA", "capacitystatus": "Used"}
    assert env.requests[0]["target"] == "AWSPriceListService.GetProducts"
    assert env.requests[0]["ServiceCode"] == "AmazonEC2"


def test_role_arn_is_assumed_through_sts(env: PricingServer) -> None:
    role = "arn:aws:iam::123456789012:role/catalog-reader"
    plain = aws.session(cred(profile="team")).get_credentials()
    assumed = aws.session(cred(profile="team", role_arn=role)).get_credentials()
    assert plain is not None and plain.access_key == PROFILE_KEY
    assert assumed is not None and assumed.access_key != PROFILE_KEY and assumed.token
    snap = aws.fetch(cred(profile="team", role_arn=role), ("us-east-1",), NOW)
    assert any(t.name == "m5.xlarge" for t in snap.types)


def test_price_list_entries_are_parsed_from_the_recorded_shape() -> None:
    # The recorded page's item is EBS storage: no instance type, not a VM price.
    assert aws.on_demand_usd(RECORDED["PriceList"][0]) is None
    item = compute_item("m5.xlarge", "us-east-1", "0.1920000000")
    assert aws.on_demand_usd(json.dumps(item)) == ("m5.xlarge", "us-east-1", 0.192)
    zero = compute_item("m5.xlarge", "us-east-1", "0.0000000000")
    assert aws.on_demand_usd(zero) is None  # 0 is no price


def test_an_api_error_names_the_api_the_region_and_the_answer(env: PricingServer) -> None:
    env.fail = (400, {"__type": "InvalidParameterException",
                      "message": "Input filter regionCode is invalid"})
    with pytest.raises(RefreshError) as err:
        aws.fetch(cred(), ("us-east-1",), NOW)
    text = str(err.value)
    assert "pricing:GetProducts" in text and "us-east-1" in text
    assert "InvalidParameterException" in text and "regionCode is invalid" in text


def test_an_unreachable_ec2_endpoint_names_the_call(env: PricingServer,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_EC2", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(RefreshError, match=r"aws ec2:DescribeInstanceTypes in eu-west-1 failed"):
        aws.fetch(cred(), ("eu-west-1",), NOW)


def test_an_unknown_profile_is_a_refresh_error(env: PricingServer) -> None:
    with pytest.raises(RefreshError, match="nobody"):
        aws.fetch(cred(profile="nobody"), ("us-east-1",), NOW)


def test_the_generator_and_the_refresh_share_one_classification() -> None:
    from tools.catalog_generator import aws as generator

    assert generator.classify is aws_families.classify
    assert generator.spec_arch is aws_families.arch
    assert aws_families.classify("r5.large", {}) == "memory-optimised"
    assert aws_families.classify("p4d.24xlarge", {"GpuInfo": {"Gpus": [
        {"Manufacturer": "NVIDIA", "Name": "A100", "Count": 8}]}}) == ("gpu", 8, "NVIDIA A100")
