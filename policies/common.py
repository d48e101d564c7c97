"""What the rule modules share: the clock (``Clock``, ``utc_now``), the VM resource kinds
(``VM_KINDS``) and the tiny helpers ``report_at``, ``as_int``, ``has_key``, ``nonempty``.

Scope decision: every VM resource in the stack is treated as a pool VM (AWS instances, spot
requests, launch templates and configurations; GCP instances and instance templates; Azure
VMs and scale sets), whether or not it carries the ``anycloud.sh/node-pool`` tag. A VM that
lacks the tag is itself a violation of ``pool-labels-and-taint``; it is not exempt from the
other rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies.wire import is_mapping

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


# --- resource kinds -----------------------------------------------------------------------------


@dataclass(frozen=True)
class VmKind:
    provider: str
    # Templates describe VMs created elsewhere: no per-VM attempt tag can be required on them.
    template: bool


AWS_INSTANCE = "aws:ec2/instance:Instance"
AWS_SPOT = "aws:ec2/spotInstanceRequest:SpotInstanceRequest"
AWS_LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
AWS_LAUNCH_CONFIG = "aws:ec2/launchConfiguration:LaunchConfiguration"
GCP_INSTANCE = "gcp:compute/instance:Instance"
GCP_INSTANCE_FROM_TEMPLATE = "gcp:compute/instanceFromTemplate:InstanceFromTemplate"
GCP_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GCP_REGION_TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
AZURE_VM = "azure-native:compute:VirtualMachine"
AZURE_VMSS = "azure-native:compute:VirtualMachineScaleSet"

VM_KINDS: dict[str, VmKind] = {
    AWS_INSTANCE: VmKind("aws", False),
    AWS_SPOT: VmKind("aws", False),
    AWS_LAUNCH_TEMPLATE: VmKind("aws", True),
    AWS_LAUNCH_CONFIG: VmKind("aws", True),
    GCP_INSTANCE: VmKind("gcp", False),
    GCP_INSTANCE_FROM_TEMPLATE: VmKind("gcp", False),
    GCP_TEMPLATE: VmKind("gcp", True),
    GCP_REGION_TEMPLATE: VmKind("gcp", True),
    AZURE_VM: VmKind("azure", False),
    AZURE_VMSS: VmKind("azure", True),
}


# --- helpers ------------------------------------------------------------------------------------


def report_at(
    args: ResourceValidationArgs, report_violation: ReportViolation, message: str
) -> None:
    report_violation(message, args.urn)


def as_int(value: Any) -> int | None:
    """A whole number as int (protobuf sends numbers as doubles), else None."""
    if isinstance(value, bool):
        return None
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        return None
    return int(as_float) if math.isfinite(as_float) and as_float.is_integer() else None


def has_key(mapping: Any, key: str) -> bool:
    # Iterating keys never reads a value, so presence checks work on redacted/unknown values.
    return is_mapping(mapping) and any(k == key for k in mapping)


def nonempty(value: Any) -> bool:
    if value is None or value == "" or value is False:
        return False
    if is_mapping(value) or isinstance(value, list | tuple):
        return len(value) > 0
    try:
        return len(value) > 0  # proxied lists
    except TypeError:
        return True
