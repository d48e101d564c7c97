"""data/*.toml load into valid pins."""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path

from stacks.pins import DATA_DIR, load_pins


def test_pins_load_and_validate() -> None:
    pins = load_pins()
    assert pins.k3s.version.startswith("v1.35.")
    # "+" in the tag is URL-encoded in the download URL.
    assert pins.k3s.url.endswith("/v1.35.5%2Bk3s1/k3s")
    assert len(pins.k3s.sha256_amd64) == 64
    assert "@sha256:" in pins.device_plugin.image
    assert pins.traefik.version


def test_edge_ranges_are_networks_of_the_right_family() -> None:
    edge = load_pins().edge
    assert edge.ipv4 and edge.ipv6
    assert all(ipaddress.ip_network(n).version == 4 for n in edge.ipv4)
    assert all(ipaddress.ip_network(n).version == 6 for n in edge.ipv6)


def test_every_data_file_names_its_source() -> None:
    for name in ("k3s.toml", "cloudflare.toml", "addons.toml", "images.toml"):
        text = (Path(DATA_DIR) / name).read_text()
        tomllib.loads(text)
        assert "Source" in text or "source" in text, name
        assert "Checked: 20" in text, name
