"""Every creation rule of the node-pool seed, with the seed's own examples."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.catalog import Catalog, load_catalog
from automation.errors import InvalidInput
from automation.validation import (
    check_kubernetes_version,
    check_name,
    check_placement,
    check_vm_counts,
)

CATALOG = load_catalog()


@pytest.mark.parametrize("name", ["a", "gpu-pool", "pool-1", "x" * 63, "0abc"])
def test_dns_labels_accepted(name: str) -> None:
    assert check_name("name", name) == name


@pytest.mark.parametrize("name", ["", "-a", "a-", "A", "a_b", "a.b", "x" * 64, "pool 1", "é"])
def test_non_dns_labels_refused(name: str) -> None:
    with pytest.raises(InvalidInput) as err:
        check_name("name", name)
    assert err.value.field == "name" and err.value.value == name
    assert "DNS-1123" in err.value.message


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True))
def test_every_dns_label_is_accepted(name: str) -> None:
    assert check_name("name", name) == name


@pytest.mark.parametrize("version", ["v1.35.0", "v1.36.2+k3s1", "1.37.1", "v1.38.9-rc.1"])
def test_kubernetes_window_accepted(version: str) -> None:
    check_kubernetes_version("--kubernetes-version", version)


@pytest.mark.parametrize("version", ["v1.34.9+k3s1", "v1.39.0", "v2.0.0", "v1.3.5"])
def test_kubernetes_outside_window_refused(version: str) -> None:
    with pytest.raises(InvalidInput) as err:
        check_kubernetes_version("--kubernetes-version", version)
    assert err.value.code == "KUBERNETES_VERSION_UNSUPPORTED"
    assert "v1.35 through v1.38" in err.value.message and version in err.value.message


def test_garbage_version_refused() -> None:
    with pytest.raises(InvalidInput, match="Kubernetes version"):
        check_kubernetes_version("--kubernetes-version", "latest")


@pytest.mark.parametrize("count", [1, 2, 10])
def test_equal_counts_accepted(count: int) -> None:
    assert check_vm_counts(count, count) == count


@pytest.mark.parametrize(("lo", "hi", "field"), [
    (0, 0, "--min-vms"), (-1, -1, "--min-vms"), (1, 2, "--max-vms"), (3, 2, "--max-vms"),
])
def test_unequal_or_empty_counts_refused(lo: int, hi: int, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        check_vm_counts(lo, hi)
    assert err.value.field == field


@pytest.mark.parametrize(("provider", "region", "zone"), [
    ("aws", "us-east-1", "us-east-1a"),
    ("gcp", "us-central1", "us-central1-a"),
    ("azure", "eastus", "1"),
    ("azure", "eastus", None),
])
def test_zone_belongs_to_region(provider: str, region: str, zone: str | None) -> None:
    vm = next(t.name for t in CATALOG.providers[provider].vm_types if t.arch == "x86_64")
    placed = check_placement(CATALOG, provider, region, zone, vm)
    assert placed.zone == zone and placed.region == region


@pytest.mark.parametrize(("provider", "region"), [("aws", "us-east-1"), ("gcp", "us-central1")])
def test_omitted_zone_is_fixed_at_creation(provider: str, region: str) -> None:
    vm = next(t.name for t in CATALOG.providers[provider].vm_types if t.arch == "x86_64")
    assert check_placement(CATALOG, provider, region, None, vm).zone == (
        CATALOG.providers[provider].regions[region][0]
    )


@pytest.mark.parametrize(("provider", "region", "zone", "rule"), [
    ("aws", "us-east-1", "us-west-2a", "must belong to --region us-east-1"),
    ("aws", "us-east-1", "us-east-1", "must belong to --region us-east-1"),
    ("aws", "us-east-1", "us-east-1z", "must be one of us-east-1's zones"),
    ("gcp", "us-central1", "us-east1-b", "must belong to --region us-central1"),
    ("gcp", "us-central1", "us-central1-aa", "must belong to --region us-central1"),
    ("azure", "eastus", "12", "single digit"),
    ("azure", "eastus", "a", "single digit"),
    ("azure", "eastus", "eastus-1", "single digit"),
    ("azure", "eastus", "7", "must be one of eastus's zones"),
])
def test_zone_outside_region_refused(provider: str, region: str, zone: str, rule: str) -> None:
    vm = next(t.name for t in CATALOG.providers[provider].vm_types if t.arch == "x86_64")
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, provider, region, zone, vm)
    assert err.value.field == "--zone" and err.value.value == zone
    assert rule in err.value.message


def test_unknown_region_refused() -> None:
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "aws", "us-central1", None, "m7i.large")
    assert err.value.field == "--region" and "aws region" in err.value.message


def test_provider_without_isolated_networking_refused() -> None:
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "lambda", "us-west-1", None, "gpu_1x_a10")
    assert err.value.code == "PROVIDER_UNSUPPORTED"
    assert err.value.field == "--credentials"
    assert "isolated capacity networking (aws, azure, gcp)" in err.value.message


@pytest.mark.parametrize(("provider", "vm"), [
    ("aws", "m7g.large"), ("aws", "g5g.xlarge"), ("gcp", "t2a-standard-4"),
    ("azure", "Standard_D4ps_v5"),
])
def test_arm64_types_refused(provider: str, vm: str) -> None:
    region = next(iter(CATALOG.providers[provider].regions))
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, provider, region, None, vm)
    assert err.value.field == "--vm-type" and "x86_64" in err.value.message


@pytest.mark.parametrize(("provider", "vm"), [
    ("aws", "n2-standard-4"), ("gcp", "m7i.large"), ("azure", "nope"),
])
def test_types_outside_the_providers_catalog_refused(provider: str, vm: str) -> None:
    region = next(iter(CATALOG.providers[provider].regions))
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, provider, region, None, vm)
    assert err.value.field == "--vm-type" and "in the catalog" in err.value.message


def _with_offerings(provider: str, region: str, offered: dict[str, list[str]]) -> Catalog:
    cloud = CATALOG.providers[provider]
    limited = cloud.model_copy(update={"offerings": {region: offered}})
    return CATALOG.model_copy(update={"providers": {**CATALOG.providers, provider: limited}})


@pytest.mark.parametrize(("provider", "region", "vm", "offered", "chosen"), [
    ("aws", "us-east-1", "m7i.large", ["us-east-1c", "us-east-1b"], "us-east-1b"),
    ("gcp", "us-central1", "n2-standard-4", ["us-central1-f"], "us-central1-f"),
])
def test_omitted_zone_is_one_that_offers_the_type(provider: str, region: str, vm: str,
                                                  offered: list[str], chosen: str) -> None:
    catalog = _with_offerings(provider, region, {vm: offered})
    placed = check_placement(catalog, provider, region, None, vm)
    assert placed.zone == chosen and placed.zone_chosen  # the region's zone order decides
    assert not check_placement(catalog, provider, region, chosen, vm).zone_chosen


def test_explicit_zone_must_offer_the_type() -> None:
    catalog = _with_offerings("aws", "us-east-1", {"m7i.large": ["us-east-1b", "us-east-1c"]})
    with pytest.raises(InvalidInput) as err:
        check_placement(catalog, "aws", "us-east-1", "us-east-1a", "m7i.large")
    assert err.value.field == "--zone" and err.value.value == "us-east-1a"
    assert "must offer --vm-type m7i.large: us-east-1b, us-east-1c do" in err.value.message


def test_type_offered_nowhere_in_the_region_refused() -> None:
    catalog = _with_offerings("aws", "us-east-1", {"m7i.xlarge": ["us-east-1a"]})
    with pytest.raises(InvalidInput) as err:
        check_placement(catalog, "aws", "us-east-1", None, "m7i.large")
    assert err.value.field == "--vm-type" and err.value.value == "m7i.large"
    assert "no zone offers it" in err.value.message


def test_region_without_offering_data_assumes_every_zone() -> None:
    catalog = _with_offerings("aws", "us-west-2", {"m7i.large": ["us-west-2b"]})
    placed = check_placement(catalog, "aws", "us-east-1", None, "m7i.large")
    assert placed.zone == "us-east-1a" and placed.zone_chosen
