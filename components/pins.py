"""Pinned external facts the components need, as typed values.

The stack program loads them from ``data/*.toml``; components only receive them, so they stay
free of I/O and tests can pass their own values.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, field_validator

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


class _Pin(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class K3sPin(_Pin):
    version: str
    url: str
    sha256_amd64: str

    @field_validator("sha256_amd64")
    @classmethod
    def _hex(cls, v: str) -> str:
        if not _SHA256.match(v):
            raise ValueError("sha256_amd64 must be 64 lowercase hex characters")
        return v


class EdgeRanges(_Pin):
    """Source ranges admitted to TCP 80 on a pool that hosts a Service (Cloudflare's edge)."""

    ipv4: tuple[str, ...]
    ipv6: tuple[str, ...]


# ``verified``: the pin was checked first-hand (the image looked up in the cloud, the digest
# pulled); False when it only comes from documentation or other people's code. Unverified
# images are warned about when a pool is created and planned.


class AwsImage(_Pin):
    """An AMI lookup: the newest available image of ``owners`` whose name matches ``name``."""

    owners: tuple[str, ...]
    name: str
    architecture: str = "x86_64"
    verified: bool = False

    @property
    def label(self) -> str:
        return f"{'/'.join(self.owners)}:{self.name}"


_GCP_FAMILY = re.compile(r"^projects/(?P<project>[^/]+)/global/images/family/(?P<family>[^/]+)$")


class GcpImage(_Pin):
    """An image family, ``projects/<project>/global/images/family/<family>``."""

    image: str
    verified: bool = False

    @field_validator("image")
    @classmethod
    def _family(cls, v: str) -> str:
        if not _GCP_FAMILY.match(v):
            raise ValueError("must be projects/<project>/global/images/family/<family>")
        return v

    @property
    def project(self) -> str:
        m = _GCP_FAMILY.match(self.image)
        assert m is not None
        return m["project"]

    @property
    def family(self) -> str:
        m = _GCP_FAMILY.match(self.image)
        assert m is not None
        return m["family"]

    @property
    def label(self) -> str:
        return self.image


class AzureImage(_Pin):
    publisher: str
    offer: str
    sku: str
    version: str = "latest"
    verified: bool = False

    @property
    def label(self) -> str:
        """The image URN, as ``az vm create --image`` takes it."""
        return f"{self.publisher}:{self.offer}:{self.sku}:{self.version}"


class ImagePins(_Pin):
    aws_cpu: AwsImage
    aws_gpu: AwsImage
    gcp_cpu: GcpImage
    gcp_gpu: GcpImage
    azure_cpu: AzureImage
    azure_gpu: AzureImage

    def for_vm(self, provider: str, gpu: bool) -> AwsImage | GcpImage | AzureImage:
        """The image pin a VM of ``provider`` takes (CUDA-ready for NVIDIA VM types)."""
        if provider not in ("aws", "gcp", "azure"):
            raise ValueError(f"unsupported provider {provider!r}")
        pin: AwsImage | GcpImage | AzureImage = getattr(
            self, f"{provider}_{'gpu' if gpu else 'cpu'}"
        )
        return pin


class TraefikPin(_Pin):
    repo: str
    chart: str
    version: str
    verified: bool = False


class DevicePluginPin(_Pin):
    image: str
    verified: bool = False

    @field_validator("image")
    @classmethod
    def _digest(cls, v: str) -> str:
        # A tag alone can move; the add-on must run exactly the reviewed image.
        if not re.search(r"@sha256:[0-9a-f]{64}$", v):
            raise ValueError("device plugin image must be pinned by @sha256 digest")
        return v


class Pins(_Pin):
    k3s: K3sPin
    edge: EdgeRanges
    images: ImagePins
    traefik: TraefikPin
    device_plugin: DevicePluginPin
