"""Which EC2 types the catalog keeps: general-purpose, compute-optimised and whole NVIDIA GPUs.

One copy, shared by the catalog generator (``tools/catalog_generator/aws.py``, over moto's recorded
DescribeInstanceTypes answer) and the live refresh (``catalog_refresh.aws``, over the real
one): both read the same ``InstanceTypeInfo`` shape, so a type is in or out for one reason.
"""

from __future__ import annotations

import re
from typing import Any

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


def arch(spec: dict[str, Any]) -> str | None:
    """x86_64 when the type runs it, else arm64, else None (neither: left out)."""
    archs = spec.get("ProcessorInfo", {}).get("SupportedArchitectures", [])
    if "x86_64" in archs:
        return "x86_64"
    return "arm64" if "arm64" in archs else None
