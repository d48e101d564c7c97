"""AWS: types, zone offerings and Linux on-demand prices read with a stored credential.

Per region: ``ec2:DescribeInstanceTypes`` and ``ec2:DescribeInstanceTypeOfferings`` (by
availability zone), both paginated; prices from the Price List API (``pricing:GetProducts``,
served from us-east-1 for every region), one paginated query per region filtered to shared
Linux on-demand capacity. boto3 is imported here only, when a refresh runs: it honours
``AWS_ENDPOINT_URL`` itself, which is how the tests point it at moto's server.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from automation.catalog.refresh.aws_families import arch, classify
from automation.catalog.refresh.model import (
    FetchedOffering,
    FetchedType,
    RefreshError,
    Snapshot,
)
from automation.models import Credential

if TYPE_CHECKING:
    import boto3

PRICING_REGION = "us-east-1"  # the Price List API answers for every region from here
SOURCES = (
    "aws ec2:DescribeInstanceTypes",
    "aws ec2:DescribeInstanceTypeOfferings",
    "aws pricing:GetProducts",
)
# Shared-tenancy Linux on-demand capacity with no pre-installed software: the list price a
# pool's VMs are billed at (the Price List API's own attribute names and values).
PRICE_FILTERS = (
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
)
_T = TypeVar("_T")


def _guarded(api: str, region: str, call: Callable[[], _T]) -> _T:
    """Run ``call``; any AWS or connection error becomes a RefreshError naming the API,
    the region and what AWS answered."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call()
    except ClientError as exc:
        err = exc.response.get("Error", {})
        raise RefreshError(
            f"aws {api} in {region} failed: {err.get('Code', 'error')}: "
            f"{err.get('Message', str(exc))}"
        ) from exc
    except BotoCoreError as exc:
        raise RefreshError(f"aws {api} in {region} failed: {exc}") from exc


def session(credential: Credential, secret: Mapping[str, str] | None = None) -> boto3.Session:
    """The credential's own access key (``secret``: its sealed one, opened), else its profile
    (or, with neither, the default chain: a role-only credential assumes its role with the
    server's own identity); then its role when it names one."""
    import boto3
    from botocore.exceptions import BotoCoreError

    ref = credential.reference
    try:
        base = boto3.Session(profile_name=ref.get("profile")) if secret is None else \
            boto3.Session(aws_access_key_id=secret["access_key_id"],
                          aws_secret_access_key=secret["secret_access_key"],
                          aws_session_token=secret.get("session_token"))
    except BotoCoreError as exc:  # ProfileNotFound and friends
        raise RefreshError(f"aws credential {credential.name}: {exc}") from exc
    role = ref.get("role_arn")
    if not role:
        return base
    answer = _guarded("sts:AssumeRole", base.region_name or "the default region", lambda: (
        base.client("sts").assume_role(RoleArn=role, RoleSessionName="anycloud-catalog-refresh")
    ))
    keys = answer["Credentials"]
    return boto3.Session(
        aws_access_key_id=keys["AccessKeyId"], aws_secret_access_key=keys["SecretAccessKey"],
        aws_session_token=keys["SessionToken"], region_name=base.region_name,
    )


def _pages(client: Any, operation: str, key: str, **kwargs: Any) -> Iterator[Any]:
    for page in client.get_paginator(operation).paginate(**kwargs):
        yield from page.get(key, [])


def _all(client: Any, operation: str, key: str, **kwargs: Any) -> list[Any]:
    """Every item of every page (the paginator follows NextToken)."""
    return list(_pages(client, operation, key, **kwargs))


def on_demand_usd(price_list_item: str | dict[str, Any]) -> tuple[str, str, float] | None:
    """(instance type, region code, USD per hour) of one GetProducts PriceList entry (a JSON
    string), or None when it has no hourly on-demand USD price above zero."""
    item = json.loads(price_list_item) if isinstance(price_list_item, str) else price_list_item
    attributes = item.get("product", {}).get("attributes", {})
    name = attributes.get("instanceType")
    if not name:
        return None
    for term in item.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if dimension.get("unit") == "Hrs" and usd is not None and float(usd) > 0:
                return name, attributes.get("regionCode", ""), round(float(usd), 6)
    return None


def prices(pricing: Any, region: str) -> tuple[dict[str, float], list[str]]:
    """Every shared Linux on-demand hourly price in ``region`` by type, and warnings for a
    type that came back with two different prices (the lower is kept)."""
    filters = [{"Type": "TERM_MATCH", "Field": "regionCode", "Value": region}] + [
        {"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in PRICE_FILTERS
    ]
    found: dict[str, float] = {}
    warnings: list[str] = []
    items = _guarded("pricing:GetProducts", region, partial(
        _all, pricing, "get_products", "PriceList", ServiceCode="AmazonEC2", Filters=filters,
        FormatVersion="aws_v1",
    ))
    for item in items:
        parsed = on_demand_usd(item)
        if parsed is None or parsed[1] not in ("", region):
            continue
        name, _, usd = parsed
        if name in found and found[name] != usd:
            warnings.append(f"aws {region} {name}: two list prices ({found[name]}, {usd}); "
                            "the lower is kept")
            usd = min(usd, found[name])
        found[name] = usd
    return found, warnings


def _kept(spec: dict[str, Any]) -> FetchedType | None:
    """The type as the catalog keeps it, or None when it is outside the catalog's families."""
    name = spec["InstanceType"]
    kind, cpu = classify(name, spec), arch(spec)
    if isinstance(kind, str) or cpu is None:
        return None
    family, gpus, gpu_model = kind
    return FetchedType(
        name=name, arch="x86_64" if cpu == "x86_64" else "arm64",
        vcpus=int(spec["VCpuInfo"]["DefaultVCpus"]),
        memory_gib=round(spec["MemoryInfo"]["SizeInMiB"] / 1024, 3),
        gpus=gpus, gpu_model=gpu_model,
        family="gpu" if family == "gpu" else (
            "compute-optimised" if family == "compute-optimised" else "general-purpose"),
    )


def fetch(credential: Credential, regions: tuple[str, ...], now: datetime, *,
          secret: Mapping[str, str] | None = None) -> Snapshot:
    """Read ``regions`` with ``credential`` (``secret``: its sealed access key, opened); a
    RefreshError (nothing returned) on any failure."""
    if credential.provider != "aws":
        raise RefreshError(f"credential {credential.name} is for {credential.provider}, not aws")
    aws = session(credential, secret)
    pricing = aws.client("pricing", region_name=PRICING_REGION)
    types: dict[str, FetchedType] = {}
    offerings: list[FetchedOffering] = []
    warnings: list[str] = []
    for region in regions:
        ec2 = aws.client("ec2", region_name=region)
        specs = _guarded("ec2:DescribeInstanceTypes", region, partial(
            _all, ec2, "describe_instance_types", "InstanceTypes"))
        rows = _guarded("ec2:DescribeInstanceTypeOfferings", region, partial(
            _all, ec2, "describe_instance_type_offerings", "InstanceTypeOfferings",
            LocationType="availability-zone"))
        listed, region_warnings = prices(pricing, region)
        warnings += region_warnings
        zones_of: dict[str, set[str]] = {}
        for row in rows:
            zones_of.setdefault(row["InstanceType"], set()).add(row["Location"])
        for spec in specs:
            kept = _kept(spec)
            if kept is None or kept.name not in zones_of:
                continue
            types.setdefault(kept.name, kept)
            offerings.append(FetchedOffering(
                vm_type=kept.name, region=region, zones=tuple(sorted(zones_of[kept.name])),
                price_usd_hour=listed.get(kept.name),
            ))
    return Snapshot(
        provider="aws", regions=tuple(regions),
        types=tuple(sorted(types.values(), key=lambda t: t.name)),
        offerings=tuple(sorted(offerings, key=lambda o: (o.region, o.vm_type))),
        sources=SOURCES, fetched_at=now, warnings=tuple(warnings),
    )
