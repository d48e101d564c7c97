"""Every creation rule of the node-pool seed, with the seed's own examples."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from automation.catalog.store import load_catalog
from automation.errors import InvalidInput
from automation.validation import (
    MAX_VMS,
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


@pytest.mark.parametrize("count", [1, 2, 10, MAX_VMS])
def test_equal_counts_accepted(count: int) -> None:
    assert check_vm_counts(count, count) == count


@pytest.mark.parametrize(("lo", "hi", "field"), [
    (0, 0, "--min-vms"), (-1, -1, "--min-vms"), (1, 2, "--max-vms"), (3, 2, "--max-vms"),
    (MAX_VMS + 1, MAX_VMS + 1, "--min-vms"), (2**31, 2**31, "--min-vms"),
    (2**63, 2**63, "--min-vms"),
])
def test_unequal_or_empty_counts_refused(lo: int, hi: int, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        check_vm_counts(lo, hi)
    assert err.value.field == field


# Placement over the real catalog (data/catalog.sqlite, built from public data).


@pytest.mark.parametrize(("provider", "region", "zone", "vm"), [
    ("aws", "us-east-1", "us-east-1a", "m5.xlarge"),
    ("gcp", "us-central1", "us-central1-a", "n2-standard-4"),
    ("azure", "eastus", "1", "Standard_D4s_v5"),
    ("azure", "eastus", None, "Standard_D4s_v5"),
])
def test_usual_types_accepted_in_their_usual_regions(
    provider: str, region: str, zone: str | None, vm: str
) -> None:
    placed = check_placement(CATALOG, provider, region, zone, vm)
    assert placed.zone == zone and placed.region == region and placed.vm_type.name == vm


@pytest.mark.parametrize(("provider", "region", "vm", "chosen"), [
    # us-east-1e does not offer m5.xlarge; the region's first zone does.
    ("aws", "us-east-1", "m5.xlarge", "us-east-1a"),
    ("gcp", "us-central1", "n2-standard-4", "us-central1-a"),
    # p3dn.24xlarge: us-east-1c and -1d only; a3-ultragpu-8g: us-central1-b only.
    ("aws", "us-east-1", "p3dn.24xlarge", "us-east-1c"),
    ("gcp", "us-central1", "a3-ultragpu-8g", "us-central1-b"),
])
def test_omitted_zone_is_the_first_that_offers_the_type(
    provider: str, region: str, vm: str, chosen: str
) -> None:
    placed = check_placement(CATALOG, provider, region, None, vm)
    assert placed.zone == chosen and placed.zone_chosen
    assert not check_placement(CATALOG, provider, region, chosen, vm).zone_chosen


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
    ("azure", "westus", "1", "must be omitted: westus has no zones"),
])
def test_zone_outside_region_refused(provider: str, region: str, zone: str, rule: str) -> None:
    vm = {"aws": "m5.xlarge", "gcp": "n2-standard-4", "azure": "Standard_D4s_v5"}[provider]
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
    ("gcp", "c4a-standard-4"), ("azure", "Standard_D4ps_v5"),
])
def test_arm64_types_refused(provider: str, vm: str) -> None:
    region = CATALOG.providers[provider].regions_offering(vm)[0]
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, provider, region, None, vm)
    assert err.value.field == "--vm-type" and err.value.value == vm
    assert "x86_64 only" in err.value.message


@pytest.mark.parametrize(("provider", "region", "vm"), [
    ("aws", "us-east-1", "n2-standard-4"), ("gcp", "us-central1", "m7i.large"),
    ("azure", "eastus", "nope"),
])
def test_types_outside_the_providers_catalog_refused(provider: str, region: str, vm: str) -> None:
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, provider, region, None, vm)
    assert err.value.field == "--vm-type" and err.value.value == vm
    assert "in the catalog" in err.value.message


def test_unknown_type_names_the_closest_real_ones_in_the_region() -> None:
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "aws", "us-east-1", None, "m5.xlarg")
    assert err.value.field == "--vm-type" and err.value.value == "m5.xlarg"
    assert err.value.message.endswith("did you mean m5.xlarge, m5n.xlarge?")
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "gcp", "us-central1", None, "n2-standrd-4")
    assert "did you mean n2-standard-4" in err.value.message


def test_real_ec2_type_outside_the_families_says_so() -> None:
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "aws", "us-east-1", None, "r5.large")
    assert err.value.field == "--vm-type" and err.value.value == "r5.large"
    assert "r5.large is a real aws type of a memory-optimised family" in err.value.message
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "aws", "us-east-1", None, "mac2.metal")
    assert "macOS" in err.value.message


def test_explicit_zone_must_offer_the_type_and_says_which_do() -> None:
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "aws", "us-east-1", "us-east-1e", "m5.xlarge")
    assert err.value.field == "--zone" and err.value.value == "us-east-1e"
    assert err.value.message == (
        "--zone 'us-east-1e': must offer --vm-type m5.xlarge: "
        "us-east-1a, us-east-1b, us-east-1c, us-east-1d, us-east-1f do"
    )


def test_type_not_offered_in_the_region_says_where_it_is() -> None:
    with pytest.raises(InvalidInput) as err:
        check_placement(CATALOG, "aws", "us-east-1", None, "p5e.48xlarge")
    assert err.value.field == "--vm-type" and err.value.value == "p5e.48xlarge"
    assert "must be offered in --region us-east-1: offered in ap-southeast-2, " in (
        err.value.message
    )
    assert "us-west-2" in err.value.message


def test_type_with_unknown_zones_may_use_every_zone_of_the_region() -> None:
    # The GCP zone data does not cover c4-highcpu-288-metal in us-central1: every zone of the
    # region is assumed (the cloud refuses at create time if not).
    cloud = CATALOG.providers["gcp"]
    offering = cloud.offering("c4-highcpu-288-metal", "us-central1")
    assert offering is not None and offering.zones is None
    placed = check_placement(CATALOG, "gcp", "us-central1", None, "c4-highcpu-288-metal")
    assert placed.zone == "us-central1-a" and placed.zone_chosen
    check_placement(CATALOG, "gcp", "us-central1", "us-central1-f", "c4-highcpu-288-metal")


def test_seed_rules_over_the_whole_catalog() -> None:
    """Every listed type of every isolated cloud: arm64 refused with the seed's reason in a
    region offering it; x86_64 accepted there, in a zone that offers it."""
    for key in CATALOG.isolated_providers:
        cloud = CATALOG.providers[key]
        offerings = {t.name: cloud.offerings(t.name) for t in cloud.vm_types}
        for vm in cloud.vm_types:
            region = offerings[vm.name][0].region
            if vm.arch == "arm64":
                with pytest.raises(InvalidInput, match="x86_64 only"):
                    check_placement(CATALOG, key, region, None, vm.name)
                continue
            placed = check_placement(CATALOG, key, region, None, vm.name)
            zones = offerings[vm.name][0].zones
            if cloud.zone_style == "suffix":
                assert placed.zone in (zones or cloud.regions[region]), (key, vm.name)
            else:
                assert placed.zone is None
