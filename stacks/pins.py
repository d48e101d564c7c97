"""Load the pinned facts in ``data/*.toml`` into the typed pins the components take."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from components.pins import (
    AwsImage,
    AzureImage,
    DevicePluginPin,
    EdgeRanges,
    GcpImage,
    ImagePins,
    K3sPin,
    Pins,
    TraefikPin,
)
from stacks.data_dir import DATA_DIR


def _read(data_dir: Path, name: str) -> dict[str, Any]:
    with (data_dir / name).open("rb") as f:
        return tomllib.load(f)


def _image(images: dict[str, Any], provider: str, kind: str) -> dict[str, Any]:
    """One ``[provider.kind]`` table; ``verified`` is False unless the file says true."""
    table = dict(images[provider][kind])
    table["verified"] = bool(table.get("verified", False))
    return table


def load_pins(data_dir: Path = DATA_DIR) -> Pins:
    return _load(str(data_dir))


@lru_cache(maxsize=4)
def _load(data_dir_str: str) -> Pins:
    data_dir = Path(data_dir_str)
    k3s = _read(data_dir, "k3s.toml")
    edge = _read(data_dir, "cloudflare.toml")
    addons = _read(data_dir, "addons.toml")
    images = _read(data_dir, "images.toml")
    return Pins(
        k3s=K3sPin(
            version=k3s["version"],
            url=k3s["url_template"].format(version=quote(k3s["version"], safe="")),
            sha256_amd64=k3s["sha256_amd64"],
        ),
        edge=EdgeRanges(ipv4=tuple(edge["ipv4"]), ipv6=tuple(edge["ipv6"])),
        images=ImagePins(
            aws_cpu=AwsImage(**_image(images, "aws", "cpu")),
            aws_gpu=AwsImage(**_image(images, "aws", "gpu")),
            gcp_cpu=GcpImage(**_image(images, "gcp", "cpu")),
            gcp_gpu=GcpImage(**_image(images, "gcp", "gpu")),
            azure_cpu=AzureImage(**_image(images, "azure", "cpu")),
            azure_gpu=AzureImage(**_image(images, "azure", "gpu")),
        ),
        traefik=TraefikPin(
            repo=addons["traefik"]["repo"],
            chart=addons["traefik"]["chart"],
            version=addons["traefik"]["version"],
            verified=addons["traefik"].get("verified", False),
        ),
        device_plugin=DevicePluginPin(
            image=addons["nvidia_device_plugin"]["image"],
            verified=addons["nvidia_device_plugin"].get("verified", False),
        ),
    )
