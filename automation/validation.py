"""The creation rules of node pools and their neighbours, as pure functions.

Each rule raises ``InvalidInput`` naming the field, the value and the rule; none touches
the ledger, so the services can check everything before they write anything.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from automation.catalog.store import Catalog, ProviderCatalog, VmType
from automation.errors import InvalidInput
from automation.ids import ID_SHAPE_RULE, looks_like_id
from automation.models import DNS_LABEL_PATTERN, MAX_VMS

DNS_LABEL_RULE = (
    "must be a DNS-1123 label: 1-63 lowercase letters, digits or '-', "
    "starting and ending with a letter or digit"
)
_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)

# The pinned K3s agent (v1.35) may join servers up to three minors newer (version skew).
MIN_KUBERNETES = (1, 35)
MAX_KUBERNETES = (1, 38)
KUBERNETES_RULE = "the cluster must run Kubernetes v1.35 through v1.38, the pinned agent's window"
_K8S_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?([-+].*)?")


def check_dns_label(field: str, value: str) -> str:
    """A Kubernetes object's name (an AgentPool's namespace or name): a DNS-1123 label."""
    if not _DNS_LABEL.fullmatch(value):
        raise InvalidInput(field, value, DNS_LABEL_RULE)
    return value


def check_name(field: str, value: str) -> str:
    """The name of a new record of any kind: a DNS-1123 label that is not shaped like an id
    (references take either, so such a name would shadow another record's id)."""
    check_dns_label(field, value)
    if looks_like_id(value):
        raise InvalidInput(field, value, ID_SHAPE_RULE)
    return value


# A Kubernetes quantity as people write them for requests: 500m, 2, 1.5, 4Gi, 10G.
QUANTITY = re.compile(r"(?=.*[1-9])[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")


def check_quantity(field: str, value: str) -> str:
    if not QUANTITY.fullmatch(value):
        raise InvalidInput(field, value, "must be a positive Kubernetes quantity such as 500m, "
                           "2, 4Gi or 10G")
    return value


def parse_kubernetes_version(field: str, value: str) -> tuple[int, int]:
    m = _K8S_VERSION.fullmatch(value.strip())
    if not m:
        raise InvalidInput(field, value, "must be a Kubernetes version such as v1.36.2+k3s1")
    return int(m.group(1)), int(m.group(2))


def check_kubernetes_version(field: str, value: str) -> str:
    if not MIN_KUBERNETES <= parse_kubernetes_version(field, value) <= MAX_KUBERNETES:
        raise InvalidInput(field, value, KUBERNETES_RULE, code="KUBERNETES_VERSION_UNSUPPORTED")
    return value


def check_vm_counts(min_vms: int, max_vms: int) -> int:
    if not 1 <= min_vms <= MAX_VMS:
        raise InvalidInput("--min-vms", min_vms, f"must be 1 to {MAX_VMS}")
    if max_vms != min_vms:
        raise InvalidInput(
            "--max-vms", max_vms, f"must equal --min-vms ({min_vms}): pools have a fixed size"
        )
    return min_vms


@dataclass(frozen=True)
class Placement:
    provider: str
    region: str
    zone: str | None
    vm_type: VmType
    zone_chosen: bool = False  # no --zone given: the first zone offering the type


def check_placement(
    catalog: Catalog, provider: str, region: str, zone: str | None, vm_type: str
) -> Placement:
    """Provider, region, zone and VM type of a new pool; fixed for the pool's whole life."""
    cloud = catalog.provider(provider)
    if cloud is None or not cloud.isolated_networking:
        raise InvalidInput(
            "--credentials", provider,
            "the credential's cloud must support isolated capacity networking "
            f"({', '.join(catalog.isolated_providers)})",
            code="PROVIDER_UNSUPPORTED",
        )
    if region not in cloud.regions:
        raise InvalidInput(
            "--region", region, f"must be a {provider} region: {', '.join(sorted(cloud.regions))}"
        )
    zones = cloud.regions[region]
    if zone is not None:
        _check_zone_shape(provider, cloud.zone_style, region, zones, zone)
    vm = cloud.vm_type(vm_type)  # one indexed lookup
    if vm is None:
        raise InvalidInput("--vm-type", vm_type, _unknown_type_rule(cloud, region, vm_type))
    if vm.arch != "x86_64":
        raise InvalidInput(
            "--vm-type", vm_type,
            f"must be an x86_64 type ({vm_type} is {vm.arch}): the agent runs on x86_64 only",
        )
    offering = cloud.offering(vm_type, region)
    if offering is None:
        elsewhere = cloud.regions_offering(vm_type)
        where = (f"offered in {_some(elsewhere)}" if elsewhere
                 else "no region of the catalog offers it")
        if (note := cloud.region_note(region)) is not None:  # a live refresh says so
            where = f"not offered there {note}; {where}"
        raise InvalidInput(
            "--vm-type", vm_type, f"must be offered in --region {region}: {where}"
        )
    if cloud.zone_style != "suffix":
        return Placement(provider, region, zone, vm)
    # AWS and GCP place a subnet and a VM in one zone, fixed for the pool's life: one that
    # offers the type (an explicit one is checked, an omitted one chosen and said so). Zones
    # the catalog does not know for this type: every zone of the region is assumed.
    offered = zones if offering.zones is None else offering.zones
    if not offered:
        raise InvalidInput(
            "--vm-type", vm_type, f"must be offered in --region {region}: no zone offers it"
        )
    if zone is None:
        return Placement(provider, region, offered[0], vm, zone_chosen=True)
    if zone not in offered:
        raise InvalidInput(
            "--zone", zone, f"must offer --vm-type {vm_type}: {', '.join(offered)} do"
        )
    return Placement(provider, region, zone, vm)


def _check_zone_shape(
    provider: str, zone_style: str, region: str, zones: list[str], zone: str
) -> None:
    if zone_style == "none":
        raise InvalidInput("--zone", zone, f"{provider} takes no zone")
    if zone_style == "digit" and not re.fullmatch(r"\d", zone):
        raise InvalidInput("--zone", zone, f"must be a single digit on {provider} (e.g. 1)")
    if zone_style == "suffix" and not (
        zone.startswith(region) and re.fullmatch(r"-?[a-z]", zone[len(region):])
    ):
        example = f" (e.g. {zones[0]})" if zones else ""
        raise InvalidInput("--zone", zone, f"must belong to --region {region}{example}")
    if not zones:
        raise InvalidInput("--zone", zone, f"must be omitted: {region} has no zones")
    if zone not in zones:
        raise InvalidInput("--zone", zone, f"must be one of {region}'s zones: {', '.join(zones)}")


def _some(names: list[str], limit: int = 8) -> str:
    shown = ", ".join(names[:limit])
    return shown if len(names) <= limit else f"{shown} and {len(names) - limit} more"


def _unknown_type_rule(cloud: ProviderCatalog, region: str, vm_type: str) -> str:
    """Why a name is not a type of the catalog, and what the user probably meant."""
    rule = f"must be a {cloud.key} VM type in the catalog"
    family = cloud.outside_families(vm_type)
    if family is not None:
        rule += (f": {vm_type} is a real {cloud.key} type of a {family} family, outside the "
                 "catalog's general-purpose, compute-optimised and NVIDIA GPU families")
    near = cloud.closest(vm_type, region)
    if near:
        rule += f"; did you mean {', '.join(near)}?"
    return rule
