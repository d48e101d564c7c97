"""AWS from pinned PyPI wheels: moto (types, zone offerings), libcloud (prices), botocore
(valid names)."""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime
from typing import Any

from tools.catalog.rows import Collected, Offering, OtherType, Region, Source, VmType
from tools.catalog.wheels import Wheel, pins

TYPES_MEMBER = "moto/ec2/resources/instance_types.json.gz"
OFFERINGS_PREFIX = "moto/ec2/resources/instance_type_offerings/availability-zone/"
PRICING_MEMBER = "libcloud/data/pricing.json"
EC2_MODEL = "botocore/data/ec2/2016-11-15/service-2.json.gz"

# The family is the letters before the generation digit (m7i -> m, hpc7a -> hpc, mac2 -> mac).
_FAMILY_LETTERS = re.compile(r"([a-z]+)\d")
GENERAL = {"m", "t", "a"}
COMPUTE = {"c"}
GPU = {"g", "p"}  # only with an NVIDIA GpuInfo of whole devices
OTHER_FAMILIES = {
    "r": "memory-optimised", "x": "memory-optimised", "u": "memory-optimised",
    "z": "memory-optimised", "i": "storage-optimised", "d": "storage-optimised",
    "h": "storage-optimised", "im": "storage-optimised", "is": "storage-optimised",
    "mac": "macOS (dedicated hosts)", "hpc": "HPC",
}


def family_letters(name: str) -> str:
    m = _FAMILY_LETTERS.match(name.split(".")[0])
    return m.group(1) if m else name.split(".")[0]


def _nvidia_gpus(spec: dict[str, Any]) -> tuple[int, str] | None:
    """(count, model) of whole NVIDIA devices, or None (no GPU, another maker, a partition)."""
    gpus = spec.get("GpuInfo", {}).get("Gpus", [])
    if len(gpus) != 1 or gpus[0].get("Manufacturer") != "NVIDIA" or gpus[0].get("Count", 0) < 1:
        return None
    return int(gpus[0]["Count"]), f"NVIDIA {gpus[0]['Name']}"


def classify(name: str, spec: dict[str, Any]) -> tuple[str, int, str | None] | str:
    """(family, gpus, gpu model) of a type in our families, else why it is outside them."""
    letters = family_letters(name)
    if letters in GENERAL:
        return "general-purpose", 0, None
    if letters in COMPUTE:
        return "compute-optimised", 0, None
    if letters in GPU:
        gpu = _nvidia_gpus(spec)
        if gpu is not None:
            return "gpu", gpu[0], gpu[1]
        return "accelerated, not whole NVIDIA GPUs"
    return OTHER_FAMILIES.get(letters, "other accelerated or special-purpose")


def _arch(spec: dict[str, Any]) -> str | None:
    archs = spec["ProcessorInfo"]["SupportedArchitectures"]
    if "x86_64" in archs:
        return "x86_64"
    return "arm64" if "arm64" in archs else None


def collect() -> Collected:
    pin = pins()
    moto, libcloud, botocore = (
        Wheel(pin["moto"]), Wheel(pin["apache-libcloud"]), Wheel(pin["botocore"])
    )
    pricing = json.loads(libcloud.read(PRICING_MEMBER))
    priced_on = datetime.fromtimestamp(int(pricing["updated"]), UTC).date().isoformat()
    out = Collected(sources=[
        Source("aws-types", "moto: EC2 DescribeInstanceTypes answer (instance_types.json.gz)",
               moto.url(), moto.pin.licence, moto.member_date(TYPES_MEMBER)),
        Source("aws-offerings",
               "moto: EC2 DescribeInstanceTypeOfferings per availability zone",
               moto.url(), moto.pin.licence,
               moto.member_date(OFFERINGS_PREFIX + "us-east-1.json.gz")),
        Source("aws-prices", "apache-libcloud: EC2 Linux on-demand prices (pricing.json)",
               libcloud.url(), libcloud.pin.licence, priced_on, stale=True,
               note="stale: some prices differ from today's list price; 0 there is unknown here"),
        Source("aws-names", "botocore: the EC2 service model's InstanceType enum",
               botocore.url(), botocore.pin.licence, botocore.member_date(EC2_MODEL)),
    ])
    specs: dict[str, Any] = json.loads(gzip.decompress(moto.read(TYPES_MEMBER)))
    model = json.loads(gzip.decompress(botocore.read(EC2_MODEL)))
    valid = set(model["shapes"]["InstanceType"]["enum"])
    unknown = sorted(set(specs) - valid)
    if unknown:
        raise ValueError(f"moto lists EC2 types botocore does not know: {', '.join(unknown[:5])}")
    ours: set[str] = set()
    for name in sorted(specs):
        spec, kind, arch = specs[name], classify(name, specs[name]), _arch(specs[name])
        if isinstance(kind, str) or arch is None:
            continue
        family, gpus, gpu_model = kind
        ours.add(name)
        out.vm_types.append(VmType(
            "aws", name, arch, int(spec["VCpuInfo"]["DefaultVCpus"]),
            round(spec["MemoryInfo"]["SizeInMiB"] / 1024, 3), gpus, gpu_model, family,
            "aws-types",
        ))
    for name in sorted(valid - ours):
        kind = classify(name, specs.get(name, {}))
        reason = kind if isinstance(kind, str) else "not in the moto data"
        out.other_types.append(OtherType("aws", name, reason, "aws-names"))
    prices: dict[str, dict[str, float]] = pricing["compute"]["ec2_linux"]
    for member in moto.members(OFFERINGS_PREFIX):
        region = member[len(OFFERINGS_PREFIX):].removesuffix(".json.gz")
        zones_of: dict[str, set[str]] = {}
        for row in json.loads(gzip.decompress(moto.read(member))):
            zones_of.setdefault(row["InstanceType"], set()).add(row["Location"])
        region_zones = sorted(set().union(*zones_of.values())) if zones_of else []
        out.regions.append(Region("aws", region, tuple(region_zones), "aws-offerings"))
        for name in sorted(ours & set(zones_of)):
            price = prices.get(name, {}).get(region)
            out.offerings.append(Offering(
                "aws", name, region, tuple(sorted(zones_of[name])), "aws-offerings",
                round(price, 6) if price else None,  # libcloud's 0 means unknown
                "aws-prices" if price is not None else None,
            ))
    return out
