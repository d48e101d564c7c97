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


class AwsImage(_Pin):
    owners: tuple[str, ...]
    name: str
    architecture: str = "x86_64"


class AzureImage(_Pin):
    publisher: str
    offer: str
    sku: str
    version: str = "latest"


class ImagePins(_Pin):
    aws_cpu: AwsImage
    aws_gpu: AwsImage
    gcp_cpu: str
    gcp_gpu: str
    azure_cpu: AzureImage
    azure_gpu: AzureImage


class TraefikPin(_Pin):
    repo: str
    chart: str
    version: str


class DevicePluginPin(_Pin):
    image: str

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
