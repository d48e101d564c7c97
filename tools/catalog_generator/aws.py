"""AWS from pinned PyPI wheels: moto (types, zone offerings), libcloud (prices), botocore
(valid names)."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime
from typing import Any

# The families kept and why others are left out: one copy, shared with the live refresh.
from automation.catalog.refresh.aws_families import arch as spec_arch
from automation.catalog.refresh.aws_families import classify
from tools.catalog_generator.rows import Collected, Offering, OtherType, Region, Source, VmType
from tools.catalog_generator.wheels import Wheel, pins

TYPES_MEMBER = "moto/ec2/resources/instance_types.json.gz"
OFFERINGS_PREFIX = "moto/ec2/resources/instance_type_offerings/availability-zone/"
PRICING_MEMBER = "libcloud/data/pricing.json"
EC2_MODEL = "botocore/data/ec2/2016-11-15/service-2.json.gz"


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
        spec, kind, arch = specs[name], classify(name, specs[name]), spec_arch(specs[name])
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
